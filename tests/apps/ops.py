"""The operator-API tests' app, and a way to put jobs in any state without running them.

``insert_job`` writes a row directly (the shape a worker would leave), so tests of lists,
filters, stats, explain and actions do not have to run a worker to reach each state. The kinds
below are for the tests that do run one: cancelling a running job.
"""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg

from forklift import Forklift, JobContext

app = Forklift()

#: Set by a test to let a handler go on; keyed by the payload's "gate".
GATES: dict[str, threading.Event] = {}
#: Handlers record here that they started (job id -> event), so a test can wait for it.
STARTED: dict[int, threading.Event] = {}


def started(job_id: int) -> threading.Event:
    return STARTED.setdefault(job_id, threading.Event())


@app.job(name="ops.wait_for_cancel", queue="ops", timeout=120)
async def wait_for_cancel(ctx: JobContext, args: dict[str, Any]) -> str:
    """Runs until cancelled (an async handler is cancelled outright)."""
    started(ctx.job_id).set()
    await ctx.wait_cancelled()
    return "not reached: the task is cancelled first"


@app.job(name="ops.finish_anyway", queue="ops", timeout=120)
def finish_anyway(ctx: JobContext, args: dict[str, Any]) -> dict[str, str]:
    """A sync handler that sees the cancel but finishes its work and returns all the same."""
    started(ctx.job_id).set()
    ctx.cancelled.wait(60)
    return {"finished": "after the cancel request"}


@app.job(name="ops.noop", queue="ops")
def noop(ctx: JobContext, args: dict[str, Any]) -> None:
    return None


# -- rows in any state --------------------------------------------------------------------
def insert_job(
    conn: psycopg.Connection[Any],
    *,
    state: str = "available",
    queue: str = "default",
    kind: str = "ops.noop",
    args: Any = None,
    priority: int = 0,
    attempt: int | None = None,
    max_attempts: int = 20,
    run_at: datetime | None = None,
    created_at: datetime | None = None,
    attempted_at: datetime | None = None,
    finished_at: datetime | None = None,
    worker_id: str | None = None,
    errors: list[dict[str, Any]] | None = None,
    unique_key: str | None = None,
    tags: list[str] | None = None,
    batch_id: int | None = None,
    result: Any = None,
    schema: str = "forklift",
) -> int:
    """One job row as the worker would have left it in ``state``; returns its id."""
    now = datetime.now(UTC)
    terminal = state in ("completed", "cancelled", "dead")
    if attempt is None:
        attempt = 0 if state in ("available", "scheduled") else 1
    if attempted_at is None and attempt > 0:
        attempted_at = now - timedelta(seconds=2)
    if finished_at is None and terminal:
        finished_at = now
    if run_at is None:
        run_at = now + timedelta(hours=1) if state in ("scheduled", "retryable") else now
    running = state == "running"
    row = conn.execute(
        f"""INSERT INTO {schema}.jobs (queue, kind, args, state, priority, attempt, max_attempts,
                run_at, created_at, attempted_at, finished_at, worker_id, fence, lease_expires_at,
                errors, unique_key, tags, batch_id, result)
            VALUES (%s, %s, %s::jsonb, %s, %s, %s, %s, %s, coalesce(%s, now()), %s, %s, %s,
                    CASE WHEN %s THEN nextval('{schema}.fence_seq') END,
                    CASE WHEN %s THEN now() + interval '30 seconds' END,
                    %s::jsonb, %s, %s, %s, %s::jsonb)
            RETURNING id""",
        (
            queue, kind, json.dumps(args if args is not None else {}), state, priority, attempt,
            max_attempts, run_at, created_at, attempted_at, finished_at,
            (worker_id or "test-worker") if running else worker_id, running, running,
            json.dumps(errors or []), unique_key, tags or [], batch_id,
            json.dumps(result) if result is not None else None,
        ),
    ).fetchone()
    assert row is not None
    return int(row[0])


def error(code: str = "error", message: str = "boom", attempt: int = 1,
          at: datetime | None = None) -> dict[str, Any]:
    return {"code": code, "type": "RuntimeError", "message": message, "traceback": [],
            "attempt": attempt, "worker": "test-worker",
            "at": (at or datetime.now(UTC)).isoformat()}


def register_worker(
    conn: psycopg.Connection[Any],
    worker_id: str = "test-worker",
    queues: list[str] | None = None,
    *,
    slots: int = 4,
    in_use: int = 0,
    state: str = "running",
    heartbeat_age: float = 0.0,
    schema: str = "forklift",
) -> None:
    conn.execute(
        f"""INSERT INTO {schema}.workers (id, host, pid, queues, slots, in_use, state,
                heartbeat_at, drain_deadline)
            VALUES (%s, 'testhost', 1, %s, %s, %s, %s, now() - make_interval(secs => %s),
                    CASE WHEN %s = 'draining' THEN now() + interval '30 seconds' END)""",
        (worker_id, queues or ["default"], slots, in_use, state, heartbeat_age, state),
    )


def job_state(conn: psycopg.Connection[Any], job_id: int, schema: str = "forklift") -> str | None:
    row = conn.execute(f"SELECT state FROM {schema}.jobs WHERE id = %s", (job_id,)).fetchone()
    return str(row[0]) if row else None
