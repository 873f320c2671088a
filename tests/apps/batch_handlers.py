"""The batch handler tests' app: batch kinds whose handlers record each call they get.

Handlers talk to the test through tables beside forklift's (made by :func:`setup`):
``bh_calls`` (one row per call: the kind, the job ids and attempts it got), ``bh_done`` (one
row per job a call finished, so a job finished twice shows twice) and ``bh_gates`` (a payload
naming a hold waits, on its first attempt, until the test opens that gate; while it waits, a job
of the call told to stop is written to ``bh_told``). They use their own
connections, never forklift's.

Run in-process (``apps.basic.running_worker``) or as ``forklift worker --app
apps.batch_handlers:app``.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any, NotRequired

import psycopg
from typing_extensions import TypedDict  # pydantic needs it for TypedDict on Python < 3.12

from forklift import Backoff, BatchContext, Fail, Forklift, JobContext

app = Forklift()

SETUP_SQL = """
CREATE TABLE IF NOT EXISTS public.bh_calls (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, kind text NOT NULL,
    job_ids bigint[] NOT NULL, attempts integer[] NOT NULL, worker text NOT NULL);
CREATE TABLE IF NOT EXISTS public.bh_done (job_id bigint NOT NULL, n integer NOT NULL);
CREATE TABLE IF NOT EXISTS public.bh_gates (name text PRIMARY KEY);
CREATE TABLE IF NOT EXISTS public.bh_told (job_id bigint PRIMARY KEY);
"""


def setup(conn: psycopg.Connection[Any]) -> None:
    conn.execute(SETUP_SQL)


_local = threading.local()


def sql(query: str, params: Any = None) -> list[tuple[Any, ...]]:
    conn: psycopg.Connection[Any] | None = getattr(_local, "conn", None)
    if conn is None or conn.closed or conn.broken or getattr(_local, "dsn", None) != app.dsn:
        conn = psycopg.connect(app.dsn, autocommit=True, application_name="bh-app",
                               prepare_threshold=None)
        _local.conn, _local.dsn = conn, app.dsn
    cur = conn.execute(query, params)
    return cur.fetchall() if cur.description else []


class Item(TypedDict):
    n: int
    #: This job's place in the returned list holds an exception on every attempt (retryable).
    fail: NotRequired[bool]
    #: This job's place holds Fail('rejected'): dead at once.
    reject: NotRequired[bool]
    #: The handler raises (every job of the call fails).
    boom: NotRequired[bool]
    #: The handler returns a list one short.
    short: NotRequired[bool]
    #: Hold the call on the job's first attempt until this gate opens (or the call is told).
    hold: NotRequired[str]


class Doubled(TypedDict):
    n: int
    doubled: int


def _record(ctx: BatchContext) -> None:
    sql("INSERT INTO public.bh_calls (kind, job_ids, attempts, worker) VALUES (%s, %s, %s, %s)",
        (ctx.kind, [j.job_id for j in ctx.jobs], [j.attempt for j in ctx.jobs], ctx.worker_id))


def gate_open(name: str) -> bool:
    return bool(sql("SELECT 1 FROM public.bh_gates WHERE name = %s", (name,)))


def _hold(ctx: BatchContext, items: list[Item]) -> None:
    gates = {i["hold"] for i, j in zip(items, ctx.jobs, strict=True)
             if i.get("hold") and j.attempt == 1}
    deadline = time.monotonic() + 120
    told: set[int] = set()
    while gates and not all(gate_open(g) for g in gates):
        for j in ctx.jobs:
            if j.cancel_reason is not None and j.job_id not in told:
                told.add(j.job_id)
                sql("INSERT INTO public.bh_told VALUES (%s) ON CONFLICT DO NOTHING", (j.job_id,))
        if ctx.cancelled.wait(0.02) or time.monotonic() > deadline:
            return


def _outcomes(ctx: BatchContext, items: list[Item]) -> list[Doubled | Exception]:
    if any(i.get("boom") for i in items):
        raise RuntimeError("the whole call failed")
    out: list[Doubled | Exception] = []
    for item, job in zip(items, ctx.jobs, strict=True):
        if item.get("fail"):
            out.append(ValueError(f"item {item['n']} failed on attempt {job.attempt}"))
        elif item.get("reject"):
            out.append(Fail("rejected", f"item {item['n']} is refused"))
        else:
            sql("INSERT INTO public.bh_done (job_id, n) VALUES (%s, %s)", (job.job_id, item["n"]))
            out.append({"n": item["n"], "doubled": 2 * item["n"]})
    if any(i.get("short") for i in items):
        out.pop()
    return out


@app.batch_job(name="bh.double", max=10, max_attempts=2, failure_codes=["rejected"],
               retry=Backoff("fixed", base=0.05, jitter="none"))
def double(ctx: BatchContext, items: list[Item]) -> list[Doubled | Exception]:
    _record(ctx)
    _hold(ctx, items)
    ctx.raise_if_cancelled()  # the whole call was told to stop: do none of the work
    return _outcomes(ctx, items)


@app.batch_job(name="bh.double_async", max=10, max_attempts=2, queue="async",
               retry=Backoff("fixed", base=0.05, jitter="none"))
async def double_async(ctx: BatchContext, items: list[Item]) -> list[Doubled | Exception]:
    await asyncio.to_thread(_record, ctx)
    await asyncio.sleep(0)  # a real suspension: the call runs on the loop beside others
    return await asyncio.to_thread(_outcomes, ctx, items)


@app.batch_job(name="bh.gathered", max=50, wait=0.5, queue="gathered")
def gathered(ctx: BatchContext, items: list[Item]) -> list[Doubled]:
    _record(ctx)
    return [{"n": i["n"], "doubled": 2 * i["n"]} for i in items]


@app.batch_job(name="bh.stuck", max=10, timeout=0.3, max_attempts=1, queue="stuck")
async def stuck(ctx: BatchContext, items: list[Item]) -> list[None]:
    """Never returns: the call's timeout stops it (every job of the call is told)."""
    await asyncio.to_thread(_record, ctx)
    await asyncio.sleep(120)
    return [None] * len(items)


@app.job(name="bh.plain")
def plain(ctx: JobContext, payload: dict[str, Any]) -> None:
    """An ordinary kind beside the batch ones (the kinds listing shows no batch size for it)."""


def calls(conn: psycopg.Connection[Any], kind: str) -> list[dict[str, Any]]:
    cur = conn.execute("SELECT job_ids, attempts, worker FROM public.bh_calls WHERE kind = %s"
                       " ORDER BY id", (kind,))
    return [{"jobs": list(r[0]), "attempts": list(r[1]), "worker": r[2]}
            for r in cur.fetchall()]


def done_counts(conn: psycopg.Connection[Any]) -> dict[int, int]:
    rows = conn.execute("SELECT job_id, count(*) FROM public.bh_done GROUP BY 1").fetchall()
    return {int(j): int(c) for j, c in rows}
