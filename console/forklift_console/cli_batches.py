"""`forklift batches list|show|cancel|retry-failed`: thin doors onto forklift.ops.batches.

Registered on the main command in console/cli.py. ``show --watch`` redraws progress, rate and
ETA until the batch finishes.
"""

from __future__ import annotations

import json
import time
from typing import Annotated, Any

import typer
from rich.console import Group
from rich.table import Table
from rich.text import Text

from forklift import Batch
from forklift.ops.batches import BatchDetail
from forklift.ops.display import clean_text as clean_display
from forklift_console.batchview import mode_label, progress_bar, rate_label, state_text
from forklift_console.opskit import (
    Actor,
    Dsn,
    Json,
    ReadOnlyOpt,
    Reason,
    Schema,
    Yes,
    confirm,
    emit_json,
    handled,
    operator,
    out,
    safe,
    seconds,
    stamp,
)

batches_app = typer.Typer(
    help="Batches: progress, rate and ETA, per-target results; cancel; retry failed targets.",
    no_args_is_help=True,
)
BatchId = Annotated[int, typer.Argument(help="The batch's id.")]


def eta_label(b: Batch) -> str:
    return "–" if b.is_terminal else seconds(b.eta_seconds)


@batches_app.command("list")
def list_cmd(
    state: Annotated[
        str | None, typer.Option("--state", help="running, done, failed, partial or cancelled.")
    ] = None,
    caller: Annotated[str | None, typer.Option("--caller", help="Only this caller's.")] = None,
    limit: Annotated[int, typer.Option(min=1, max=1000, help="At most this many.")] = 50,
    before: Annotated[int | None, typer.Option(help="The page below this batch id.")] = None,
    dsn: Dsn = None,
    schema: Schema = None,
    as_json: Json = False,
) -> None:
    """Batches, newest first, with progress, rate and ETA."""
    with handled(as_json), operator(dsn, schema) as op:
        found = op.batches(state=state, caller=caller, limit=limit, before_id=before)
    if as_json:
        emit_json([b.to_json() for b in found])
        return
    if not found:
        out.print("no batches")
        return
    table = Table(box=None, header_style="bold", pad_edge=False)
    for col in ("id", "state", "kind", "caller", "progress", "rate", "eta"):
        table.add_column(col, no_wrap=col in ("state", "progress"), justify="right" if col == "id"
                         else "left")
    for b in found:
        table.add_row(str(b.id), state_text(b.state), safe(b.kind), safe(b.caller),
                      progress_bar(b, 12), rate_label(b.rate), eta_label(b))
    out.print(table)


def render(detail: BatchDetail) -> Group:
    b = detail.batch
    lines: list[Any] = [
        Text.assemble((f"batch {b.id} ", "bold"), state_text(b.state),
                      f"  {clean_display(b.kind)}  caller {clean_display(b.caller)}"
                      f"  {mode_label(b)}"),
        Text.assemble("  ", progress_bar(b, 40)),
    ]
    timing = f"  rate {rate_label(detail.rate)}"
    if not b.is_terminal:
        timing += f"  eta {eta_label(b)}  in flight {b.in_flight}"
        if b.cancel_requested_at:
            timing += "  cancelling: in-flight targets finish"
    lines.append(Text(timing + f"  created {stamp(b.created_at)}  expires {stamp(b.expires_at)}"))
    if b.complete_job_id or b.success_job_id:
        lines.append(Text(f"  callbacks: on_complete job {b.complete_job_id or '–'},"
                          f" on_success job {b.success_job_id or '–'}"))
    table = Table(box=None, header_style="bold", pad_edge=False)
    for col in ("#", "job", "state", "try", "result / error"):
        table.add_column(col, no_wrap=col != "result / error")
    for t in detail.targets:
        shown = Text()
        if t.error is not None and t.state != "completed":
            shown.append(clean_display(str(t.error.get("code"))), style="red")
            shown.append(" " + clean_display(f"{t.error.get('type') or ''} "
                                             f"{t.error.get('message') or ''}".strip()))
        elif t.result is not None:
            shown.append(clean_display(json.dumps(t.result))[:160])
        table.add_row(str(t.index), str(t.job_id), t.state, f"{t.attempt}/{t.max_attempts}", shown)
    lines.append(table)
    if detail.more_targets:
        last = detail.targets[-1].index if detail.targets else -1
        lines.append(Text(f"  … more targets: --after {last}", style="dim"))
    return Group(*lines)


@batches_app.command("show")
def show_cmd(
    batch_id: BatchId,
    state: Annotated[
        list[str] | None,
        typer.Option("--state", "-s", help="Only targets in these states (waiting, dead, ...)."),
    ] = None,
    after: Annotated[int, typer.Option(help="Targets after this index.")] = -1,
    limit: Annotated[int, typer.Option(min=1, max=1000, help="Targets to show.")] = 50,
    watch: Annotated[bool, typer.Option("--watch", "-w", help="Redraw until it finishes.")] = False,
    interval: Annotated[float, typer.Option(min=0.2, help="Seconds between redraws.")] = 1.0,
    dsn: Dsn = None,
    schema: Schema = None,
    as_json: Json = False,
) -> None:
    """One batch: progress, rate, ETA, and its targets with result or error."""
    states = [p.strip() for s in state or [] for p in s.split(",") if p.strip()] or None
    with handled(as_json), operator(dsn, schema) as op:

        def fetch() -> BatchDetail:
            return op.batch(batch_id, states=states, after_index=after, limit=limit)

        detail = fetch()
        if as_json:
            emit_json(detail.to_json())
            return
        if not watch or detail.batch.is_terminal:
            out.print(render(detail))
            return
        from rich.live import Live

        with Live(render(detail), console=out, auto_refresh=False) as live:
            while not detail.batch.is_terminal:
                time.sleep(interval)
                detail = fetch()
                live.update(render(detail), refresh=True)


@batches_app.command("cancel")
def cancel_cmd(
    batch_id: BatchId,
    reason: Reason = None,
    actor: Actor = None,
    read_only: ReadOnlyOpt = False,
    yes: Yes = False,
    dsn: Dsn = None,
    schema: Schema = None,
    as_json: Json = False,
) -> None:
    """Cancel a running batch: waiting targets at once; in-flight targets finish and are kept."""
    with handled(as_json):
        confirm(f"cancel batch {batch_id}?", yes, as_json)
        with operator(dsn, schema, actor, read_only) as op:
            done = op.cancel_batch(batch_id, reason=reason)
    if as_json:
        emit_json({"batch_id": batch_id, "cancelled": done})
    elif done:
        out.print(f"batch {batch_id} cancelled; in-flight targets finish and keep their results")
    if not done:
        if not as_json:
            out.print(f"batch {batch_id} is unknown or already finished: nothing to cancel")
        raise typer.Exit(1)


@batches_app.command("retry-failed")
def retry_failed_cmd(
    batch_id: BatchId,
    reason: Reason = None,
    actor: Actor = None,
    read_only: ReadOnlyOpt = False,
    yes: Yes = False,
    dsn: Dsn = None,
    schema: Schema = None,
    as_json: Json = False,
) -> None:
    """Run a batch's failed (dead) targets again, in index order, through its window."""
    with handled(as_json):
        confirm(f"requeue the failed targets of batch {batch_id}?", yes, as_json)
        with operator(dsn, schema, actor, read_only) as op:
            count = op.retry_batch(batch_id, reason=reason)
    if as_json:
        emit_json({"batch_id": batch_id, "requeued": count})
    else:
        out.print(f"batch {batch_id}: {count} failed target(s) requeued" if count
                  else f"batch {batch_id} has no failed targets")
