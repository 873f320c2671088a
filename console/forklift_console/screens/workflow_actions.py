"""Acting on workflows from any screen: replay one from a picked step (the job detail's ``R``),
pause or resume one workflow (``p`` on the job detail and on the Workflows screen's waiting
jobs) or one kind (``p`` on the Kinds screen). Each is confirmed with the CLI line it runs;
a replay then opens the new job."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich.text import Text

from forklift.ops import Operator
from forklift.ops.holds import PauseInfo, PauseResult
from forklift.ops.replay import REPLAYABLE_STATES, ReplayResult
from forklift.ops.runbook import cli
from forklift.ops.steps import StepInfo
from forklift_console.plan import Plan
from forklift_console.screens.base import ConsoleScreen
from forklift_console.screens.modals import PickScreen
from forklift_console.widgets.text import one_line

__all__ = ["paused_words", "replay_from_step", "toggle_kind_pause", "toggle_workflow_pause"]


def replay_from_step(screen: ConsoleScreen[Any], job_id: int, state: str,
                     steps: list[StepInfo], open_job: Callable[[int], object]) -> None:
    """Pick the step to run again, confirm, replay, then ``open_job`` the new one."""
    if state not in REPLAYABLE_STATES:
        screen.notify(f"job {job_id} is {state}: only a completed or dead workflow can be"
                      " replayed", title="Replay")
        return
    if not steps:
        screen.notify(f"job {job_id} recorded no steps: requeue it instead (r)", title="Replay")
        return
    choices = [(s.name, Text.assemble(one_line(s.name, limit=60), f"  · {s.state}"))
               for s in steps]

    def picked(name: str | None) -> None:
        if name is None:
            return
        made: list[int] = []

        def run(op: Operator) -> ReplayResult:
            return op.workflows.replay(job_id, from_step=name, reason="console")

        def report(r: ReplayResult) -> str:
            made.append(r.new_job_id)
            kept = ", ".join(r.kept) or "none"
            return (f"job {job_id} replayed from {name} as job {r.new_job_id}"
                    f" (reuses {kept})")

        def opened() -> None:
            if made:
                open_job(made[0])

        screen.console.propose(Plan(
            verb=f"Replay from step {name!r}", noun="job", count=1, ids=(job_id,), run=run,
            cli=cli("workflows", "replay", str(job_id), "--from-step", name),
            report=report), after=opened)

    screen.app.push_screen(PickScreen(f"Replay job {job_id} from which step?", choices),
                           picked)


def _report(r: PauseResult) -> str:
    return r.text


def toggle_workflow_pause(screen: ConsoleScreen[Any], job_id: int, paused: bool) -> None:
    """Pause the workflow, or resume it if paused (confirmed)."""
    if paused:
        screen.console.propose(Plan(
            verb="Resume workflow", noun="job", count=1, ids=(job_id,),
            run=lambda op: op.workflows.resume(job_id, reason="console"),
            cli=cli("workflows", "resume", str(job_id)), report=_report))
        return
    screen.console.propose(Plan(
        verb="Pause workflow", noun="job", count=1, ids=(job_id,),
        run=lambda op: op.workflows.pause(job_id, reason="console"),
        cli=cli("workflows", "pause", str(job_id)), report=_report))


def toggle_kind_pause(screen: ConsoleScreen[Any], kind: str, paused: bool) -> None:
    """Pause every job of the kind, or resume the kind if paused (confirmed)."""
    if paused:
        screen.console.propose(Plan(
            verb="Resume kind", noun="kind", count=1, ids=(kind,),
            run=lambda op: op.kinds.resume(kind, reason="console"),
            cli=cli("kinds", "resume", kind), report=_report))
        return
    screen.console.propose(Plan(
        verb="Pause kind", noun="kind", count=1, ids=(kind,),
        run=lambda op: op.kinds.pause(kind, reason="console"),
        cli=cli("kinds", "pause", kind), report=_report))


def paused_words(pauses: list[PauseInfo]) -> Text:
    """The pauses in force, in words ("paused: kind mail.send by alice: outage (3 held)")."""
    if not pauses:
        return Text("")
    text = Text(" · paused: ", style="bold")
    text.append_text(one_line("; ".join(p.text for p in pauses), limit=200))
    return text
