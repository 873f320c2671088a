"""Operator.kind_stats counts failed attempts per queue and kind (the per-kind failure rate):
a kind that fails often but succeeds on retry shows it, though none died."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from apps.ops import insert_job

from forklift.ops import Operator


def err(at: datetime, code: str = "error") -> dict[str, Any]:
    return {"code": code, "at": at.isoformat(), "message": "boom", "attempt": 1}


def test_failed_attempts_per_kind_in_the_window(dsn: str, conn: psycopg.Connection[Any]) -> None:
    now = datetime.now(UTC)
    recent, old = now - timedelta(minutes=5), now - timedelta(hours=3)
    for _ in range(3):  # failed twice, then completed: 2 failed attempts each
        insert_job(conn, state="completed", queue="mail", kind="flaky", attempt=3,
                   errors=[err(recent), err(recent)], finished_at=now - timedelta(minutes=1),
                   attempted_at=now - timedelta(minutes=1, seconds=2))
    insert_job(conn, state="completed", queue="mail", kind="flaky")  # first try
    insert_job(conn, state="retryable", queue="mail", kind="flaky", errors=[err(recent)])
    # An error before the window, and an interruption (a drain), are not failures here.
    insert_job(conn, state="retryable", queue="mail", kind="flaky",
               errors=[err(old), err(recent, "interrupted")])
    insert_job(conn, state="dead", queue="mail", kind="doomed", attempt=1, errors=[err(recent)])
    insert_job(conn, state="completed", queue="reports", kind="flaky")

    with Operator(dsn) as op:
        hour = op.kind_stats(window=timedelta(hours=1))

    rows = {(r.queue, r.kind): r for r in hour.rows}
    flaky = rows[("mail", "flaky")]
    assert (flaky.completed, flaky.dead, flaky.failed) == (4, 0, 7)
    assert flaky.failure_rate == 0  # none died...
    assert flaky.attempt_failure_rate == pytest.approx(7 / 11)  # ...but 7 of 11 attempts failed
    doomed = rows[("mail", "doomed")]
    assert (doomed.failed, doomed.attempt_failure_rate, doomed.failure_rate) == (1, 1.0, 1.0)
    assert rows[("reports", "flaky")].failed == 0
    assert rows[("reports", "flaky")].attempt_failure_rate == 0
    assert hour.to_json()["rows"][0]["failed"] >= 0
