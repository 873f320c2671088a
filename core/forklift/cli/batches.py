"""`forklift batches list|show|cancel|retry-failed`: thin doors onto forklift.ops.batches.

``show --watch`` redraws progress, rate and ETA until the batch finishes. ``cancel`` and
``retry-failed`` say how many targets they act on before asking, and ``--dry-run`` rehearses
them (rolled back).
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Annotated, Any

import typer

from forklift.cli.format import plural, seconds, stamp
from forklift.cli.kit import Call, command, ident, out

if TYPE_CHECKING:
    from rich.console import Group

    from forklift import Batch
    from forklift.ops import Operator
    from forklift.ops.batches import BatchDetail

batches_app = typer.Typer(
    help="Batches: progress, rate and ETA, per-target results; cancel; retry failed targets.",
    no_args_is_help=True,
)
BatchId = Annotated[int, typer.Argument(help="The batch's id.")]


def eta_label(b: Batch) -> str:
    return "–" if b.is_terminal else seconds(b.eta_seconds)


@batches_app.command("list")
@command()
def list_cmd(
    cx: Call,
    state: Annotated[
        str | None, typer.Option("--state", help="running, done, failed, partial or cancelled.")
    ] = None,
    caller: Annotated[str | None, typer.Option("--caller", help="Only this caller's.")] = None,
    limit: Annotated[int, typer.Option(min=1, max=1000, help="At most this many.")] = 50,
    before: Annotated[int | None, typer.Option(
        min=1, max=2**63 - 1, help="The page below this batch id.")] = None,
) -> None:
    """Batches, newest first, with progress, rate and ETA."""
    found = cx.op.batches(state=state, caller=caller, limit=limit, before_id=before)
    if cx.as_json:
        cx.show([b.to_json() for b in found])
        return
    if not found:
        out.print("no batches")
        return
    from rich.table import Table

    from forklift.ops.batchview import progress_bar, rate_label, state_text

    table = Table(box=None, header_style="bold", pad_edge=False)
    for col in ("id", "state", "kind", "caller", "progress", "rate", "eta"):
        table.add_column(col, no_wrap=col in ("state", "progress"),
                         justify="right" if col == "id" else "left")
    for b in found:
        table.add_row(str(b.id), state_text(b.state), ident(b.kind), ident(b.caller),
                      progress_bar(b, 12), rate_label(b.rate), eta_label(b))
    out.print(table)


def render(detail: BatchDetail) -> Group:
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    from forklift.ops.batchview import mode_label, progress_bar, rate_label, state_text
    from forklift.ops.display import clean_text, show_id

    b = detail.batch
    lines: list[Any] = [
        Text.assemble((f"batch {b.id} ", "bold"), state_text(b.state),
                      f"  {show_id(b.kind)}  caller {show_id(b.caller)}  {mode_label(b)}"),
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
            shown.append(show_id(str(t.error.get("code"))), style="red")
            shown.append(" " + clean_text(f"{t.error.get('type') or ''} "
                                          f"{t.error.get('message') or ''}".strip()))
        elif t.result is not None:
            shown.append(clean_text(json.dumps(t.result))[:160])
        table.add_row(str(t.index), str(t.job_id), t.state, f"{t.attempt}/{t.max_attempts}", shown)
    lines.append(table)
    if detail.more_targets:
        last = detail.targets[-1].index if detail.targets else -1
        lines.append(Text(f"  … more targets: --after {last}", style="dim"))
    return Group(*lines)


@batches_app.command("show")
@command()
def show_cmd(
    cx: Call,
    batch_id: BatchId,
    state: Annotated[
        list[str] | None,
        typer.Option("--state", "-s", help="Only targets in these states (waiting, dead, ...)."),
    ] = None,
    after: Annotated[int, typer.Option(
        min=-1, max=2**31 - 1, help="Targets after this index.")] = -1,
    limit: Annotated[int, typer.Option(min=1, max=1000, help="Targets to show.")] = 50,
    watch: Annotated[bool, typer.Option("--watch", "-w", help="Redraw until it finishes.")] = False,
    interval: Annotated[float, typer.Option(min=0.2, help="Seconds between redraws.")] = 1.0,
) -> None:
    """One batch: progress, rate, ETA, and its targets with result or error."""
    states = [p.strip() for s in state or [] for p in s.split(",") if p.strip()] or None
    op = cx.op

    def fetch() -> BatchDetail:
        return op.batch(batch_id, states=states, after_index=after, limit=limit)

    detail = fetch()
    if cx.as_json:
        cx.show(detail)
        return
    if not watch or detail.batch.is_terminal:
        out.print(render(detail))
        return
    from rich.live import Live

    with Live(render(detail), console=out.console, auto_refresh=False) as live:
        while not detail.batch.is_terminal:
            time.sleep(interval)
            detail = fetch()
            live.update(render(detail), refresh=True)


def _running(cx: Call, batch_id: int, verb: str) -> Batch:
    """The batch (BatchNotFound if unknown); refused when it is finished and ``verb`` needs it live."""
    b = cx.op.batch(batch_id, limit=1).batch
    if verb == "cancel" and (b.is_terminal or b.cancel_requested_at is not None):
        already = "being cancelled" if not b.is_terminal else b.state
        cx.fail(f"batch {batch_id} is already {already}: there is nothing to cancel",
                "not_cancellable", batch_id=batch_id, state=b.state)
    return b


@batches_app.command("cancel")
@command(acts=True, confirms=True)
def cancel_cmd(cx: Call, batch_id: BatchId) -> None:
    """Cancel a running batch: waiting targets at once; in-flight targets finish and are kept."""
    before = _running(cx, batch_id, "cancel")

    def cancel(op: Operator) -> tuple[bool, Batch]:
        done = op.cancel_batch(batch_id, reason=cx.reason)
        return done, op.batch(batch_id, limit=1).batch

    if not (cx.yes or cx.dry_run):
        _, would = cx.op.dry_run(cancel)
        cx.confirm(f"Cancel batch {batch_id}: {_cancel_counts(before, would)}?")
    done, after = cx.act(cancel)
    if not done:  # finished between the look and the act
        cx.fail(f"batch {batch_id} finished meanwhile: nothing was cancelled", "not_cancellable",
                batch_id=batch_id)
    cx.done(
        {"batch_id": batch_id, "cancelled": True,
         "targets_cancelled": after.cancelled - before.cancelled, "in_flight": after.in_flight,
         "batch": after.to_json()},
        lambda _: f"batch {batch_id} cancelled: {_cancel_counts(before, after)}",
    )


def _cancel_counts(before: Batch, after: Batch) -> str:
    ended = plural(after.cancelled - before.cancelled, "waiting target")
    return f"{ended} end cancelled, {plural(after.in_flight, 'target')} in flight finish and keep their results"


@batches_app.command("retry-failed")
@command(acts=True, confirms=True)
def retry_failed_cmd(cx: Call, batch_id: BatchId) -> None:
    """Run a batch's failed (dead) targets again, in index order, through its window."""
    before = _running(cx, batch_id, "retry")
    if before.failed and not (cx.yes or cx.dry_run):
        cx.confirm(f"Requeue the {plural(before.failed, 'failed target')} of batch {batch_id}?")
    count = cx.act(lambda op: op.retry_batch(batch_id, reason=cx.reason))
    cx.done(
        {"batch_id": batch_id, "requeued": count},
        lambda _: (f"batch {batch_id}: {plural(count, 'failed target')} requeued" if count
                   else f"batch {batch_id} has no failed targets"),
    )
