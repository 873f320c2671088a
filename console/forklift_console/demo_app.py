"""The bundled demo app: kinds that show forklift's behaviours at a glance, and give each of
the on-call tasks something to rehearse on.

``forklift demo`` runs it on the embedded database; ``forklift worker --app forklift_console.demo_app``
runs it anywhere. Besides the quick mix (fast, flaky, slow, failing, reports): long exports
(drains), batch chapters that take seconds each (batches that last minutes), a kind keyed by
tenant at a limit of two, a vendor call on a rate-limited queue, an order workflow that waits
for a payment event and sleeps, an extract-load-summary chain of dependencies, and a reindex
backfill held back by its rate.
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from forklift import Backoff, Fail, Forklift, JobContext, Key

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


#: Pages a second: the backfill's bottleneck by design (each page takes a few milliseconds).
REINDEX_RATE = 2.0


@app.backfill("demo.reindex", page_size=50, rate=REINDEX_RATE, read=_accounts,
              total=lambda: ACCOUNTS)
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


# -- long work: exports a drain catches in flight, chapters that make a batch last minutes ------
EXPORT = "demo.export"
#: Long enough that a drain's 20 s catches some exports in flight and not others.
EXPORT_SECONDS = (10.0, 120.0)


@app.job(name=EXPORT, queue="reports", timeout=300, max_attempts=5)
def export(ctx: JobContext, work: Work) -> Done:
    """A slow, cancellable kind with progress, so drains have in-flight jobs to show."""
    rng = random.Random(work.n)
    seconds = rng.uniform(*EXPORT_SECONDS)
    steps = max(1, int(seconds))
    for i in range(steps):
        if ctx.cancelled.wait(seconds / steps):
            raise RuntimeError(f"export {work.n} stopped at part {i} of {steps}")
        ctx.progress(i + 1, steps, f"part {i + 1} of {steps}")
    return Done(work.n, f"exported {steps} parts")


CHAPTER = "demo.chapter"
#: A chapter takes this long; a book of BOOK_CHAPTERS two at a time lasts a few minutes.
CHAPTER_SECONDS = (3.0, 9.0)
BOOK_CHAPTERS = 40
BOOK_PARALLEL = 2


@app.job(name=CHAPTER, queue="reports", timeout=60)
def chapter(ctx: JobContext, work: Work) -> Done:
    seconds = random.Random(work.n).uniform(*CHAPTER_SECONDS)
    steps = 6
    for i in range(steps):
        ctx.cancelled.wait(seconds / steps)
        ctx.raise_if_cancelled()  # the batch was cancelled: stop here
        ctx.progress(i + 1, steps, f"page {i + 1} of {steps}")
    return Done(work.n, "chapter written")


# -- flow control: a tenant key at its limit, a queue with a rate --------------------------------
SYNC = "demo.sync"
TENANT_KEY = "demo.tenant"
TENANT_LIMIT = 2


@dataclass
class Sync:
    tenant: str
    n: int = 0


@app.job(name=SYNC, queue="sync", timeout=60,
         concurrency=[Key(lambda p: p.tenant, limit=TENANT_LIMIT, name=TENANT_KEY)])
def sync(ctx: JobContext, p: Sync) -> Done:
    """A few seconds per account sync; at most two per tenant at once, fleet-wide."""
    ctx.cancelled.wait(random.uniform(2.0, 5.0))
    return Done(p.n, f"synced {p.tenant}")


VENDOR = "demo.vendor"
VENDOR_QUEUE = "vendor"
#: The vendor queue's rate, set by the demo as an operator would (forklift queues rate).
VENDOR_RATE = "1/s"


@app.job(name=VENDOR, queue=VENDOR_QUEUE)
async def vendor(ctx: JobContext, work: Work) -> Done:
    await asyncio.sleep(0.05)
    return Done(work.n, "vendor answered")


# -- workflows: an order that waits for its payment and sleeps; a chain of dependencies ---------
FULFIL = "demo.fulfil"
PAID = "demo.paid"
#: How long an order waits for its payment, and sleeps after it.
PAYMENT_TIMEOUT = timedelta(minutes=15)
COOL_DOWN = timedelta(minutes=2)


@app.job(name=FULFIL, queue="orders", timeout=60)
async def fulfil(ctx: JobContext, order: Work) -> dict[str, Any]:
    charge = await ctx.step("charge", _charge, order.n)
    paid = await ctx.wait_for_event(PAID, match={"order": order.n}, timeout=PAYMENT_TIMEOUT)
    if paid is None:
        return {"order": order.n, "state": "unpaid"}
    await ctx.sleep("cool-down", COOL_DOWN)
    await ctx.step("ship", _ship, order.n)
    return {"order": order.n, "state": "shipped", "charge": charge}


def _charge(order: int) -> str:
    return f"ch_{order}"


def _ship(order: int) -> str:
    return f"shipped {order}"


EXTRACT, LOAD, SUMMARY = "demo.extract", "demo.load", "demo.summary"


@app.job(name=EXTRACT, queue="etl", timeout=120)
def extract(ctx: JobContext, work: Work) -> Done:
    """Slow on purpose: the summary waits for it (dependencies)."""
    ctx.cancelled.wait(random.uniform(20.0, 40.0))
    ctx.raise_if_cancelled()
    return Done(work.n, "extracted")


@app.job(name=LOAD, queue="etl")
def load(ctx: JobContext, work: Work) -> Done:
    return Done(work.n, "loaded")


@app.job(name=SUMMARY, queue="etl")
def summary(ctx: JobContext, work: Work) -> Done:
    return Done(work.n, "summarised")


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
