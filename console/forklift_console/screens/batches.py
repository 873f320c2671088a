"""Batches (key 7): one row per batch with its progress bar (done / failed / total), rate, ETA
and state; below, the highlighted batch in detail with the targets that need a look (running,
retrying, failed, next to run). ``C`` cancels the batch, ``r`` retries its failed targets (both
confirmed), enter lists all its targets on the jobs screen."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.widgets import DataTable, Static

from forklift import Batch
from forklift.ops import Operator
from forklift.ops.batches import BatchDetail
from forklift.ops.batchview import mode_label, progress_bar, rate_label, run_rate, state_text
from forklift.ops.display import show_id
from forklift.ops.runbook import command
from forklift_console.plan import Plan
from forklift_console.screens.base import ConsoleScreen
from forklift_console.screens.listing import FILTER_KEY, open_filter
from forklift_console.widgets.filterbar import FilterLine
from forklift_console.widgets.table import Cell, Column, LiveTable
from forklift_console.widgets.text import (
    age,
    duration,
    ident,
    job_state,
    one_line,
    plural,
    until,
)

#: Targets shown under the highlighted batch: the ones worth a look, in index order.
WATCHED = ["running", "retryable", "dead", "available", "waiting"]
SHOWN_TARGETS = 8


def short_bar(b: Batch) -> Text:
    """The bar at 80 columns: six cells, then the targets settled of the total."""
    settled = b.completed + b.failed + b.cancelled
    return progress_bar(b, 6)[:6].append(f" {settled:,}/{b.total:,}")


@dataclass(frozen=True)
class BatchesData:
    batches: list[Batch]
    #: The highlighted batch with its watched targets (None when there are no batches).
    detail: BatchDetail | None


class BatchesScreen(ConsoleScreen[BatchesData]):
    MODE = "batches"
    LAYOUT_TABLE = "batches"
    HELP = (
        "One row per batch, newest first: its state, kind and caller, a progress bar of"
        " completed (█), failed or cancelled (▓) and remaining (░) targets, the rate over the last"
        " minute and the ETA at that rate. Below: the highlighted batch and its targets that are"
        " running, retrying, failed or next in line. C cancels it (waiting targets at once;"
        " running ones finish and keep their results), r runs its failed targets again, enter"
        " lists all its targets on the jobs screen."
    )
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "open", "Its targets"),
        Binding("C", "cancel", "Cancel batch", key_display="C"),
        Binding("r", "requeue", "Retry failed"),
        FILTER_KEY,
    ]
    action_focus_filter = open_filter
    DEFAULT_CSS = """
    BatchesScreen #batches {
        height: 1fr;
        min-height: 4;
    }
    """

    def __init__(self) -> None:
        super().__init__()
        self._data: BatchesData | None = None
        self._batches: dict[str, Batch] = {}
        #: The batch whose targets the next fetch reads (set on the UI thread).
        self._want: int | None = None

    def compose_body(self) -> ComposeResult:
        with Vertical(id="body"):
            yield Static(id="info")
            yield FilterLine("batches", "batches")
            yield LiveTable(self.laid_out_columns(), id="batches")
            yield Static(id="detail")

    def layout_columns(self, narrow: bool) -> list[Column]:
        """At 80 columns the caller and the counts give way (the detail below has both), so
        the rate and the ETA stay in view."""
        return [
            Column("state", "State", 11),
            Column("id", "Batch", 6 if narrow else 7),
            Column("kind", "Kind", None),
            *([] if narrow else [Column("caller", "Caller", 12)]),
            Column("progress", "Progress" if narrow else "Progress (done/failed/total)",
                   16 if narrow else 34),
            Column("rate", "Rate", 9),
            Column("eta", "ETA", 7),
        ]

    def layout_cells(self, key: str, narrow: bool) -> dict[str, Cell]:
        b = self._batches[key]
        return {
            "state": state_text(b.state),
            "id": str(b.id),
            "kind": ident(b.kind, limit=60),
            "caller": ident(b.caller, limit=12),
            "progress": short_bar(b) if narrow else progress_bar(b, 12),
            "rate": rate_label(run_rate(b)),
            "eta": "–" if b.is_terminal else duration(b.eta_seconds),
        }

    def fetch(self, op: Operator) -> BatchesData:
        batches = op.batches(limit=200)
        want = self._want
        if want is None or not any(b.id == want for b in batches):
            want = batches[0].id if batches else None
        detail = None
        if want is not None:
            detail = op.batch(want, states=WATCHED, limit=SHOWN_TARGETS)
        return BatchesData(batches, detail)

    def show(self, data: BatchesData) -> None:
        self._data = data
        self._batches = {str(b.id): b for b in data.batches}
        self.sync_layout([str(b.id) for b in data.batches])
        live = sum(1 for b in data.batches if not b.is_terminal)
        self.query_one("#info", Static).update(
            Text(f"{plural(live, 'live batch', 'live batches')} · {len(data.batches)} shown")
        )
        self._paint_detail()

    def selected(self) -> Batch | None:
        key = self.query_one("#batches", LiveTable).current_key
        return self._batches.get(key) if key is not None else None

    @on(DataTable.RowHighlighted, "#batches")
    def _highlighted(self) -> None:
        b = self.selected()
        if b is not None and b.id != self._want:
            self._want = b.id
            self._paint_detail()
            self.reload()  # its targets

    def _paint_detail(self) -> None:
        box = self.query_one("#detail", Static)
        b = self.selected()
        if b is None:
            box.update(Text("No batches: submit one with app.batch(kind, targets, caller=...).",
                            style="dim"))
            return
        now = self.console.now()
        text = Text()
        text.append_text(state_text(b.state))
        text.append(f" batch {b.id} · ")
        text.append_text(ident(b.kind, limit=40))
        text.append(" · caller ")
        text.append_text(ident(b.caller, limit=30))
        text.append(f" · {mode_label(b)} · created {age(b.created_at, now)} ago\n")
        text.append_text(progress_bar(b, 40))
        text.append(f"\nrate {rate_label(run_rate(b))}")
        if not b.is_terminal:
            text.append(f" · ETA {duration(b.eta_seconds)} · {b.in_flight} in flight")
            if b.cancel_requested_at is not None:
                text.append(" · CANCELLING: in-flight targets finish", style="bold")
        text.append(f" · expires {until(b.expires_at, now)}")
        detail = self._data.detail if self._data is not None else None
        if detail is None or detail.batch.id != b.id:
            box.update(text)
            return
        if detail.targets:
            text.append("\n")
        for t in detail.targets:
            text.append(f"\n  #{t.index:<5} job {t.job_id:<8} ")
            text.append_text(job_state(t.state) if t.state != "waiting" else Text("… waiting"))
            text.append(f"  try {t.attempt}/{t.max_attempts}  ")
            if t.error is not None:
                text.append_text(one_line(f"{t.error.get('code')}: {t.error.get('message') or ''}",
                                          limit=70))
        if detail.more_targets:
            text.append("\n  … enter lists them all", style="dim")
        box.update(text)

    # -- actions ------------------------------------------------------------------------------
    def can(self, action: str) -> bool | None:
        b = self.selected()
        if action == "open":
            return True if b is not None else None
        if action == "cancel":
            return True if b is not None and not b.is_terminal else None
        if action == "requeue":
            ok = b is not None and b.failed > 0 and b.state != "cancelled"
            return True if ok and b is not None and b.cancel_requested_at is None else None
        return True

    def action_open(self) -> None:
        b = self.selected()
        if b is not None:
            self.console.show_jobs(f"batch:{b.id}", came_from="batches")

    def action_cancel(self) -> None:
        b = self.selected()
        if b is None or b.is_terminal:
            return
        batch_id = b.id
        # Released targets (in flight) may still be waiting for a worker: those end now like
        # the held ones. Only the running ones finish; the dialog counts them first.
        limit = max(1, b.in_flight)
        self.console.propose_checked(
            "Cancel",
            lambda op: op.batch(batch_id, states=["running"], limit=limit),
            lambda detail: _cancel_plan(b, len(detail.targets)),
        )

    def action_requeue(self) -> None:
        b = self.selected()
        if b is None or not b.failed:
            return
        batch_id = b.id
        self.console.propose(
            Plan(
                verb="Retry failed targets of",
                noun="batch",
                count=1,
                ids=(batch_id,),
                cli=command("batches", "retry-failed", args=(batch_id,), options={"--yes": True}),
                run=lambda op: op.retry_batch(batch_id),
                report=lambda n: f"batch {batch_id}: {plural(n, 'failed target')} requeued",
            )
        )


def _cancel_plan(b: Batch, running: int) -> Plan:
    """Cancel a batch: its waiting targets (held or released) end now, running ones finish."""
    batch_id = b.id
    waiting = max(0, b.remaining - running)
    scope = (f"batch {batch_id} ({show_id(b.kind)}, caller {show_id(b.caller)}):"
             f" {plural(waiting, 'waiting target')} end cancelled now;"
             f" {plural(running, 'running target')}"
             f" {'finishes and keeps its result' if running == 1 else 'finish and keep their results'};"
             f" {b.settled:,} already settled stay as they are")
    return Plan(
        verb="Cancel",
        noun="batch",
        count=1,
        ids=(batch_id,),
        scope=scope,
        typed_count=False,
        cli=command("batches", "cancel", args=(batch_id,), options={"--yes": True}),
        run=lambda op: op.cancel_batch(batch_id),
        report=lambda done: (
            f"batch {batch_id} cancelled: {plural(waiting, 'waiting target')} will not"
            " run; running ones finish and keep their results"
            if done else f"batch {batch_id} had already finished: nothing to cancel"
        ),
    )
