"""Operator.kind_stats: per queue and kind, the window's completed and dead jobs, the share
that died, run time p50/p95, and the live jobs now; jobs outside the window are not counted."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from apps.ops import insert_job

from forklift.ops import Operator
from forklift.ops.errors import InvalidFilter


def test_kind_stats_counts_the_window_per_queue_and_kind(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    now = datetime.now(UTC)
    for run in range(1, 11):  # run times 1..10 s, finished 5 minutes ago
        insert_job(conn, state="completed", queue="mail", kind="send",
                   attempted_at=now - timedelta(minutes=5, seconds=run),
                   finished_at=now - timedelta(minutes=5))
    insert_job(conn, state="dead", queue="mail", kind="send")
    insert_job(conn, state="dead", queue="mail", kind="send")
    # finished two hours ago: outside a 1 h window, inside 24 h
    insert_job(conn, state="completed", queue="mail", kind="send",
               finished_at=now - timedelta(hours=2))
    insert_job(conn, state="available", queue="mail", kind="send")
    insert_job(conn, state="retryable", queue="mail", kind="send")
    insert_job(conn, state="running", queue="reports", kind="build")

    with Operator(dsn) as op:
        hour = op.kind_stats(window=timedelta(hours=1))
        day = op.kind_stats(window=timedelta(hours=24))
        with pytest.raises(InvalidFilter):
            op.kind_stats(window=timedelta(days=30))

    send = next(r for r in hour.rows if (r.queue, r.kind) == ("mail", "send"))
    assert (send.completed, send.dead) == (10, 2)
    assert send.failure_rate == pytest.approx(2 / 12)
    assert send.p50 == pytest.approx(5.5)
    assert send.p95 == pytest.approx(9.55)
    assert send.live == {"available": 1, "retryable": 1}
    assert hour.per_minute(send) == pytest.approx(10 / 60)
    build = next(r for r in hour.rows if r.kind == "build")
    assert (build.completed, build.dead, build.failure_rate, build.p50) == (0, 0, None, None)
    assert build.live == {"running": 1}
    assert hour.rows[0] is send  # busiest first
    assert next(r for r in day.rows if r.kind == "send").completed == 11
    assert hour.to_json()["rows"][0]["queue"] == "mail"
