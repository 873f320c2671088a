"""A debounce: the value an enqueue's ``debounce=`` takes, checked as it is made.

What it does to the job is :mod:`forklift._jobs.debounce`'s (one statement); this is only the
vocabulary, importable without the database driver, like :class:`~forklift.Backoff`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from forklift._base.errors import InvalidOption
from forklift._base.names import check_name

__all__ = ["Debounce"]


def _seconds(value: object, what: str) -> float:
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
    else:
        raise InvalidOption(f"debounce {what} must be seconds or a timedelta, not {value!r}",
                            field="debounce")
    if not seconds > 0:  # NaN too
        raise InvalidOption(f"debounce {what} must be positive, not {value!r}", field="debounce")
    return seconds


@dataclass(frozen=True)
class Debounce:
    """Debounce an enqueue on ``key`` (per kind): while a job enqueued with the key still waits,
    another enqueue with it replaces that job's payload and moves its start to ``wait`` from
    now, never past ``max_wait`` after the first enqueue (None: no cap)."""

    key: str
    wait: float | timedelta
    max_wait: float | timedelta | None = None

    def __post_init__(self) -> None:
        check_name(self.key, "debounce_key", field="debounce")
        wait = _seconds(self.wait, "wait")
        if self.max_wait is not None and _seconds(self.max_wait, "max_wait") < wait:
            raise InvalidOption(f"debounce max_wait ({self.max_wait!r}) must be at least its wait"
                                f" ({self.wait!r})", field="debounce")

    @property
    def wait_seconds(self) -> float:
        return _seconds(self.wait, "wait")

    @property
    def max_wait_seconds(self) -> float | None:
        return None if self.max_wait is None else _seconds(self.max_wait, "max_wait")
