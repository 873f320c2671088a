"""What ``forklift console`` runs: open the operator console on a database.

The CLI finds this function through the ``forklift.console`` entry point ``console`` and hands
it the resolved target (and the replica, if any); the console package imports nothing of the
CLI.
"""

from __future__ import annotations

from forklift.ops.replica import DEFAULT_MAX_LAG


def open_console(
    target: str,
    *,
    schema: str,
    actor: str | None,
    read_only: bool | None,
    interval: float,
    replica_dsn: str | None = None,
    replica_max_lag: float = DEFAULT_MAX_LAG,
) -> None:
    from forklift_console.app import ConsoleApp
    from forklift_console.backend import Backend

    backend = Backend.open(target, schema=schema, actor=actor, read_only=read_only,
                           replica_dsn=replica_dsn, replica_max_lag=replica_max_lag)
    backend.operator.check_role()  # a role that may not write opens the console read-only
    try:
        # A primary given as the replica is refused before the screen opens (the CLI says
        # so in one line); a replica that cannot be reached is not: the header says so.
        backend.operator.session.check_replica()
    except BaseException:
        backend.close()
        raise
    ConsoleApp(backend, interval=interval).run()
