"""`forklift console` and `forklift demo`: the faces the ``forklift_console`` package provides.

Textual is an extra: ``pip install forklift`` gives the library, the worker and the scripting
CLI; ``pip install 'forklift[console]'`` adds the console. Without it, ``forklift console`` (and
``forklift demo`` without ``--headless``) say so in one line and exit 1.

The CLI never imports the console package: it finds what to run through the entry points of
group ``forklift.console`` (``console`` and ``demo``), which ``forklift_console`` declares, so
the console depends on the operator API and the CLI depends on neither Textual nor the console.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Annotated, Any

import typer

from forklift.cli.kit import Actor, Call, Dsn, command, fail, usage

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
        found = importlib.util.find_spec("textual") is not None
    except ImportError:  # an import hook that refuses it
        found = False
    if not found:
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
    With --replica-dsn (or FORKLIFT_REPLICA_DSN) the screens read a streaming replica while
    its lag is within --replica-max-lag; actions stay on the primary; the header shows the lag.
    Needs the console extra: pip install 'forklift\\[console]'.
    """
    # (The backslash keeps Rich's help markup from taking [console] for a style tag.)
    require_textual()
    interval = refresh_seconds(refresh)
    from forklift.ops import connect as fc

    schema_name = cx.schema or fc.schema_from_env()
    target = fc.resolve(cx.dsn, schema=schema_name).dsn
    face("console")(target, schema=schema_name, actor=actor, read_only=cx.read_only or None,
                    interval=interval, replica_dsn=cx.replica_dsn or None,
                    replica_max_lag=cx.replica_max_lag)


#: The demo's scenarios (forklift_console.demo_scenarios.SCENARIOS; a test keeps them equal).
SCENARIOS = ("all", "failing", "drain", "batches", "flow", "workflows", "backfill", "horizon")


@command(database=False, json=False)
def demo(
    cx: Call,
    headless: Annotated[
        bool, typer.Option(help="No UI: run --jobs jobs to the end and print a summary.")
    ] = False,
    jobs: Annotated[int, typer.Option(min=1, help="Jobs to run with --headless.")] = 2000,
    concurrency: Annotated[int, typer.Option(min=1)] = 20,
    scenario: Annotated[str, typer.Option(
        help="The traffic to play: " + ", ".join(SCENARIOS) + " (see the console guide).")
    ] = "all",
    pin_horizon: Annotated[bool, typer.Option(
        "--pin-horizon", help="Hold a transaction open from the start, pinning the xmin"
        " horizon for the Health screen (p on Health toggles it).")] = False,
    read_only: Annotated[bool, typer.Option(
        "--read-only", help="Open the console read-only: rehearse what an operator without"
        " write access sees.")] = False,
    dsn: Dsn = None,
) -> None:
    """Run the bundled demo app on the embedded database (or --dsn) and watch jobs flow.

    Its workers run as processes of their own (the console lists them by pid; d on Workers
    drains one with SIGTERM); closing the console stops them all. Without --headless it
    opens the console, which needs the console extra.
    """
    if scenario not in SCENARIOS:
        raise cx.usage(f"--scenario {scenario!r} is not one of: {', '.join(SCENARIOS)}")
    if headless and (scenario != "all" or pin_horizon or read_only):
        raise cx.usage("--scenario, --pin-horizon and --read-only are for the console;"
                       " --headless runs the quick mix only")
    if not headless:
        require_textual("forklift demo (without --headless)")
        raise typer.Exit(face("demo")(headless=False, jobs=jobs, concurrency=concurrency,
                                      dsn=dsn, scenario=scenario, pin_horizon=pin_horizon,
                                      read_only=read_only))
    raise typer.Exit(face("demo")(headless=headless, jobs=jobs, concurrency=concurrency, dsn=dsn))


def face(name: str) -> Callable[..., Any]:
    """The console package's entry point ``name`` (group ``forklift.console``), loaded."""
    found = [ep for ep in entry_points(group="forklift.console") if ep.name == name]
    if not found:
        fail(f"forklift {name} needs the forklift_console package, which is not installed:"
             f" {INSTALL_HINT}", "console_not_installed")
    loaded: Callable[..., Any] = found[0].load()
    return loaded
