"""The foundation tests' app: one kind per payload style, per handler style, per way to fail.

Tests run it in-process (``running_worker``) or as ``forklift worker --app
tests.apps.basic:app``. Handlers that must stay running until a test has looked at them wait on
a gate: ``GATES[name]``, a threading.Event the test sets (in-process workers only).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import psycopg
from pydantic import BaseModel
from typing_extensions import TypedDict  # pydantic needs it for TypedDict on Python < 3.12

from forklift import Backoff, Forklift, JobContext, Worker

app = Forklift()

GATES: dict[str, threading.Event] = {}


def gate(name: str) -> threading.Event:
    return GATES.setdefault(name, threading.Event())


# -- payload styles ------------------------------------------------------------------------
@dataclass
class Greeting:
    name: str
    times: int = 1


@dataclass
class Echoed:
    text: str


class Order(TypedDict):
    sku: str
    qty: int


class Receipt(TypedDict):
    sku: str
    total: int


class Line(BaseModel):
    sku: str
    qty: int


class Invoice(BaseModel):
    number: str
    lines: list[Line] = []


class Paid(BaseModel):
    number: str
    items: int


@app.job(name="basic.echo")
def echo(ctx: JobContext, g: Greeting) -> Echoed:
    return Echoed(" ".join([f"hello {g.name}"] * g.times))


@app.job(name="basic.order", queue="orders")
async def order(ctx: JobContext, o: Order) -> Receipt:
    return {"sku": o["sku"], "total": o["qty"] * 3}


@app.job(name="basic.invoice", queue="orders")
def invoice(ctx: JobContext, inv: Invoice) -> Paid:
    return Paid(number=inv.number, items=sum(line.qty for line in inv.lines))


@app.job(name="basic.noop")
async def noop(ctx: JobContext, args: dict[str, Any]) -> None:
    return None


@app.job(name="basic.whoami", queue="orders")
async def whoami(ctx: JobContext, args: dict[str, Any]) -> dict[str, Any]:
    return {"job_id": ctx.job_id, "attempt": ctx.attempt, "max_attempts": ctx.max_attempts,
            "kind": ctx.kind, "queue": ctx.queue, "cancelled": ctx.is_cancelled(),
            "meta": ctx.meta}


@dataclass
class Reading:
    value: float


@app.job(name="basic.measure")
def measure(ctx: JobContext, r: Reading) -> float:
    return r.value


@app.job(name="basic.anything")
def anything(ctx: JobContext, args: Any) -> Any:
    return args


# -- progress and partial results -----------------------------------------------------------
@dataclass
class Gated:
    gate: str


@app.job(name="basic.report", timeout=60)
def report(ctx: JobContext, p: Gated) -> dict[str, int]:
    ctx.progress(1, 2, "half way")
    ctx.publish({"rows": 10})
    gate(p.gate).wait(30)
    ctx.progress(2, 2, "done")
    return {"rows": 20}


@app.job(name="basic.hold", timeout=60)
async def hold(ctx: JobContext, p: Gated) -> None:
    await asyncio.to_thread(gate(p.gate).wait, 30)


# -- failures -------------------------------------------------------------------------------
@app.job(
    name="basic.flaky",
    max_attempts=3,
    retry=Backoff(kind="exponential", base=0.3, max=10, jitter="none"),
)
def flaky(ctx: JobContext, args: dict[str, Any]) -> None:
    raise ValueError(f"boom on attempt {ctx.attempt}")


@app.job(name="basic.bad_result", max_attempts=1)
def bad_result(ctx: JobContext, args: dict[str, Any]) -> Any:
    return object()


@app.job(name="basic.wrong_result", max_attempts=1)
def wrong_result(ctx: JobContext, args: dict[str, Any]) -> Echoed:
    return {"not": "an Echoed"}  # type: ignore[return-value]


@app.job(name="basic.exit_sync", max_attempts=1)
def exit_sync(ctx: JobContext, args: dict[str, Any]) -> None:
    raise SystemExit(3)


@app.job(name="basic.exit_async", max_attempts=1)
async def exit_async(ctx: JobContext, args: dict[str, Any]) -> None:
    raise SystemExit(3)


@app.job(name="basic.interrupt_sync", max_attempts=1)
def interrupt_sync(ctx: JobContext, args: dict[str, Any]) -> None:
    raise KeyboardInterrupt


@app.job(name="basic.interrupt_async", max_attempts=1)
async def interrupt_async(ctx: JobContext, args: dict[str, Any]) -> None:
    raise KeyboardInterrupt


def _down(n: int) -> int:
    return _down(n + 1) + 1


@app.job(name="basic.recurse", max_attempts=1)
def recurse(ctx: JobContext, args: dict[str, Any]) -> int:
    return _down(0)


@app.job(name="basic.recurse_async", max_attempts=1)
async def recurse_async(ctx: JobContext, args: dict[str, Any]) -> int:
    return _down(0)


# -- binding the app and running a worker beside a test ----------------------------------------
def job_row(conn: psycopg.Connection[Any], job_id: int) -> dict[str, Any]:
    """Every column of one stored job, by name."""
    cur = conn.execute("SELECT * FROM forklift.jobs WHERE id = %s", (job_id,))
    row = cur.fetchone()
    assert row is not None, f"job {job_id} is not stored"
    assert cur.description is not None
    return {d.name: v for d, v in zip(cur.description, row, strict=True)}


@contextlib.contextmanager
def bound(dsn: str) -> Iterator[Forklift]:
    """The app pointed at a test's database, its connection pool closed afterwards."""
    app.use(dsn)
    try:
        yield app
    finally:
        app.close()


@contextlib.contextmanager
def running_worker(target: Forklift, **options: Any) -> Iterator[Worker]:
    """Run a Worker on its own event loop in a thread; drain it and wait for it on exit.

    An error that stops the worker is re-raised here, so a test cannot pass over a dead worker.
    """
    worker = Worker(target, **options)
    failure: list[BaseException] = []

    def main() -> None:
        try:
            asyncio.run(worker.run())
        except BaseException as exc:
            failure.append(exc)

    from helpers import wait_until  # tests/ is on sys.path under pytest, not in worker processes

    thread = threading.Thread(target=main, name="test-worker", daemon=True)
    thread.start()
    wait_until(
        lambda: worker._started.is_set() or not thread.is_alive(),
        timeout=30,
        message="the worker did not start",
    )
    try:
        if failure:
            raise failure[0]
        yield worker
    finally:
        _stop(worker, thread)
    if failure:
        raise failure[0]


def _stop(worker: Worker, thread: threading.Thread) -> None:
    # The first drain lets handlers finish; the second skips the wait for the stragglers.
    for patience in (15.0, 30.0):
        loop = worker._loop
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(worker.drain)
        thread.join(patience)
        if not thread.is_alive():
            return
        for g in GATES.values():
            g.set()
    raise AssertionError("the worker did not stop after two drains")
