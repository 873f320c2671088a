"""`forklift console`: the operator console in the terminal.

Kept apart from console/cli.py (which registers it) so that importing it never imports the CLI
back; the options are the operator commands' own (console/opskit.py).
"""

from __future__ import annotations

from typing import Annotated

import typer

from forklift import ForkliftError
from forklift.ops import connect as config
from forklift.ops.filters import duration
from forklift_console.opskit import Actor, Dsn, ReadOnlyOpt, Schema, handled, usage

#: Faster than this the console would spend its time refreshing, not showing.
MIN_REFRESH = 0.2

Refresh = Annotated[
    str,
    typer.Option(
        "--refresh", help="Refresh interval, e.g. 2s, 500ms, 1m (+ and - change it live)."
    ),
]


def refresh_seconds(text: str) -> float:
    try:
        seconds = duration(text, "--refresh").total_seconds()
    except ForkliftError as exc:
        raise usage(exc.message) from None
    if seconds < MIN_REFRESH:
        raise usage(f"--refresh {text} is too fast: use at least {MIN_REFRESH}s")
    return seconds


def console(
    dsn: Dsn = None,
    schema: Schema = None,
    actor: Actor = None,
    read_only: ReadOnlyOpt = False,
    refresh: Refresh = "2s",
) -> None:
    """Open the operator console: overview, queues, jobs, dead letters, workers, audit.

    Press ? on any screen for its keys, ctrl+p for every action. With --read-only (or
    FORKLIFT_READ_ONLY=1) every action is disabled, in the console and in the operator API.
    """
    from forklift_console.app import ConsoleApp
    from forklift_console.backend import Backend

    interval = refresh_seconds(refresh)
    with handled():
        schema_name = schema or config.schema_from_env()
        target = config.resolve(dsn, schema=schema_name).dsn
        backend = Backend.open(
            target, schema=schema_name, actor=actor, read_only=read_only or None
        )
        backend.operator.check_role()  # a role that may not write opens the console read-only
    ConsoleApp(backend, interval=interval).run()
