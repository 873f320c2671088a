"""What ``forklift console`` runs: open the operator console on a database.

The CLI finds this function through the ``forklift.console`` entry point ``console`` and hands
it the resolved target; the console package imports nothing of the CLI.
"""

from __future__ import annotations


def open_console(
    target: str, *, schema: str, actor: str | None, read_only: bool | None, interval: float
) -> None:
    from forklift_console.app import ConsoleApp
    from forklift_console.backend import Backend

    backend = Backend.open(target, schema=schema, actor=actor, read_only=read_only)
    backend.operator.check_role()  # a role that may not write opens the console read-only
    ConsoleApp(backend, interval=interval).run()
