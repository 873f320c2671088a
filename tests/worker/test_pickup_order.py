"""An idle worker woken for a job starts the job's handler before it writes its idle mark
again: the mark's statement waits for the attempts the claim started, not they for it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from apps.basic import running_worker
from helpers import wait_until

from forklift import Forklift, JobContext, Worker

app = Forklift()
#: The worker under test, and for each job the idle marks it had written when the job's
#: handler started.
WORKER: list[Worker] = []
MARKS_AT_START: dict[int, int] = {}


@app.job(name="pickup.note", queue="pickup")
async def note(ctx: JobContext, payload: dict[str, Any]) -> None:
    MARKS_AT_START[ctx.job_id] = WORKER[0].producer.idle.marks


@pytest.fixture
def bound(dsn: str) -> Iterator[Forklift]:
    MARKS_AT_START.clear()
    WORKER.clear()
    app.use(dsn)
    try:
        yield app
    finally:
        app.close()


def _marked(conn: psycopg.Connection[Any], worker: Worker) -> bool:
    row = conn.execute("SELECT EXISTS (SELECT FROM forklift.idle_workers WHERE worker_id = %s)",
                       (worker.id,)).fetchone()
    return bool(row and row[0])


def test_a_woken_worker_starts_the_handler_before_it_marks_itself_idle_again(
    bound: Forklift, conn: psycopg.Connection[Any]
) -> None:
    with running_worker(bound, poll_interval=120.0, queues=["pickup"]) as worker:
        WORKER.append(worker)
        for _ in range(5):
            wait_until(lambda: worker.producer.idle.marked and _marked(conn, worker), timeout=30,
                       message="the worker marked itself idle")
            before = worker.producer.idle.marks
            job = note.enqueue({})  # the NOTIFY takes the mark and wakes the worker
            wait_until(lambda job_id=job.id: job_id in MARKS_AT_START, timeout=30,
                       message="the woken worker ran the job")
            assert MARKS_AT_START[job.id] == before, "a mark was written before the handler ran"
