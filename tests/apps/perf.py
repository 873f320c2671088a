"""Kinds for the worker's fast path: no-op jobs, and a job that holds its slot until released."""

from __future__ import annotations

import asyncio
import threading

from forklift import Forklift, JobContext

app = Forklift(schema="forklift")

#: Ids of every job whose handler started, in start order (handlers run on the worker's loop).
STARTED: list[int] = []
#: Set to let every waiting ``perf.hold`` job finish.
GATE = threading.Event()


def reset() -> None:
    STARTED.clear()
    GATE.clear()


@app.job(name="perf.noop", queue="perf")
async def noop(ctx: JobContext, payload: dict[str, int]) -> None:
    STARTED.append(ctx.job_id)


@app.job(name="perf.hold", queue="perf")
async def hold(ctx: JobContext, payload: dict[str, int]) -> None:
    STARTED.append(ctx.job_id)
    while not GATE.is_set() and not ctx.is_cancelled():
        await asyncio.to_thread(GATE.wait, 0.05)
