"""Workflows (command palette: "Workflows"): the outbox per topic and its newest messages, the
newest events, and the jobs parked waiting for one. ``r`` retries the dead messages of the
highlighted topic (confirmed, like every action)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.widgets import Static

from forklift.ops import Operator
from forklift.ops.events import EventInfo, WaitInfo
from forklift.ops.holds import PauseInfo
from forklift.ops.outbox import OutboxMessage, TopicInfo
from forklift.ops.runbook import cli
from forklift.ops.steps import Parked
from forklift_console.plan import Plan
from forklift_console.screens.base import ConsoleScreen
from forklift_console.screens.job import JobScreen
from forklift_console.screens.workflow_actions import paused_words, toggle_workflow_pause
from forklift_console.widgets.table import Column, LiveTable, Row
from forklift_console.widgets.text import (
    count,
    one_line,
    parked_badge,
    plural,
    stamp,
    style_of,
)

PAGE = 50
def parked_state(p: Parked) -> Text:
    """The state cell of a parked job: scheduled's glyph and colour, the reason's word."""
    return parked_badge(p.why)


def parked_words(p: Parked, now: datetime) -> Text:
    """Why it waits, in full: "sleeping until 14:02:07", "waiting for event order.paid"."""
    return one_line(p.describe(lambda at: stamp(at, now)), limit=120)


@dataclass(frozen=True)
class WorkflowsView:
    topics: list[TopicInfo]
    messages: list[OutboxMessage]
    events: list[EventInfo]
    waits: list[WaitInfo]
    pauses: list[PauseInfo] = field(default_factory=list)


class WorkflowsScreen(ConsoleScreen[WorkflowsView]):
    MODE = "workflows"
    NOTHING_TO_OPEN = ("topics, messages and events are shown whole in their rows; enter opens"
                       " a job in the list of jobs waiting for an event")
    HELP = (
        "The transactional outbox: per topic, messages waiting for the relay and dead ones; the"
        " newest messages with their state and last error. Below, the newest events and the"
        " jobs parked waiting for an event. r retries the dead messages of the highlighted"
        " topic; p pauses the highlighted waiting job's workflow, or resumes it (the pauses in"
        " force are named in words above the lists)."
    )
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("r", "retry", "Retry dead messages"),
        Binding("p", "toggle_pause", "Pause/resume workflow", show=False),
    ]

    def compose_body(self) -> ComposeResult:
        with Vertical(id="body"):
            yield Static(id="info")
            yield LiveTable([Column("topic", "Topic", 30), Column("pending", "Pending", 8),
                             Column("dead", "Dead", 6), Column("oldest", "Oldest pending", 19),
                             Column("tries", "Head tries", 10)], id="topics")
            yield LiveTable([Column("id", "Msg", 8), Column("topic", "Topic", 20),
                             Column("state", "State", 10), Column("tries", "Tries", 5),
                             Column("at", "Created", 10), Column("error", "Last error", None)],
                            id="messages")
            yield LiveTable([Column("id", "Event", 8), Column("name", "Name", 24),
                             Column("at", "Published", 10), Column("woke", "Woke", 5),
                             Column("data", "Data", None)], id="events")
            yield LiveTable([Column("job", "Job", 8), Column("kind", "Kind", 20),
                             Column("event", "Waits for", 20), Column("since", "Since", 10),
                             Column("deadline", "Deadline", 19)], id="waits")

    def fetch(self, op: Operator) -> WorkflowsView:
        return WorkflowsView(op.outbox_topics(), op.outbox_messages(limit=PAGE),
                             op.events(limit=PAGE), op.event_waits(limit=PAGE),
                             op.workflows.pauses())

    def show(self, data: WorkflowsView) -> None:
        now = self.console.now()
        dead_style = style_of("state-dead")
        topics: list[Row] = []
        for t in data.topics:
            dead = Text(count(t.dead), style=dead_style if t.dead else "")
            topics.append((t.topic, [one_line(t.topic, limit=30), count(t.pending), dead,
                                     stamp(t.oldest_pending, now), count(t.max_attempts or 0)]))
        self.query_one("#topics", LiveTable).sync(topics)
        messages: list[Row] = []
        for m in data.messages:
            state = Text(m.state, style=dead_style if m.state == "dead" else "")
            error = f"{m.last_error_code}: {m.last_error_message or ''}" if m.last_error_code else ""
            messages.append((m.id, [str(m.id), one_line(m.topic, limit=20), state,
                                    str(m.attempts), stamp(m.created_at, now),
                                    one_line(error, limit=160)]))
        self.query_one("#messages", LiveTable).sync(messages)
        events: list[Row] = [
            (e.id, [str(e.id), one_line(e.name, limit=24), stamp(e.published_at, now),
                    count(e.woke), one_line(e.data_preview, limit=160)]) for e in data.events]
        self.query_one("#events", LiveTable).sync(events)
        waits: list[Row] = [
            (w.job_id, [str(w.job_id), one_line(w.kind, limit=20), one_line(w.event, limit=20),
                        stamp(w.since, now), stamp(w.deadline, now) if w.deadline else "never"])
            for w in data.waits]
        self.query_one("#waits", LiveTable).sync(waits)
        pending = sum(t.pending for t in data.topics)
        dead_total = sum(t.dead for t in data.topics)
        self._paused = {int(p.name) for p in data.pauses if p.target == "workflow"}
        info = Text(
            f"outbox: {pending} pending, {dead_total} dead in {plural(len(data.topics), 'topic')} · "
            f"{plural(len(data.waits), 'job')} waiting for an event")
        info.append_text(paused_words(data.pauses))
        self.query_one("#info", Static).update(info)

    def enter_row(self, table: LiveTable) -> None:
        """enter on a job waiting for an event opens that job; the other lists are shown
        whole."""
        key = table.current_key
        if table.id == "waits" and key is not None:
            self.app.push_screen(JobScreen(int(key)))
        else:
            self.notify(f"enter: {self.NOTHING_TO_OPEN}", title="nothing to open")

    def action_toggle_pause(self) -> None:
        """p: pause the highlighted waiting job's workflow, or resume it if paused."""
        key = self.query_one("#waits", LiveTable).current_key
        if key is None:
            self.notify("highlight a job in the list of jobs waiting for an event first")
            return
        toggle_workflow_pause(self, int(key), int(key) in getattr(self, "_paused", set()))

    def action_retry(self) -> None:
        topic = self.query_one("#topics", LiveTable).current_key
        if topic is None:
            self.notify("highlight a topic with dead messages first")
            return

        def run(op: Operator) -> list[int]:
            return op.retry_outbox(topic=topic, reason="console")

        self.console.propose(Plan(
            verb="Retry dead messages of", noun="topic", count=1, ids=(topic,), run=run,
            cli=cli("outbox", "retry", "--topic", topic, "--yes"),
            report=lambda done: f"{plural(len(done), 'message')} of {topic} pending again"))

    def palette(self) -> Iterable[tuple[str, str, str]]:
        yield ("Go to Workflows", "The outbox per topic, events, jobs waiting for an event",
               "noop")
        yield from super().palette()

    def action_noop(self) -> None:
        """The palette's way here: switching to this screen is the whole action."""
