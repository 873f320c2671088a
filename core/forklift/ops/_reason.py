"""What an explanation is made of: a :class:`Reason` (stable code, sentence, facts), the
:class:`Explanation` that lists them, and the time words they use."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from forklift.ops.shape import Shape

__all__ = ["Explanation", "Reason", "ago", "when"]


@dataclass(frozen=True)
class Reason(Shape):
    code: str
    text: str
    facts: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Explanation(Shape):
    """For a job: ``subject`` is ``"job"``, ``job_id`` and ``state`` are set; for a queue,
    ``subject`` is ``"queue"``. ``summary`` is the first reason's text."""

    subject: str
    queue: str
    summary: str
    reasons: list[Reason]
    job_id: int | None = None
    state: str | None = None

    @property
    def codes(self) -> list[str]:
        return [r.code for r in self.reasons]


def ago(delta: timedelta) -> str:
    s = abs(delta.total_seconds())
    if s < 90:
        text = f"{s:.0f}s"
    elif s < 5400:
        text = f"{s / 60:.0f}m"
    elif s < 172800:
        text = f"{s / 3600:.1f}h"
    else:
        text = f"{s / 86400:.1f}d"
    return text


def when(at: datetime, now: datetime) -> str:
    delta = at - now
    rel = f"in {ago(delta)}" if delta.total_seconds() >= 0 else f"{ago(delta)} ago"
    return f"{at.isoformat(timespec='seconds')} ({rel})"
