"""explain(job) and explain_queue(name): each reason, from facts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from apps.ops import error, insert_job, register_worker

from forklift.ops import Operator, QueueNotFound


@pytest.fixture
def op(dsn: str) -> Any:
    with Operator(dsn, actor="carol") as operator:
        yield operator


def elect(conn: psycopg.Connection[Any], worker: str = "w1") -> None:
    conn.execute("INSERT INTO forklift.leader (name, worker_id, expires_at)"
                 " VALUES ('leader', %s, now() + interval '1 minute')", (worker,))


def test_scheduled_for_later(op: Operator, conn: psycopg.Connection[Any]) -> None:
    job = insert_job(conn, state="scheduled")
    ex = op.explain(job)
    assert ex.codes == ["scheduled"]
    assert "scheduled for later" in ex.summary and "(in 60m)" in ex.summary


def test_backing_off_after_attempt_n(op: Operator, conn: psycopg.Connection[Any]) -> None:
    job = insert_job(conn, state="retryable", attempt=3, errors=[error(code="timeout")])
    ex = op.explain(job)
    assert ex.codes == ["backing_off"]
    assert "after attempt 3 failed (timeout)" in ex.summary and "retries at" in ex.summary


def test_due_but_no_leader(op: Operator, conn: psycopg.Connection[Any]) -> None:
    job = insert_job(conn, state="scheduled", run_at=datetime.now(UTC) - timedelta(minutes=1))
    assert op.explain(job).codes[:2] == ["due", "no_leader"]
    elect(conn)
    register_worker(conn, "w1", ["default"])
    assert op.explain(job).codes == ["due"]


def test_paused_queue_by_whom_since_when(op: Operator, conn: psycopg.Connection[Any]) -> None:
    job = insert_job(conn, queue="mail")
    register_worker(conn, "w1", ["mail"])
    op.pause("mail", reason="provider outage", until=datetime.now(UTC) + timedelta(hours=2))
    ex = op.explain(job)
    assert ex.codes == ["queue_paused"]
    text = ex.reasons[0].text
    assert "paused by carol since" in text and "(provider outage)" in text
    assert "ends by itself at" in text
    assert ex.reasons[0].facts["paused_by"] == "carol"


def test_no_live_worker_listens(op: Operator, conn: psycopg.Connection[Any]) -> None:
    job = insert_job(conn, queue="reports")
    register_worker(conn, "w-other", ["mail"])
    register_worker(conn, "w-dead", ["reports"], heartbeat_age=3600)
    ex = op.explain(job)
    assert ex.codes == ["no_worker"]
    assert "forklift worker --queues reports" in ex.summary
    register_worker(conn, "w-drain", ["reports"], state="draining")
    assert "draining, not claiming: w-drain" in op.explain(job).summary


def test_workers_busy_and_concurrency_full(op: Operator, conn: psycopg.Connection[Any]) -> None:
    job = insert_job(conn, queue="mail")
    insert_job(conn, queue="mail", state="running")
    register_worker(conn, "w1", ["mail"], slots=1, in_use=1)
    assert op.explain(job).codes == ["workers_busy"]
    op.set_concurrency("mail", 1)
    assert op.explain(job).codes == ["concurrency_full", "workers_busy"]
    assert "1 running of at most 1" in op.explain(job).summary


def test_jobs_ahead_at_higher_or_equal_priority(op: Operator, conn: psycopg.Connection[Any]) -> None:
    register_worker(conn, "w1", ["default"])
    now = datetime.now(UTC)
    insert_job(conn, priority=0, run_at=now - timedelta(seconds=30))
    insert_job(conn, priority=1, run_at=now - timedelta(seconds=20))
    insert_job(conn, priority=5)  # lower priority (a larger number): not ahead
    job = insert_job(conn, priority=1, run_at=now - timedelta(seconds=10))
    first = insert_job(conn, priority=-1)
    ex = op.explain(job)
    assert ex.codes == ["jobs_ahead"]
    assert ex.reasons[0].facts["ahead"] == 3
    assert "3 jobs of queue 'default' are ahead" in ex.summary
    assert op.explain(first).codes == ["next_in_line"]
    second = insert_job(conn, priority=-1)
    assert "1 job of queue 'default' is ahead of it" in op.explain(second).summary


def test_running_on_worker_since(op: Operator, conn: psycopg.Connection[Any]) -> None:
    register_worker(conn, "w7", ["default"])
    job = insert_job(conn, state="running", worker_id="w7")
    ex = op.explain(job)
    assert ex.codes == ["running"]
    assert "running on worker w7 since" in ex.summary and "attempt 1 of 20" in ex.summary
    op.cancel(job)
    assert op.explain(job).codes == ["running", "cancel_requested"]


def test_running_on_a_silent_worker(op: Operator, conn: psycopg.Connection[Any]) -> None:
    job = insert_job(conn, state="running", worker_id="gone")
    assert op.explain(job).codes == ["running", "worker_stale"]
    conn.execute("UPDATE forklift.jobs SET lease_expires_at = now() - interval '5 seconds'")
    ex = op.explain(job)
    assert ex.codes == ["running", "lease_expired"] and "will rescue" in ex.reasons[1].text


def test_terminal_which_and_why(op: Operator, conn: psycopg.Connection[Any]) -> None:
    done = insert_job(conn, state="completed", attempt=1)
    assert op.explain(done).codes == ["completed"]
    assert "after 1 attempt; it will not run again" in op.explain(done).summary
    dead = insert_job(conn, state="dead", attempt=3, max_attempts=3,
                      errors=[error(message="card declined", attempt=3)])
    ex = op.explain(dead)
    assert ex.codes == ["dead"]
    assert "attempts ran out (3 of 3)" in ex.summary
    # A plain exception (code "error") is named by its type, never "last error error: ...".
    assert "last error RuntimeError: card declined" in ex.summary
    failed = insert_job(conn, state="dead", attempt=1, errors=[error(code="invalid_payload")])
    assert "failed terminally; last error invalid_payload" in op.explain(failed).summary
    live = insert_job(conn)
    op.cancel(live, reason="duplicate order")
    ex = op.explain(live)
    assert ex.codes == ["cancelled"] and "cancelled by carol: duplicate order" in ex.summary


def test_queue_explanations(op: Operator, conn: psycopg.Connection[Any]) -> None:
    with pytest.raises(QueueNotFound, match="forklift queues list"):
        op.explain_queue("nope")
    insert_job(conn, queue="mail", state="scheduled")
    register_worker(conn, "w1", ["mail"])
    ex = op.explain_queue("mail")
    assert ex.codes == ["idle"] and "next scheduled job is due" in ex.summary
    insert_job(conn, queue="mail", run_at=datetime.now(UTC) - timedelta(minutes=3))
    assert op.explain_queue("mail").codes == ["moving", "waiting"]
    assert op.explain_queue("mail").reasons[1].text.startswith("1 job is available; the oldest")
    op.pause("mail", reason="deploy")
    ex = op.explain_queue("mail")
    assert ex.codes[0] == "queue_paused" and "waiting" in ex.codes
    assert "oldest has waited 3m" in ex.reasons[ex.codes.index("waiting")].text
    assert ex.to_json()["subject"] == "queue"
