"""The lock tests' app (tests/core/test_locks.py), run in-process or as worker subprocesses.

Handlers talk to the test through tables of the test database's ``public`` schema (made by
:func:`setup`): ``gates`` (the test opens one to let a handler go on), ``lock_ledger`` (one row
per time a handler held a lock: key, token, when it started and ended), and a downstream store
that refuses stale holders: ``fenced_store`` keeps, per key, the value and the token of its
newest write, and takes a write only under a token at least as new (``store_writes`` records
every attempt and whether it was taken). That store is the pattern docs/how-to/flow-control.md teaches.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

import psycopg

from apps.thread_sql import ThreadSql
from forklift import Forklift, JobContext

app = Forklift()

SETUP_SQL = """
CREATE TABLE IF NOT EXISTS public.gates (name text PRIMARY KEY);
CREATE TABLE IF NOT EXISTS public.lock_ledger (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id bigint NOT NULL, worker text NOT NULL, key text NOT NULL, token bigint NOT NULL,
    started_at timestamptz NOT NULL DEFAULT clock_timestamp(), ended_at timestamptz);
CREATE TABLE IF NOT EXISTS public.fenced_store (
    key text PRIMARY KEY, value text NOT NULL, token bigint NOT NULL);
CREATE TABLE IF NOT EXISTS public.store_writes (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    key text NOT NULL, value text NOT NULL, token bigint NOT NULL, accepted boolean NOT NULL,
    at timestamptz NOT NULL DEFAULT clock_timestamp());
"""

# The fenced write: taken only if no newer token has written this key (no row back: refused).
STORE_WRITE_SQL = """
WITH w AS (
    INSERT INTO public.fenced_store AS s (key, value, token) VALUES (%(key)s, %(value)s, %(token)s)
    ON CONFLICT (key) DO UPDATE SET value = excluded.value, token = excluded.token
    WHERE s.token <= excluded.token
    RETURNING 1
)
INSERT INTO public.store_writes (key, value, token, accepted)
SELECT %(key)s, %(value)s, %(token)s, EXISTS (SELECT 1 FROM w)
RETURNING accepted
"""


def setup(conn: psycopg.Connection[Any]) -> None:
    conn.execute(SETUP_SQL)


# Handlers run statements on connections of their own, one per thread.
sql = ThreadSql(app, "flow-locks-app")


def store_write(key: str, value: str, token: int) -> bool:
    return bool(sql(STORE_WRITE_SQL, {"key": key, "value": value, "token": token})[0][0])


def gate_open(name: str) -> bool:
    return bool(sql("SELECT 1 FROM public.gates WHERE name = %s", (name,)))


def _start(ctx: JobContext, key: str, token: int) -> int:
    rows = sql("INSERT INTO public.lock_ledger (job_id, worker, key, token) VALUES (%s, %s, %s, %s)"
               " RETURNING id", (ctx.job_id, ctx.worker_id, key, token))
    return int(rows[0][0])


def _end(row: int) -> None:
    sql("UPDATE public.lock_ledger SET ended_at = clock_timestamp() WHERE id = %s", (row,))


@dataclass
class Serial:
    key: str
    ttl: float = 5.0
    wait: float = 30.0
    work: float = 0.02  # seconds of "work" while holding the lock


@app.job(name="flow.locks.serial", queue="locks")
def serial(ctx: JobContext, s: Serial) -> int:
    """Take the lock (waiting for it), write the store under the token, give it back."""
    with ctx.lock(s.key, ttl=s.ttl, wait=s.wait) as token:
        row = _start(ctx, s.key, token)
        sql("SELECT pg_sleep(%s)", (s.work,))
        assert store_write(s.key, f"job {ctx.job_id}", token)
        _end(row)
    return token


@dataclass
class Paused:
    key: str
    gate: str
    ttl: float = 2.0


@app.job(name="flow.locks.paused", queue="locks", max_attempts=1)
def paused(ctx: JobContext, p: Paused) -> None:
    """Hold the lock, wait for a gate (ignoring the context: a process that does not know it
    was paused), then write under the token it was granted -- late, if it was paused."""
    with ctx.lock(p.key, ttl=p.ttl) as token:
        row = _start(ctx, p.key, token)
        while not gate_open(p.gate):
            time.sleep(0.02)
        store_write(p.key, f"job {ctx.job_id}", token)
        _end(row)


@dataclass
class Held:
    key: str
    gate: str
    ttl: float = 2.0
    catch: bool = False


@app.job(name="flow.locks.held", queue="locks", max_attempts=1)
async def held(ctx: JobContext, h: Held) -> str:
    """Hold the lock until a gate opens; cancelled when the lock is lost."""
    from forklift import LockLost

    try:
        async with ctx.lock(h.key, ttl=h.ttl) as token:
            await asyncio.to_thread(_start, ctx, h.key, token)
            while not await asyncio.to_thread(gate_open, h.gate):  # noqa: ASYNC110 (a table)
                await asyncio.sleep(0.02)
    except LockLost:
        if not h.catch:
            raise
        return f"caught: cancelled={ctx.is_cancelled()} reason={ctx.cancel_reason}"
    return "held to the end"


@app.job(name="flow.locks.returns", queue="locks", max_attempts=1)
def returns(ctx: JobContext, h: Held) -> str:
    """A sync handler whose body returns normally after its lock was lost."""
    with ctx.lock(h.key, ttl=h.ttl) as token:
        _start(ctx, h.key, token)
        while not ctx.is_cancelled() and not gate_open(h.gate):
            time.sleep(0.02)
    return "returned"
