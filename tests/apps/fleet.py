"""The app of the fleet test: each attempt writes its start and end, with the wall clock, to a
file of its host (``FLEET_LOG``), not to the database: a host cut off from the database still
records what its handlers did, so the test can check that no two ran one job at once."""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass

from forklift import Forklift, JobContext

app = Forklift()


@dataclass
class Work:
    #: The attempts up to this one wait until they are stopped; later ones return at once.
    hold_attempts: int = 0


def record(ctx: JobContext, what: str) -> None:
    with open(os.environ["FLEET_LOG"], "a", encoding="utf-8") as out:
        out.write(f"{what} {ctx.job_id} {ctx.attempt} {ctx.worker_id} {time.time():.6f}\n")


@app.job(name="fleet.work", queue="fleet", max_attempts=5)
async def work(ctx: JobContext, w: Work) -> str:
    record(ctx, "start")
    try:
        if ctx.attempt <= w.hold_attempts:
            await asyncio.Event().wait()  # until the lease watchdog stops it
        return ctx.worker_id
    finally:
        record(ctx, "end")
