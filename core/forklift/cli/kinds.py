"""`forklift kinds list|versions|pause|resume`: each kind's figures, its live jobs by payload
version (so an operator sees when an old version has drained), and a pause of every job of one
kind, through the operator API (``op.stats.kinds()``, ``op.stats.versions()``, ``op.kinds``). Registered by cli/main.py;
shares options and errors with the other operator commands (cli/kit.py): exit 0 done, 1
refused or failed, 2 usage error.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from forklift.cli.format import seconds
from forklift.cli.kit import Call, command, ident, out
from forklift.cli.workflows import pause_line

if TYPE_CHECKING:
    from rich.table import Table

    from forklift.ops.kinds import KindStats

kinds_app = typer.Typer(
    help="Kinds: their figures, live jobs by payload version; pause and resume every job of one kind.",
    no_args_is_help=True,
)
KindName = Annotated[str, typer.Argument(help="The kind's name.")]


# -- list ---------------------------------------------------------------------------------
def kinds_table(k: KindStats, width: int | None = None) -> Table:
    from rich.table import Table

    t = Table(box=None, header_style="bold", pad_edge=False, title_justify="left",
              title=f"kinds (finished in the last {k.window_seconds / 60:.0f} min)")
    # The weight column only when a listed kind's jobs take more than one slot.
    weighted = any(r.weight is not None for r in k.rows)
    for col in ("queue", "kind", "batch", *(("weight",) if weighted else ()), "done", "/min",
                "dead", "fail%", "p50", "p95", "waiting", "run", "retry"):
        t.add_column(col, justify="left" if col in ("queue", "kind") else "right",
                     overflow="fold")
    for r in k.rows:
        fail = r.attempt_failure_rate
        t.add_row(ident(r.queue), ident(r.kind), "" if r.batch is None else f"{r.batch:,}",
                  *(("" if r.weight is None else f"{r.weight:,}",) if weighted else ()),
                  f"{r.completed:,}", f"{k.per_minute(r):,.1f}", f"{r.dead:,}",
                  "–" if fail is None else f"{fail:.0%}", seconds(r.p50), seconds(r.p95),
                  f"{r.live.get('available', 0) + r.live.get('scheduled', 0):,}",
                  f"{r.live.get('running', 0):,}", f"{r.live.get('retryable', 0):,}")
    return t


@kinds_app.command("list")
@command()
def kinds_list(
    cx: Call,
    window: Annotated[str, typer.Option(help="Finished jobs over this recent window (e.g. 1h).")
                      ] = "1h",
) -> None:
    """Per queue and kind: finished, dead and failed in the window, run times, what waits now,
    a batch kind's batch size (the most jobs one handler call takes), and a weighted kind's
    weight (the most slots one of its jobs listed takes)."""
    from forklift.ops.filters import duration

    cx.show(cx.op.stats.kinds(window=duration(window, "window")), kinds_table)


# -- payload versions ----------------------------------------------------------------------
@kinds_app.command("versions")
@command()
def kinds_versions(
    cx: Call,
    kind: Annotated[list[str] | None, typer.Option("--kind", "-k", help="Kind(s).")] = None,
) -> None:
    """Waiting, running and retrying jobs by queue, kind and payload version (1: a kind
    without versions). An old version whose jobs are gone has drained: its writers and the
    upcasters from it may be retired."""
    data = cx.op.stats.versions(kinds=kind or ())
    if cx.as_json:
        cx.show(data)
        return
    if not data.rows:
        out.print("no live jobs" + (" of these kinds" if kind else ""))
        return
    from rich.table import Table

    t = Table(box=None, header_style="bold", pad_edge=False)
    for col in ("queue", "kind", "version", "waiting", "running", "retrying"):
        t.add_column(col, justify="left" if col in ("queue", "kind") else "right")
    for r in data.rows:
        t.add_row(ident(r.queue), ident(r.kind), f"v{r.version}", f"{r.waiting:,}",
                  f"{r.running:,}", f"{r.retrying:,}")
    out.print(t)
    mixed = sorted({r.kind for r in data.rows if len(data.versions(r.kind)) > 1})
    for k in mixed:
        versions = data.versions(k)
        out.print(f"[dim]{ident(k)}: version {versions[0]} has not drained (live beside"
                  f" version {versions[-1]})[/]")


# -- pauses --------------------------------------------------------------------------------
@kinds_app.command("pause")
@command(acts=True)
def kinds_pause_cmd(cx: Call, name: KindName) -> None:
    """Pause a kind: none of its jobs is started until resumed, new ones included; a running
    workflow of the kind parks at its next step boundary."""
    cx.done(cx.act(lambda op: op.kinds.pause(name, reason=cx.reason)), pause_line)


@kinds_app.command("resume")
@command(acts=True)
def kinds_resume_cmd(cx: Call, name: KindName) -> None:
    """Resume a paused kind: its held jobs are claimable at once when their time has come."""
    cx.done(cx.act(lambda op: op.kinds.resume(name, reason=cx.reason)), pause_line)
