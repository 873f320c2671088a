"""`forklift retention show|set|reset`: how long finished jobs are kept, per state and queue.

The leader prunes by these windows in short batches; every change is audited.
"""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from forklift.ops.retention import Retention
from forklift_console.opskit import (
    Actor,
    Dsn,
    Json,
    ReadOnlyOpt,
    Reason,
    Schema,
    emit_json,
    handled,
    operator,
    out,
    safe,
    seconds,
)

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
    t = Table(box=None, header_style="bold", pad_edge=False)
    for col in ("queue", "completed", "cancelled", "dead", "set by"):
        t.add_column(col)
    t.add_row("[bold](every queue)[/]", *(window(r.defaults[s]) for s in
              ("completed", "cancelled", "dead")),
              safe(", ".join(sorted({w.updated_by or "?" for w in r.windows if w.queue is None}))))
    for queue in sorted({w.queue for w in r.queues if w.queue}):
        mine = {w.state: w for w in r.queues if w.queue == queue}
        cells = [window(r.for_queue(queue)[s]) + ("" if s in mine else " [dim](default)[/]")
                 for s in ("completed", "cancelled", "dead")]
        t.add_row(safe(queue), *cells,
                  safe(", ".join(sorted({w.updated_by or "?" for w in mine.values()}))))
    out.print(t)


def _emit(r: Retention, as_json: bool) -> None:
    if as_json:
        emit_json(r.to_json())
    else:
        print_retention(r)


@retention_app.command("show")
def show_cmd(
    read_only: ReadOnlyOpt = False, dsn: Dsn = None, schema: Schema = None, as_json: Json = False
) -> None:
    """The windows in force: for every queue, and the queues with windows of their own."""
    with handled(as_json), operator(dsn, schema, None, read_only) as op:
        r = op.retention()
    _emit(r, as_json)


@retention_app.command("set")
def set_cmd(
    state: StateArg,
    keep: Annotated[str, typer.Argument(help="How long: 12h, 7d, 30d, seconds, or 'forever'.")],
    queue: QueueOpt = None,
    create: Annotated[
        bool, typer.Option("--create", help="Set up a queue not seen yet.")
    ] = False,
    reason: Reason = None,
    actor: Actor = None,
    read_only: ReadOnlyOpt = False,
    dsn: Dsn = None,
    schema: Schema = None,
    as_json: Json = False,
) -> None:
    """Keep STATE jobs for KEEP after they finish (the leader deletes older ones)."""
    with handled(as_json), operator(dsn, schema, actor, read_only) as op:
        r = op.set_retention(state, keep, queue=queue, create=create, reason=reason)
    _emit(r, as_json)


@retention_app.command("reset")
def reset_cmd(
    state: StateArg,
    queue: QueueOpt = None,
    reason: Reason = None,
    actor: Actor = None,
    read_only: ReadOnlyOpt = False,
    dsn: Dsn = None,
    schema: Schema = None,
    as_json: Json = False,
) -> None:
    """Drop a queue's own window (or put the every-queue window back to forklift's default)."""
    with handled(as_json), operator(dsn, schema, actor, read_only) as op:
        r = op.reset_retention(state, queue=queue, reason=reason)
    _emit(r, as_json)
