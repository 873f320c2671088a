"""`forklift retention show|set|reset`: how long finished jobs are kept, per state and queue.

The leader prunes by these windows in short batches; every change is audited.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from forklift.cli.format import seconds
from forklift.cli.kit import Call, command, ident, out

if TYPE_CHECKING:
    from forklift.ops.retention import Retention

retention_app = typer.Typer(
    help="Retention: how long completed, cancelled and dead jobs are kept (per queue too).",
    no_args_is_help=True,
)

StateArg = Annotated[str, typer.Argument(help="completed, cancelled or dead.")]
QueueOpt = Annotated[
    str | None, typer.Option("--queue", "-q", help="One queue (default: every queue).")
]


def window(value: float | None) -> str:
    return "forever" if value is None else seconds(value)


def print_retention(r: Retention) -> None:
    from rich.table import Table

    t = Table(box=None, header_style="bold", pad_edge=False)
    for col in ("queue", "completed", "cancelled", "dead", "set by"):
        t.add_column(col)
    t.add_row("[bold](every queue)[/]", *(window(r.defaults[s]) for s in
              ("completed", "cancelled", "dead")),
              ", ".join(sorted({ident(w.updated_by or "?") for w in r.windows if w.queue is None})))
    for queue in sorted({w.queue for w in r.queues if w.queue}):
        mine = {w.state: w for w in r.queues if w.queue == queue}
        cells = [window(r.for_queue(queue)[s]) + ("" if s in mine else " [dim](default)[/]")
                 for s in ("completed", "cancelled", "dead")]
        t.add_row(ident(queue), *cells,
                  ", ".join(sorted({ident(w.updated_by or "?") for w in mine.values()})))
    out.print(t)


def _done(cx: Call, r: Retention) -> None:
    if cx.dry_run and not cx.as_json:
        out.print("dry run: the windows would be [dim](nothing changed)[/]:")
        print_retention(r)
    else:
        cx.show({**r.to_json(), "dry_run": True} if cx.dry_run else r, print_retention)


@retention_app.command("show")
@command()
def show_cmd(cx: Call) -> None:
    """The windows in force: for every queue, and the queues with windows of their own."""
    cx.show(cx.op.retention(), print_retention)


@retention_app.command("set")
@command(acts=True)
def set_cmd(
    cx: Call,
    state: StateArg,
    keep: Annotated[str, typer.Argument(help="How long: 12h, 7d, 30d, seconds, or 'forever'.")],
    queue: QueueOpt = None,
    create: Annotated[
        bool, typer.Option("--create", help="Set up a queue not seen yet.")
    ] = False,
) -> None:
    """Keep STATE jobs for KEEP after they finish (the leader deletes older ones)."""
    r = cx.act(lambda op: op.set_retention(state, keep, queue=queue, create=create,
                                           reason=cx.reason))
    _done(cx, r)


@retention_app.command("reset")
@command(acts=True)
def reset_cmd(cx: Call, state: StateArg, queue: QueueOpt = None) -> None:
    """Drop a queue's own window (or put the every-queue window back to forklift's default)."""
    r = cx.act(lambda op: op.reset_retention(state, queue=queue, reason=cx.reason))
    _done(cx, r)
