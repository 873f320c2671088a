"""Rough edges: no "-0s", a queue with no live worker never reads "active", the state badge
fits its column."""

from __future__ import annotations

from forklift.ops.stats import queue_state
from forklift_console.screens.queues import COLUMNS
from forklift_console.widgets.text import duration
from forklift_console.widgets.text import queue_state as queue_badge


def test_a_duration_under_a_second_before_now_is_zero_not_minus_zero() -> None:
    assert duration(-0.4) == "0s"
    assert duration(-42) == "-42s"


def test_a_queue_without_a_live_worker_is_never_active() -> None:
    running_only = {"running": 37}
    assert queue_state(paused=False, counts=running_only, workers=0, lag=None, completed=5,
                       failed=0) == "no_worker"
    assert queue_state(paused=False, counts={}, workers=0, lag=None, completed=5,
                       failed=0) == "idle"
    assert queue_state(paused=False, counts=running_only, workers=2, lag=None, completed=5,
                       failed=0) == "active"


def test_the_queue_state_column_holds_its_longest_word() -> None:
    width = next(c.width for c in COLUMNS if c.key == "state")
    assert width is not None and width >= queue_badge("no_worker").cell_len
