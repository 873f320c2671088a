"""One job in full (enter on a job): why it is (not) running, progress, lease, timeline, every
attempt's error and log, args and result."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import ProgressBar, Static

from forklift import LIVE_STATES, TERMINAL_STATES, JobNotFound
from forklift.ops import ActionResult, Explanation, JobDetail, Operator
from forklift.ops.holds import PAUSED_UNTIL
from forklift.ops.job_logs import line_text
from forklift.ops.runbook import command
from forklift_console.plan import Plan
from forklift_console.screens.base import ConsoleScreen
from forklift_console.screens.workflow_actions import replay_from_step, toggle_workflow_pause
from forklift_console.widgets.clipboard import copy_out as copy_out  # imported from here
from forklift_console.widgets.text import (
    ident,
    job_state,
    one_line,
    parked_badge,
    plain,
    pretty_json,
    stamp,
    until,
)

#: Innermost traceback frames shown per error.
FRAMES = 4
CLI_VERBS = {"requeue": "retry", "cancel": "cancel", "delete": "delete"}
VERBS = {"requeue": "Requeue", "cancel": "Cancel", "delete": "Delete"}
#: Which states each action applies to: the others show the action disabled.
APPLIES: dict[str, tuple[str, ...]] = {
    "requeue": TERMINAL_STATES,
    "cancel": LIVE_STATES,
    "delete": TERMINAL_STATES,
}


def job_plan(action: str, job_id: int, state: str) -> Plan:
    def run(op: Operator) -> ActionResult:
        fn = {"requeue": op.requeue, "cancel": op.cancel, "delete": op.delete}[action]
        return fn(job_id)

    return Plan(
        verb=VERBS[action],
        noun="job",
        count=1,
        ids=(job_id,),
        cli=command("jobs", CLI_VERBS[action], args=(job_id,), options={"--yes": True}),
        run=run,
        report=_result_text,
    )


def parked_why(detail: JobDetail) -> str | None:
    """Why a scheduled job is parked (a key of :data:`PARKED_WORDS`), or None."""
    if not detail.parked:
        return None
    for step in detail.steps:
        if step.state == "sleeping":
            return "sleeping"
        if step.state == "waiting":
            return "event"
    return "jobs"


def wake_cli(detail: JobDetail) -> str | None:
    """The command that wakes a job parked waiting for an event: publishing that event, with
    data that contains the wait's match (the match itself, when it was read whole)."""
    if not detail.parked:
        return None
    step = next((st for st in detail.steps if st.state == "waiting" and st.event), None)
    if step is None or step.event is None:
        return None
    data: str | None = None
    if step.match:
        try:
            data = json.dumps(json.loads(step.match), separators=(", ", ": "))
        except ValueError:  # cut to the summary's length: say what to send instead
            data = "<JSON containing the match>"
    return command("events", "publish", args=(step.event,), options={"--data": data})


#: What to do instead, by action and the job's state.
_INSTEAD = {
    "requeue": "cancel it first (C) to stop it",
    "delete": "cancel it first (C), then delete it",
    "cancel": "requeue it (r) to run it again, or delete it (D)",
}


def not_applicable(action: str, job_id: int, state: str) -> str:
    """Why ``action`` does not apply to a job in ``state``: ``D`` on an available job."""
    applies = APPLIES[action]
    kind = "finished" if applies == TERMINAL_STATES else "live"
    instead = _INSTEAD[action] if state not in applies else ""
    text = (f"{VERBS[action]} applies to {kind} jobs ({', '.join(applies)});"
            f" job {job_id} is {state}")
    return f"{text}: {instead}" if instead else text


def _result_text(result: ActionResult) -> str:
    words = {
        "requeued": "requeued: it is available again, attempts start over",
        "cancelled": "cancelled",
        "cancel_requested": "cancel requested: its worker is told to stop it",
        "deleted": "deleted",
    }
    return f"job {result.job_id} {words.get(result.outcome, result.outcome)}"


@dataclass(frozen=True)
class JobView:
    detail: JobDetail | None  # None: the job is gone (deleted, or pruned by retention)
    explanation: Explanation | None


class JobScreen(ConsoleScreen[JobView]):
    MODE = "jobs"
    HELP = (
        "One job in full. 'Why' answers why it is (not) running right now. The timeline lists"
        " enqueue, every attempt and the end; every failed attempt keeps its error (code, type,"
        " scrubbed message, innermost frames). r requeues a finished job, C cancels a live one,"
        " D deletes a finished one; R replays a finished workflow from a step you pick (a new"
        " job, opened once made), p pauses or resumes a live workflow; y copies its id, Y its"
        " args (as JSON) to the clipboard; esc goes back to the list."
    )
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", "Back"),
        Binding("r", "act('requeue')", "Requeue"),
        Binding("C", "act('cancel')", "Cancel", key_display="C"),
        Binding("D", "act('delete')", "Delete", key_display="D"),
        Binding("y", "copy('id')", "Copy id"),
        Binding("Y", "copy('args')", "Copy args", key_display="Y"),
        Binding("R", "replay", "Replay from a step", key_display="R", show=False),
        Binding("p", "toggle_pause", "Pause/resume workflow", show=False),
    ]

    def __init__(self, job_id: int) -> None:
        super().__init__()
        self.job_id = job_id
        self._view: JobView | None = None

    @property
    def title_text(self) -> str | None:
        return f"job {self.job_id}"

    def compose_body(self) -> ComposeResult:
        with VerticalScroll(id="body"):
            yield Static(id="head")
            yield Static(id="why")
            with Horizontal(id="progress-row"):
                yield ProgressBar(id="progress", show_eta=False)
                yield Static(id="progress-note")
            yield Static(id="lease")
            yield Static(id="timeline")
            yield Static(id="steps")
            yield Static(id="errors")
            yield Static(id="logs")
            yield Static(id="args")
            yield Static(id="result")

    def on_mount(self) -> None:
        super().on_mount()
        self.query_one("#progress-row").display = False
        self.query_one("#body").focus()

    def fetch(self, op: Operator) -> JobView:
        try:
            detail = op.job(self.job_id)
        except JobNotFound:
            return JobView(None, None)
        return JobView(detail, op.explain(self.job_id))

    def show(self, data: JobView) -> None:
        self._view = data
        self.refresh_bindings()
        now = self.console.now()
        head = self.query_one("#head", Static)
        if data.detail is None:
            head.update(
                Text(f"job {self.job_id} no longer exists: it was deleted or pruned.", style="bold")
            )
            for part in ("#why", "#lease", "#timeline", "#steps", "#errors", "#logs", "#args",
                         "#result"):
                self.query_one(part, Static).update("")
            self.query_one("#progress-row").display = False
            return
        job = data.detail.job
        text = Text().append(f"job {job.id}  ", style="bold")
        text.append_text(ident(job.kind, limit=60))
        text.append("  ")
        why_parked = parked_why(data.detail)
        # A parked job reads as the list says it (waiting, sleeping, held), not "scheduled".
        text.append_text(job_state(job.state) if why_parked is None
                         else parked_badge(why_parked))
        text.append("  queue ")
        text.append_text(ident(job.queue, limit=40))
        aged = f" (given {job.priority_base}, aged)" if job.priority_base is not None else ""
        text.append(f"  priority {job.priority}{aged}  attempt {job.attempt}/{job.max_attempts}")
        extras = []
        if job.payload_version is not None:
            extras.append(f"payload version {job.payload_version}")
        if job.weight is not None:
            extras.append(f"weight {job.weight}")
        if job.tenant is not None:
            extras.append(f"tenant {job.tenant}")
        if job.enqueued_by is not None:
            extras.append(f"enqueued by {job.enqueued_by}")
        if job.tags:
            extras.append("tags " + ", ".join(job.tags))
        if job.unique_key:
            extras.append(f"unique key {job.unique_key}")
        if job.batch_id is not None:
            extras.append(f"batch {job.batch_id}")
        if job.expires_at is not None:
            extras.append(f"start by {job.expires_at:%Y-%m-%d %H:%M:%S %Z}")
        if job.debounce_key is not None:
            extras.append(f"debounce key {job.debounce_key}")
        if job.meta:
            extras.append("meta " + ", ".join(f"{k}={v}" for k, v in job.meta.items()))
        if extras:
            text.append("\n")
            text.append_text(one_line(" · ".join(extras), limit=300))
        head.update(text)

        why = Text().append("Why: ", style="bold")
        if data.explanation is not None and data.explanation.reasons:
            for i, reason in enumerate(data.explanation.reasons):
                if i:
                    why.append("\n     ")
                if reason.code == "scheduled" and data.detail.parked:
                    # Its run_at is a wait's deadline or a placeholder, not when it runs.
                    why.append_text(plain(f"job {job.id} is parked, {data.detail.parked}:"
                                          " it becomes available when that ends"))
                    wake = wake_cli(data.detail)
                    if wake is not None:
                        why.append("\n     ")
                        why.append_text(plain(f"wake it now: {wake}"))
                else:
                    why.append_text(plain(reason.text))
        self.query_one("#why", Static).update(why)

        self._show_progress(job.progress)
        lease = Text()
        if job.worker_id and job.state != "running":
            # A finished or waiting job holds no lease: say where it last ran, not "held by".
            lease.append("Last ran on: ", style="bold")
            lease.append("worker ")
            lease.append_text(ident(job.worker_id, limit=60))
        elif job.worker_id:
            lease.append("Lease: ", style="bold")
            lease.append("held by worker ")
            lease.append_text(ident(job.worker_id, limit=60))
            lease.append(f" (fence {job.fence})")
            if job.lease_expires_at is not None and job.state == "running":
                lease.append(f", expires {until(job.lease_expires_at, now)}")
            if job.cancel_requested_at is not None:
                lease.append(f" · cancel requested {until(job.cancel_requested_at, now)}")
        self.query_one("#lease", Static).update(lease)
        self.query_one("#lease").display = bool(lease)

        timeline = Text().append("Timeline (UTC)\n", style="bold")
        for event in data.detail.timeline:
            when = stamp(_moment(event.at), now) if event.at else ""
            timeline.append(f"  {when:>19}  ")
            timeline.append_text(one_line(event.event, limit=40))
            if event.detail:
                timeline.append("  ")
                timeline.append_text(one_line(event.detail, limit=160))
            timeline.append("\n")
        timeline.rstrip()
        self.query_one("#timeline", Static).update(timeline)

        self.query_one("#steps", Static).update(_steps_text(data.detail, now))
        self.query_one("#steps").display = bool(data.detail.steps or data.detail.parked)

        errors = Text().append(f"Errors ({len(job.errors)})\n", style="bold")
        if not job.errors:
            errors.append("  none\n", style="dim")
        for e in job.errors:
            errors.append_text(_error_text(e))
        errors.rstrip()
        self.query_one("#errors", Static).update(errors)
        self.query_one("#logs", Static).update(_logs_text(data.detail))
        self.query_one("#logs").display = bool(data.detail.logs)

        args = Text().append("Args\n", style="bold")
        args.append_text(pretty_json(job.args))
        self.query_one("#args", Static).update(args)
        result = Text().append("Result\n", style="bold")
        if job.result is None and job.partial is None:
            result.append("none", style="dim")
        else:
            result.append_text(pretty_json(job.result if job.result is not None else job.partial))
            if job.result is None:
                result.append("\n(partial result published while running)", style="dim")
        self.query_one("#result", Static).update(result)

    def _show_progress(self, progress: dict[str, Any] | None) -> None:
        row = self.query_one("#progress-row")
        if not progress:
            row.display = False
            return
        done = float(progress.get("done") or 0)
        total = progress.get("total")
        bar = self.query_one("#progress", ProgressBar)
        bar.update(total=float(total) if total else None, progress=done)
        note = Text(f" {done:g}" + (f"/{float(total):g}" if total else "") + " ")
        if progress.get("note"):
            note.append_text(one_line(progress["note"], limit=80))
        self.query_one("#progress-note", Static).update(note)
        row.display = True

    # -- actions ------------------------------------------------------------------------------
    def can_with(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "act":
            view = self._view
            if view is None or view.detail is None:
                return None
            return True if view.detail.job.state in APPLIES[str(parameters[0])] else None
        if action == "copy" and parameters == ("args",):
            return True if self._view is not None and self._view.detail is not None else None
        return True

    def action_copy(self, what: str) -> None:
        """y, Y: the job's id, or its args as JSON, to the clipboard (OSC 52: the terminal's
        own, over ssh too). The text goes only there: the notice says how much was copied."""
        if what == "id":
            copy_out(self.app, str(self.job_id), f"job {self.job_id}'s id")
            return
        view = self._view
        if view is None or view.detail is None:
            return
        text = json.dumps(view.detail.job.args, ensure_ascii=False, sort_keys=True)
        copy_out(self.app, text, f"job {self.job_id}'s args ({len(text.encode()):,} bytes of JSON)")

    def reason(self, action: str, parameters: tuple[object, ...]) -> str | None:
        if action not in ("act", "copy"):
            return None
        view = self._view
        if view is None:
            return f"job {self.job_id} is still loading"
        if view.detail is None:
            return f"job {self.job_id} no longer exists"
        if action == "copy":
            return None
        return not_applicable(str(parameters[0]), self.job_id, view.detail.job.state)

    def action_act(self, action: str) -> None:
        """r, C, D: requeue, cancel or delete this job, after a confirmation."""
        view = self._view
        if view is not None and view.detail is not None:
            self.console.propose(job_plan(action, self.job_id, view.detail.job.state))

    def action_replay(self) -> None:
        """R: replay this finished workflow from a step picked from its recorded ones."""
        view = self._view
        if view is not None and view.detail is not None:
            replay_from_step(self, self.job_id, view.detail.job.state, view.detail.steps,
                             lambda new: self.app.push_screen(JobScreen(new)))

    def action_toggle_pause(self) -> None:
        """p: pause this workflow, or resume it if a pause holds it."""
        view = self._view
        if view is None or view.detail is None:
            return
        job = view.detail.job
        if job.state not in LIVE_STATES:
            self.notify(f"job {self.job_id} is {job.state}: only a live workflow can be"
                        " paused", title="Pause")
            return
        toggle_workflow_pause(self, self.job_id, job.run_at == PAUSED_UNTIL)

    def action_back(self) -> None:
        self.app.pop_screen()


def _moment(at: datetime | str) -> datetime | str:
    """Error entries carry their time as ISO text; the timeline shows every time alike."""
    if isinstance(at, datetime):
        return at
    try:
        return datetime.fromisoformat(at)
    except ValueError:
        return at


def _error_text(e: dict[str, Any]) -> Text:
    out = Text("  ")
    out.append(f"attempt {e.get('attempt', '?')} ", style="bold")
    out.append_text(one_line(e.get("code") or "error", limit=40))
    if e.get("type"):
        out.append(" · ")
        out.append_text(one_line(e["type"], limit=80))
    if e.get("at"):
        out.append(" · ")
        out.append_text(one_line(str(e["at"]).replace("T", " ")[:19], limit=19))
    if e.get("worker"):
        out.append(" · worker ")
        out.append_text(ident(e["worker"], limit=40))
    if e.get("batch"):
        out.append(" · in a batch of ")
        out.append_text(one_line(str(e["batch"]), limit=6))
    out.append("\n")
    if e.get("message"):
        for line in plain(e["message"]).split("\n")[:8]:
            out.append("    ")
            out.append_text(line)
            out.append("\n")
    frames = e.get("traceback") or []
    for frame in frames[-FRAMES:]:
        if isinstance(frame, dict):
            out.append("      at ", style="dim")
            out.append_text(
                one_line(f"{frame.get('file')}:{frame.get('line')} in {frame.get('func')}",
                         limit=160)
            )
            out.append("\n")
    return out


def _logs_text(detail: JobDetail) -> Text:
    """Each attempt's log, oldest attempt first (forklift.ops.job_logs)."""
    lines = sum(len(entry.lines) for entry in detail.logs)
    text = Text().append(f"Logs ({lines} line{'' if lines == 1 else 's'})\n", style="bold")
    for entry in detail.logs:
        text.append(f"  attempt {entry.attempt}\n", style="bold")
        for line in entry.lines:
            level = str(line.get("level") or "")
            style = "red" if level in ("error", "critical") else (
                "yellow" if level == "warning" else "")
            shown = one_line(line_text(line), limit=400)
            if style:
                shown.stylize(style)
            text.append("    ").append_text(shown).append("\n")
    text.rstrip()
    return text


def _steps_text(detail: JobDetail, now: datetime) -> Text:
    """Parked state, the jobs waited for, and each durable step: state, time, result summary."""
    text = Text()
    if detail.parked:
        text.append("Parked: ", style="bold").append_text(one_line(detail.parked, limit=200))
        text.append("\n")
    if detail.waits_for:
        text.append("Waits for: ", style="bold")
        text.append(", ".join(f"job {d.job_id} ({d.state})" for d in detail.waits_for))
        text.append("\n")
    if detail.steps:
        text.append(f"Steps ({len(detail.steps)})\n", style="bold")
    for st in detail.steps:
        took = f"{st.seconds:.3f}s" if st.seconds is not None else ""
        text.append(f"  {stamp(st.started_at, now):>19}  ")
        text.append_text(one_line(st.name, limit=40))
        text.append(f"  {st.state} (attempt {st.attempt}) {took}  ")
        text.append_text(one_line(st.summary or "", limit=120))
        text.append("\n")
    text.rstrip()
    return text
