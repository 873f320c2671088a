"""Kinds for the worker's fast path: no-op jobs, and a job that holds its slot until released."""

from __future__ import annotations

import asyncio
import contextvars
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
    SEEN.clear()
    TIMED.clear()


@app.job(name="perf.noop", queue="perf")
async def noop(ctx: JobContext, payload: dict[str, int]) -> None:
    STARTED.append(ctx.job_id)


@app.job(name="perf.hold", queue="perf")
async def hold(ctx: JobContext, payload: dict[str, int]) -> None:
    STARTED.append(ctx.job_id)
    while not GATE.is_set() and not ctx.is_cancelled():
        await asyncio.to_thread(GATE.wait, 0.05)


#: What each ``perf.context`` job saw of ``TAG`` before setting it to its own id.
SEEN: dict[int, int | None] = {}
TAG: contextvars.ContextVar[int | None] = contextvars.ContextVar("perf_tag", default=None)
#: (job id, the handler's current task, whether asyncio.timeout cancelled its await) per
#: ``perf.timed`` job.
TIMED: list[tuple[int, asyncio.Task[object] | None, bool]] = []


@app.job(name="perf.context", queue="perf")
async def context(ctx: JobContext, payload: dict[str, int]) -> None:
    """Never suspends: jobs of this kind run one after another in the same runner task."""
    SEEN[ctx.job_id] = TAG.get()
    TAG.set(ctx.job_id)


@app.job(name="perf.timed", queue="perf")
async def timed(ctx: JobContext, payload: dict[str, int]) -> None:
    """``asyncio.timeout`` inside a handler: its own cancellation, not the worker's."""
    timed_out = False
    try:
        async with asyncio.timeout(0.01):
            await asyncio.sleep(30)
    except TimeoutError:
        timed_out = True
    TIMED.append((ctx.job_id, asyncio.current_task(), timed_out))
