"""What an enqueue does when its queue is full: the values a kind's ``on_full=`` takes.

A queue is full when it is past a ceiling an operator set (``forklift queues ceiling``);
:mod:`forklift._app.backpressure` applies the choice. This module is only the vocabulary,
importable without the database driver, like :class:`~forklift.Backoff`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import timedelta
from typing import Literal

from forklift._base.errors import InvalidOption, QueueFull

__all__ = ["MAX_WAIT", "Enqueued", "OnFull", "Shed", "Wait", "check_on_full"]

#: The longest an enqueue may wait for room: longer, and a caller is better told at once.
MAX_WAIT = 3600.0


@dataclass(frozen=True)
class Wait:
    """Wait for room (at most ``timeout``: seconds or a timedelta), then enqueue; past the
    timeout, raise :class:`~forklift.QueueFull` as ``"raise"`` would."""

    timeout: float | timedelta

    def __post_init__(self) -> None:
        _ = self.seconds

    @property
    def seconds(self) -> float:
        t = self.timeout
        if isinstance(t, timedelta):
            value = t.total_seconds()
        elif isinstance(t, int | float) and not isinstance(t, bool):
            value = float(t)
        else:
            raise InvalidOption(f"Wait timeout must be seconds or a timedelta, not {t!r}",
                                field="on_full")
        if not (0 < value <= MAX_WAIT) or math.isnan(value):
            raise InvalidOption(f"Wait timeout must be more than 0s and at most {MAX_WAIT:g}s,"
                                f" not {t!r}", field="on_full")
        return value


@dataclass(frozen=True)
class Shed:
    """Drop the job, unstored, when the queue is full: every job of the kind
    (``Shed()``), or only those at or below a priority (``Shed(at_or_below=5)``: priority
    numbers 5 and up, the less urgent ones; the others are refused as ``"raise"`` does).
    The enqueue says so: the Job it returns has ``shed`` set (and is not stored); a bulk
    lists the positions it shed."""

    at_or_below: int | None = None

    def __post_init__(self) -> None:
        p = self.at_or_below
        if p is not None and (isinstance(p, bool) or not isinstance(p, int)
                              or not -32768 <= p <= 32767):
            raise InvalidOption(f"Shed at_or_below must be a priority (-32768 to 32767), not"
                                f" {p!r}", field="on_full")

    def sheds(self, priority: int) -> bool:
        """Whether a job of this priority is dropped (a lower number is more urgent)."""
        return self.at_or_below is None or priority >= self.at_or_below

    def rule(self) -> str:
        """The rule in words, as a shed job and the metrics name it."""
        return "kind" if self.at_or_below is None else f"priority>={self.at_or_below}"


#: ``"raise"`` (the default), ``Wait(timeout)`` or ``Shed(...)``.
OnFull = Literal["raise"] | Wait | Shed


def check_on_full(value: object, field: str = "on_full") -> OnFull:
    if value == "raise" and isinstance(value, str):
        return "raise"
    if isinstance(value, Wait | Shed):
        return value
    raise InvalidOption(f"{field} must be \"raise\", Wait(timeout) or Shed(...), not {value!r}",
                        field=field)


class Enqueued(list[int]):
    """What a bulk enqueue returns: the ids of the jobs it stored, in the order given (a
    list, as it always was), and, when a queue was full, which it did not store.

    ``refused`` and ``shed`` are positions in the input (0-based); ``full`` holds the refusal
    of each queue that refused (by queue name), so a caller can answer with its
    ``retry_after``. ``offered == taken + len(refused) + len(shed)``.
    """

    def __init__(self, ids: list[int] = [], *, offered: int | None = None,  # noqa: B006
                 refused: list[int] | None = None, shed: list[int] | None = None,
                 full: dict[str, QueueFull] | None = None) -> None:
        super().__init__(ids)
        self.refused: list[int] = refused or []
        self.shed: list[int] = shed or []
        self.full: dict[str, QueueFull] = full or {}
        self.offered: int = len(ids) + len(self.refused) + len(self.shed) \
            if offered is None else offered

    @property
    def taken(self) -> int:
        """How many jobs were stored."""
        return len(self)
