"""The workflow tests' app: outbox sinks (callables and a kind), and later steps, sleeps, waits
and dependencies.

Handlers and sinks talk to the test through tables beside forklift's (made by :func:`setup`):
``wf_seen`` (one row per delivery start and end, and per handler run) and ``wf_gates`` (a sink
or handler told to hold waits until the test opens its gate). They use their own connections.

Run in-process (``apps.basic.running_worker``) or as ``forklift worker --app apps.workflows:app``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import psycopg

from forklift import Forklift, JobContext
from forklift._base.retry import Backoff
from forklift._features.durable.outbox import Message

app = Forklift()

SETUP_SQL = """
CREATE TABLE IF NOT EXISTS public.wf_gates (name text PRIMARY KEY);
CREATE TABLE IF NOT EXISTS public.wf_seen (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    what text NOT NULL, topic text, msg_id bigint, job_id bigint, attempt int, pid int NOT NULL,
    detail jsonb, at timestamptz NOT NULL DEFAULT clock_timestamp());
"""


def setup(conn: psycopg.Connection[Any]) -> None:
    conn.execute(SETUP_SQL)


@contextlib.contextmanager
def bound(dsn: str, conn: psycopg.Connection[Any]) -> Iterator[Forklift]:
    setup(conn)
    app.use(dsn)
    try:
        yield app
    finally:
        app.close()


_local = threading.local()


def sql(query: str, params: Any = None) -> list[tuple[Any, ...]]:
    conn: psycopg.Connection[Any] | None = getattr(_local, "conn", None)
    if conn is None or conn.closed or conn.broken or getattr(_local, "dsn", None) != app.dsn:
        conn = psycopg.connect(app.dsn, autocommit=True, application_name="workflows-app")
        _local.conn, _local.dsn = conn, app.dsn
    cur = conn.execute(query, params)
    return cur.fetchall() if cur.description else []


def seen(what: str, *, topic: str | None = None, msg_id: int | None = None,
         job_id: int | None = None, attempt: int | None = None, detail: Any = None) -> None:
    import json

    sql("INSERT INTO public.wf_seen (what, topic, msg_id, job_id, attempt, pid, detail)"
        " VALUES (%s, %s, %s, %s, %s, %s, %s::jsonb)",
        (what, topic, msg_id, job_id, attempt, os.getpid(), json.dumps(detail)))


def gate_open(name: str) -> bool:
    return bool(sql("SELECT 1 FROM public.wf_gates WHERE name = %s", (name,)))


def hold(name: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not gate_open(name) and time.monotonic() < deadline:
        time.sleep(0.02)


# -- outbox sinks -----------------------------------------------------------------------------
def record(message: Message) -> None:
    """Records the delivery's start and end; holds first when the payload names a gate."""
    p = message.payload if isinstance(message.payload, dict) else {}
    seen("start", topic=message.topic, msg_id=message.id, attempt=message.attempt)
    if p.get("hold"):
        hold(str(p["hold"]))
    if p.get("fail_until", 0) >= message.attempt:
        raise RuntimeError(f"refusing delivery {message.attempt} of {message.id}")
    seen("done", topic=message.topic, msg_id=message.id, attempt=message.attempt)


for _topic in ("wf.a", "wf.b", "wf.c"):
    app.outbox.sink(_topic, record, timeout=60)


@app.outbox.sink("wf.flaky", max_attempts=3,
                 retry=Backoff(kind="fixed", base=0.05, max=0.05, jitter="none"))
async def flaky(message: Message) -> None:
    record(message)


@app.job(name="wf.receive")
def receive(ctx: JobContext, order: dict[str, int]) -> None:
    seen("job", job_id=ctx.job_id, detail={"order": order["order"], "meta": ctx.meta})


app.outbox.sink("wf.jobs", receive)


# -- dependencies -----------------------------------------------------------------------------
@app.job(name="wf.task", max_attempts=3, retry=Backoff(kind="fixed", base=0.05, max=0.05,
                                                       jitter="none"))
def task(ctx: JobContext, t: dict[str, Any]) -> dict[str, Any]:
    """Records its run; holds on a gate (first attempt only) or fails when told."""
    seen("run", job_id=ctx.job_id, attempt=ctx.attempt, detail=t)
    if t.get("hold") and ctx.attempt == 1:
        hold(str(t["hold"]))
    if t.get("fail"):
        raise RuntimeError("told to fail")
    seen("end", job_id=ctx.job_id, attempt=ctx.attempt)
    return {"job": ctx.job_id}


# -- steps ------------------------------------------------------------------------------------
@dataclass
class Receipt:
    charged: int
    pid: int


def charge(n: int) -> Receipt:
    seen("step", detail={"step": "charge", "n": n})
    return Receipt(charged=n, pid=os.getpid())


async def ship(receipt: Receipt) -> dict[str, Any]:
    seen("step", detail={"step": "ship", "charged": receipt.charged})
    return {"shipped": receipt.charged, "tags": ("a", "b")}


def no_json() -> object:
    return object()


STEP_RETRY = Backoff(kind="fixed", base=0.05, max=0.05, jitter="none")


@app.job(name="wf.steps", max_attempts=5, retry=STEP_RETRY)
async def steps(ctx: JobContext, p: dict[str, Any]) -> dict[str, Any]:
    """Two steps; between them it holds (a gate) or fails, on the first attempt, when told."""
    receipt = await ctx.step("charge", charge, p["n"])
    assert isinstance(receipt, Receipt)  # typed on the first run and on a replay alike
    if ctx.attempt == 1 and p.get("hold"):
        await asyncio.to_thread(hold, str(p["hold"]))
    if ctx.attempt == 1 and p.get("fail"):
        raise RuntimeError("failing between the steps")
    shipped = await ctx.step("ship", ship, receipt)
    return {"receipt": receipt.pid, "shipped": shipped}


@app.job(name="wf.steps_sync", max_attempts=5, retry=STEP_RETRY)
def steps_sync(ctx: JobContext, p: dict[str, Any]) -> dict[str, Any]:
    receipt = ctx.step_sync("charge", charge, p["n"])
    if ctx.attempt == 1:
        raise RuntimeError("failing between the steps")
    again = ctx.step_sync("again", lambda: {"x": 1})
    return {"receipt": receipt.pid, "again": again}


@app.job(name="wf.bad_steps", max_attempts=5, retry=STEP_RETRY)
async def bad_steps(ctx: JobContext, p: dict[str, str]) -> None:
    how = p["how"]
    if how == "duplicate":
        await ctx.step("once", lambda: 1)
        await ctx.step("once", lambda: 2)
    elif how == "result":
        await ctx.step("odd", no_json)
    elif how == "long":
        await ctx.step("x" * 201, lambda: 1)
    elif how == "hidden":
        await ctx.step("charge\u202e", lambda: 1)


# -- sleep and wait for an event ---------------------------------------------------------------
def note(what: str) -> int:
    seen("step", detail={"step": what})
    return 1


@app.job(name="wf.sleeper", max_attempts=3)
async def sleeper(ctx: JobContext, p: dict[str, Any]) -> dict[str, Any]:
    await ctx.step("before", note, "before")
    seen("run", job_id=ctx.job_id, attempt=ctx.attempt)
    await ctx.sleep("cool-down", p["secs"])
    await ctx.step("after", note, "after")
    return {"woke": ctx.attempt}


@app.job(name="wf.sleeper_sync", max_attempts=3)
def sleeper_sync(ctx: JobContext, p: dict[str, Any]) -> dict[str, Any]:
    ctx.step_sync("before", note, "before")
    seen("run", job_id=ctx.job_id, attempt=ctx.attempt)
    ctx.sleep_sync("cool-down", p["secs"])
    ctx.step_sync("after", note, "after")
    return {"woke": ctx.attempt}


@app.job(name="wf.waiter", max_attempts=3)
async def waiter(ctx: JobContext, p: dict[str, Any]) -> dict[str, Any]:
    seen("run", job_id=ctx.job_id, attempt=ctx.attempt)
    data = await ctx.wait_for_event(p["event"], match=p.get("match"), timeout=p.get("timeout"),
                                    on_timeout=p.get("on_timeout", "return"))
    seen("woke", job_id=ctx.job_id, detail=data)
    return {"data": data}


@app.job(name="wf.waiter_sync", max_attempts=3)
def waiter_sync(ctx: JobContext, p: dict[str, Any]) -> dict[str, Any]:
    data = ctx.wait_for_event_sync(p["event"], match=p.get("match"), timeout=p.get("timeout"))
    return {"data": data}


@app.job(name="wf.bad_wait", max_attempts=3)
async def bad_wait(ctx: JobContext, p: dict[str, str]) -> None:
    match: Any = {"set": {1, 2}} if p["how"] == "set" else {"x": float("nan")}
    await ctx.wait_for_event("ok", match=match)


# -- replay and pause --------------------------------------------------------------------------
def stage(name: str, p: dict[str, Any]) -> dict[str, str]:
    """One step of ``wf.pipeline``: holds on its gate when told, fails when told and its
    gate is shut, and records that it ran."""
    seen("step", detail={"step": name})
    if p.get("hold") == name:
        hold(f"hold-{name}")
    if p.get("fail") == name and not gate_open(f"fixed-{name}"):
        raise RuntimeError(f"step {name} fails until gate fixed-{name} opens")
    return {"done": name}


@app.job(name="wf.pipeline", max_attempts=1)
async def pipeline(ctx: JobContext, p: dict[str, Any]) -> dict[str, Any]:
    results = [await ctx.step(name, asyncio.to_thread, stage, name, p) for name in "abc"]
    return {"results": results}


@app.job(name="wf.plain")
def plain(ctx: JobContext, p: dict[str, Any]) -> None:
    seen("run", job_id=ctx.job_id)
