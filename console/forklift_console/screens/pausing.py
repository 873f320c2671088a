"""Pausing and resuming a queue from any screen: the reason dialog (and, for a pause, how long),
the CLI line it shows, then the change. The Queues screen's ``p`` acts on its highlighted row;
the Overview's ``p`` resumes a paused queue its alerts name."""

from __future__ import annotations

from typing import Any

from rich.text import Text

from forklift.ops import QueueInfo, QueueStats
from forklift.ops.display import show_id
from forklift.ops.runbook import command
from forklift_console.plan import Plan
from forklift_console.screens.base import ConsoleScreen
from forklift_console.screens.modals import ReasonScreen
from forklift_console.widgets.text import age, ident, one_line

__all__ = ["pause_cli", "resume_cli", "toggle_pause"]


def toggle_pause(screen: ConsoleScreen[Any], q: QueueStats) -> None:
    """Ask why (and for a pause, for how long), then pause ``q``, or resume it if paused."""
    name = q.name
    shown = show_id(name)
    console = screen.console
    if q.paused:
        context = Text("paused")
        if q.paused_by:
            context.append(" by ")
            context.append_text(ident(q.paused_by, limit=40))
        if q.paused_at is not None:
            context.append(f" {age(q.paused_at, console.now())} ago")
        if q.pause_reason:
            context.append(": “")
            context.append_text(one_line(q.pause_reason, limit=160))
            context.append("”")
        context.append(f" — {q.counts.get('available', 0):,} jobs waiting start at once")

        def resumed(answer: tuple[str, str] | None) -> None:
            if answer is not None:
                reason = answer[0]
                console.propose(
                    Plan(
                        verb="Resume", noun="queue", count=1, ids=(name,),
                        cli=resume_cli(name, reason),
                        run=lambda op: op.resume(name, reason=reason or None),
                        destructive=False,
                        report=lambda info: _resumed(name),
                    )
                )

        screen.app.push_screen(
            ReasonScreen(f"Resume queue {shown}?", lambda r, _: resume_cli(name, r),
                         verb="Resume", ask_for=False, context=context),
            resumed,
        )
        return

    def reasoned(answer: tuple[str, str] | None) -> None:
        if answer is None:
            return
        reason, for_ = answer
        console.propose(
            Plan(
                verb="Pause",
                noun="queue",
                count=1,
                ids=(name,),
                cli=pause_cli(name, reason, for_),
                run=lambda op: op.pause(name, reason=reason or None, for_=for_ or None),
                destructive=False,
                report=_paused,
            )
        )

    screen.app.push_screen(
        ReasonScreen(f"Pause queue {shown}?", lambda r, f: pause_cli(name, r, f)),
        reasoned,
    )


def pause_cli(name: str, reason: str, for_: str) -> str:
    return command("queues", "pause", args=(name,),
                   options={"--reason": reason or None, "--for": for_ or None})


def resume_cli(name: str, reason: str) -> str:
    return command("queues", "resume", args=(name,), options={"--reason": reason or None})


def _paused(info: QueueInfo) -> str:
    note = f" until {info.pause_expires_at:%H:%M:%S}" if info.pause_expires_at else ""
    return (f"queue {show_id(info.name)} paused{note}: workers stop claiming from it at their"
            " next claim")


def _resumed(name: str) -> str:
    return f"queue {show_id(name)} resumed: its workers were woken"
