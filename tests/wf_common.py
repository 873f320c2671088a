"""What the durable-workflow tests share: worker settings, the app bound to the test's database
(with the workflow app's tables), a job's row, and the worker-process fixture."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from apps import faults
from apps import workflows as wf

from forklift import Forklift

FAST = {"lease": 2.0, "poll_interval": 0.1, "leader_interval": 0.1, "concurrency": 4}
procs = faults.procs


@pytest.fixture
def app(dsn: str, conn: psycopg.Connection[Any]) -> Iterator[Forklift]:
    with wf.bound(dsn, conn) as bound_app:
        yield bound_app


def job(conn: psycopg.Connection[Any], job_id: int) -> dict[str, Any]:
    return faults.job(conn, job_id)


def stage_once(dsn: str) -> int:
    """One pass of the leader's stager: one statement."""
    from forklift._worker.maintenance.stager import stage

    async def once() -> int:
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as c:
            return await stage(c, "forklift")

    return asyncio.run(once())


def parked_until_past(conn: psycopg.Connection[Any], ids: list[int]) -> bool:
    row = conn.execute("SELECT count(*) FILTER (WHERE state = 'scheduled'), bool_and(run_at <= now())"
                       " FROM forklift.jobs WHERE id = ANY(%s)", (ids,)).fetchone()
    return row == (len(ids), True)

