"""`forklift console`: the operator console in the terminal (the ``console`` extra).

Textual is an extra: ``pip install forklift`` gives the library, the worker and the scripting
CLI; ``pip install 'forklift[console]'`` adds the console. Without it, ``forklift console`` (and
``forklift demo`` without ``--headless``) say so in one line and exit 1.
"""

from __future__ import annotations

from typing import Annotated

import typer

from forklift_console.opskit import Actor, Call, command, fail, usage

#: Faster than this the console would spend its time refreshing, not showing.
MIN_REFRESH = 0.2
INSTALL_HINT = "pip install 'forklift[console]'"

Refresh = Annotated[
    str,
    typer.Option(
        "--refresh", help="Refresh interval, e.g. 2s, 500ms, 1m (+ and - change it live)."
    ),
]


def require_textual(what: str = "forklift console") -> None:
    """Exit 1 with the one line that says what to install, unless Textual imports."""
    try:
        import textual  # noqa: F401 - the console is about to need it anyway
    except ImportError:
        fail(f"{what} needs the console extra (Textual), which is not installed: {INSTALL_HINT}",
             "console_not_installed")


def refresh_seconds(text: str) -> float:
    from forklift import ForkliftError
    from forklift.ops.filters import duration

    try:
        seconds = duration(text, "--refresh").total_seconds()
    except ForkliftError as exc:
        raise usage(exc.message) from None
    if seconds < MIN_REFRESH:
        raise usage(f"--refresh {text} is too fast: use at least {MIN_REFRESH}s")
    return seconds


@command(json=False)
def console(cx: Call, actor: Actor = None, refresh: Refresh = "2s") -> None:
    """Open the operator console: overview, queues, jobs, dead letters, workers, audit.

    Press ? on any screen for its keys, ctrl+p for every action. With --read-only (or
    FORKLIFT_READ_ONLY=1) every action is disabled, in the console and in the operator API.
    Needs the console extra: pip install 'forklift[console]'.
    """
    require_textual()
    interval = refresh_seconds(refresh)
    from forklift.ops import connect as fc
    from forklift_console.app import ConsoleApp
    from forklift_console.backend import Backend

    schema_name = cx.schema or fc.schema_from_env()
    target = fc.resolve(cx.dsn, schema=schema_name).dsn
    backend = Backend.open(target, schema=schema_name, actor=actor, read_only=cx.read_only or None)
    backend.operator.check_role()  # a role that may not write opens the console read-only
    ConsoleApp(backend, interval=interval).run()
