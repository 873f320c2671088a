"""Run now: a scheduled or retryable job becomes available at once, fenced, audited, woken.

One job and in bulk (the same spec as requeue/cancel/delete: the row locked, the state
re-checked in the statement), refusals with a stable code, read-only, and the CLI door.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from apps.ops import error, insert_job
from test_cli_ops import ok, refused, run
from test_ops_actions import audit_rows, row

from forklift import ReadOnly
from forklift.ops import JobFilter, Operator
from forklift.ops.errors import NotRunnable


@pytest.fixture
def op(dsn: str) -> Any:
    with Operator(dsn, actor="alice") as operator:
        yield operator


def later(seconds: float = 3600) -> datetime:
    return datetime.now(UTC) + timedelta(seconds=seconds)


@pytest.mark.parametrize("state", ["scheduled", "retryable"])
def test_run_now_makes_a_waiting_job_available_keeping_attempts_and_errors(
    op: Operator, conn: psycopg.Connection[Any], dsn: str, state: str
) -> None:
    errs = [error(attempt=1)] if state == "retryable" else []
    job = insert_job(conn, state=state, run_at=later(), attempt=1 if errs else 0, errors=errs,
                     queue="mail")
    conn.execute("UPDATE forklift.jobs SET fence = 7 WHERE id = %s", (job,))
    with psycopg.connect(dsn, autocommit=True) as listener:
        listener.execute("LISTEN forklift_wake")
        r = op.run_now(job, reason="customer waiting")
        notes = [n.payload for n in listener.notifies(timeout=5, stop_after=1)]
    assert (r.outcome, r.previous_state, r.state) == ("made_available", state, "available")
    after = row(conn, job)
    assert after["state"] == "available"
    assert after["run_at"] <= datetime.now(UTC) + timedelta(seconds=1)
    assert after["attempt"] == (1 if errs else 0) and len(after["errors"]) == len(errs)
    assert after["fence"] != 7
    assert notes == ["mail"]  # a worker listening on the queue is woken
    assert audit_rows(conn)[-1] == {
        "actor": "alice", "action": "run_now", "target": {"job": job}, "count": 1,
        "reason": "customer waiting", "outcome": "made_available",
    }


@pytest.mark.parametrize("state", ["available", "running", "completed", "dead", "cancelled"])
def test_run_now_refuses_other_states_and_audits_the_refusal(
    op: Operator, conn: psycopg.Connection[Any], state: str
) -> None:
    job = insert_job(conn, state=state)
    with pytest.raises(NotRunnable) as exc:
        op.run_now(job)
    assert exc.value.code == "not_runnable"
    assert row(conn, job)["state"] == state
    assert audit_rows(conn)[-1]["outcome"] == "refused: not_runnable"


def test_run_now_many_acts_on_the_waiting_jobs_of_a_filter_only(
    op: Operator, conn: psycopg.Connection[Any]
) -> None:
    waiting = [insert_job(conn, state="scheduled", run_at=later()),
               insert_job(conn, state="retryable", run_at=later(), errors=[error()])]
    other = insert_job(conn, state="dead")
    flt = JobFilter(ids=(*waiting, other))
    dry = op.bulk("run_now", flt, dry_run=True)
    assert (dry.matched, sorted(dry.sample_ids)) == (2, sorted(waiting))
    done = op.run_now_many(flt, reason="drain the backlog")
    assert (done.done, done.outcomes) == (2, {"made_available": 2})
    assert [row(conn, j)["state"] for j in waiting] == ["available", "available"]
    assert row(conn, other)["state"] == "dead"
    assert audit_rows(conn)[-1]["action"] == "run_now_many"


def test_run_now_is_refused_read_only(dsn: str, conn: psycopg.Connection[Any]) -> None:
    job = insert_job(conn, state="scheduled", run_at=later())
    with Operator(dsn, actor="bob", read_only=True) as ro, pytest.raises(ReadOnly):
        ro.run_now(job)
    assert row(conn, job)["state"] == "scheduled"


def test_cli_jobs_run_now(dsn: str, conn: psycopg.Connection[Any]) -> None:
    job = insert_job(conn, state="scheduled", run_at=later())
    shown = json.loads(ok(run(dsn, "jobs", "run-now", str(job), "--yes", "--json")).stdout)
    assert shown["results"][0]["outcome"] == "made_available"
    assert row(conn, job)["state"] == "available"
    dead = insert_job(conn, state="dead")
    assert "not_runnable" in refused(run(dsn, "jobs", "run-now", str(dead), "--yes"))
    assert "read-only" in refused(
        run(dsn, "jobs", "run-now", str(job), "--yes", "--read-only")).lower()
