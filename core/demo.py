"""The bundled demo app: a few kinds that show forklift's behaviours at a glance.

``forklift demo`` runs it on the embedded database; ``forklift worker --app forklift.demo``
runs it anywhere.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass

from forklift.app import Forklift
from forklift.context import JobContext
from forklift.retry import Backoff, Fail

app = Forklift()

_FAST_RETRY = Backoff(kind="fixed", base=0.2, max=1.0, jitter="equal")


@dataclass
class Work:
    n: int = 0
    fail_rate: float = 0.3


@dataclass
class Done:
    n: int
    note: str = "ok"


@app.job(name="demo.fast", queue="default")
async def fast(ctx: JobContext, work: Work) -> Done:
    return Done(work.n)


@app.job(name="demo.slow", queue="slow", timeout=30)
async def slow(ctx: JobContext, work: Work) -> Done:
    await asyncio.sleep(0.2 + random.random() * 0.3)
    return Done(work.n, "took a while")


@app.job(name="demo.flaky", queue="default", max_attempts=4, retry=_FAST_RETRY)
async def flaky(ctx: JobContext, work: Work) -> Done:
    if random.random() < work.fail_rate:
        raise ConnectionError("upstream said 503 (try https://user:hunter2@api.example/)")
    return Done(work.n, f"attempt {ctx.attempt}")


@app.job(name="demo.failing", queue="mail", max_attempts=3, retry=_FAST_RETRY,
         failure_codes=["mailbox_full"])
async def failing(ctx: JobContext, work: Work) -> Done:
    if work.n % 2:
        raise Fail("mailbox_full", "the mailbox is full")
    raise RuntimeError("SMTP server refused the message")


@app.job(name="demo.report", queue="reports", timeout=60)
def report(ctx: JobContext, work: Work) -> Done:
    steps = 5
    for i in range(steps):
        if ctx.cancelled.wait(0.05):
            break
        ctx.progress(i + 1, steps, f"section {i + 1} of {steps}")
    return Done(work.n, "report written")


MIX: list[tuple[str, float]] = [
    ("demo.fast", 0.6),
    ("demo.flaky", 0.2),
    ("demo.slow", 0.08),
    ("demo.failing", 0.04),
    ("demo.report", 0.08),
]


def pick(rng: random.Random) -> str:
    r = rng.random()
    acc = 0.0
    for name, weight in MIX:
        acc += weight
        if r < acc:
            return name
    return MIX[0][0]
