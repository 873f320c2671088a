"""The bundled demo app: a few kinds that show forklift's behaviours at a glance.

``forklift demo`` runs it on the embedded database; ``forklift worker --app forklift_console.demo_app``
runs it anywhere.
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass
from typing import Any

from forklift import Backoff, Fail, Forklift, JobContext

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
        ctx.cancelled.wait(0.05)  # a unit of work
        ctx.raise_if_cancelled()  # told to stop: the worker records why (cancel, drain...)
        ctx.progress(i + 1, steps, f"section {i + 1} of {steps}")
    return Done(work.n, "report written")


# -- a schedule and a paced backfill, so the console's screens for them have something to show --
ACCOUNTS = 20_000


def _accounts(cursor: int | None, limit: int) -> tuple[list[int], int | None]:
    start = cursor or 0
    end = min(start + limit, ACCOUNTS)
    return list(range(start, end)), (end if end < ACCOUNTS else None)


@app.backfill("demo.reindex", page_size=50, rate=4.0, read=_accounts, total=lambda: ACCOUNTS)
def reindex(accounts: list[int], conn: Any) -> None:
    """Pretend to rebuild each account's search entry: a little work per page."""
    time.sleep(random.random() * 0.05)


@app.periodic("* * * * * */15", name="demo.tidy")  # seconds are the sixth field
@app.job(name="demo.tidy", queue="default")
def tidy(ctx: JobContext, args: dict[str, Any]) -> dict[str, str]:
    """Every 15 seconds: start the reindex backfill when it has never run or has completed
    (one an operator paused or cancelled is left alone)."""
    from forklift.ops import backfills
    from forklift.ops.connect import connection
    from forklift.ops.context import OpsContext

    who = OpsContext(schema=app.schema, actor="demo.tidy")
    with connection(app.dsn, "ops") as conn:
        try:
            state = backfills.get_backfill(conn, who, reindex.name).state
        except backfills.BackfillNotFound:
            state = "never_run"  # not recorded yet: start() records it
        if state not in ("never_run", "completed"):
            return {"reindex": state}
        return {"reindex": backfills.start(conn, who, reindex.name, force=True,
                                           definition=reindex).outcome}


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
