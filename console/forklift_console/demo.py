"""`forklift demo`: the bundled demo app, a steady stream of work and workers, in one process.

Without ``--headless`` it opens the operator console on that live traffic; ``--headless`` runs
a fixed number of jobs to the end and prints a summary (for scripts and CI).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import threading
import time
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

from forklift import STATES, TERMINAL_STATES, Forklift, JobContext, Worker
from forklift.ops.connect import connection
from forklift.ops.jobs import count_by_state
from forklift_console import demo_app

if TYPE_CHECKING:
    from forklift_console.app import ConsoleApp


def _table(counts: dict[str, int], title: str) -> Table:
    table = Table(title=title)
    for state in STATES:
        table.add_column(state, justify="right")
    table.add_row(*(str(counts.get(s, 0)) for s in STATES))
    return table


def run_demo(*, headless: bool, jobs: int, concurrency: int, dsn: str | None) -> int:
    app = demo_app.app
    if dsn:
        app.use(dsn)
    target = app.dsn
    console = Console()
    rng = random.Random()
    worker = Worker(app, concurrency=concurrency, lease=15.0, drain_timeout=5.0)

    if headless:
        ids: list[int] = []
        for start in range(0, jobs, 1000):
            batch = [
                app.kind(demo_app.pick(rng)).row({"n": i})
                for i in range(start, min(jobs, start + 1000))
            ]
            ids.extend(app.enqueue_rows(batch))
        began = time.monotonic()

        async def run_headless() -> dict[str, int]:
            task = asyncio.create_task(worker.run())
            counts: dict[str, int] = {}
            with connection(target, "ops") as conn:
                while not task.done():
                    counts = count_by_state(conn, app.schema, ids)
                    if sum(counts.get(s, 0) for s in TERMINAL_STATES) == len(ids):
                        break
                    await asyncio.sleep(0.2)
            worker.drain()
            await task
            return counts

        counts = asyncio.run(run_headless())
        elapsed = time.monotonic() - began
        done = sum(counts.get(s, 0) for s in TERMINAL_STATES)
        console.print(_table(counts, f"{jobs} demo jobs in {elapsed:.1f}s"))
        console.print(
            f"{done} of {len(ids)} jobs terminal: {counts.get('completed', 0)} completed,"
            f" {counts.get('dead', 0)} dead (on purpose: demo.failing and unlucky demo.flaky),"
            f" {counts.get('cancelled', 0)} cancelled; none lost."
        )
        return 0 if done == len(ids) else 1

    engine = DemoEngine(app, concurrency=concurrency)
    engine.start()
    try:
        console_app(app, engine).run()
    finally:
        engine.stop()
    return 0


def console_app(app: Forklift, engine: DemoEngine) -> ConsoleApp:
    """The console as ``forklift demo`` opens it (scripts/screenshots.py takes the docs'
    screenshots of this one, header and refresh rate included)."""
    from forklift_console.app import ConsoleApp
    from forklift_console.backend import Backend

    return ConsoleApp(Backend.open(app.dsn, schema=app.schema, actor=None), demo=engine,
                      interval=LIVE_REFRESH)


# -- live: the console on a steady stream of work ---------------------------------------------
#: The console's refresh interval in the demo (seconds).
LIVE_REFRESH = 1.0
EXPORT = "demo.export"
#: Long enough that a drain (DRAIN_TIMEOUT) catches some exports in flight and not others.
EXPORT_SECONDS = (4.0, 40.0)
DRAIN_TIMEOUT = 20.0
#: Seconds after a drained worker exits before its replacement starts (a rolling restart).
RESTART_AFTER = 5.0
#: The demo submits a batch of report targets at start and then every this many producer
#: rounds (a quarter second each), so the Batches screen has something to show.
BATCH_EVERY = 240
BATCH_TARGETS = 24


def _declare_export(app: Forklift) -> None:
    """A slow, cancellable kind with progress, so drains have in-flight jobs to show."""
    if EXPORT in app.kinds:
        return

    @app.job(name=EXPORT, queue="reports", timeout=120, max_attempts=5)
    def export(ctx: JobContext, work: demo_app.Work) -> demo_app.Done:
        rng = random.Random(work.n)
        seconds = rng.uniform(*EXPORT_SECONDS)
        steps = max(1, int(seconds))
        for i in range(steps):
            if ctx.cancelled.wait(seconds / steps):
                raise RuntimeError(f"export {work.n} stopped at part {i} of {steps}")
            ctx.progress(i + 1, steps, f"part {i + 1} of {steps}")
        return demo_app.Done(work.n, f"exported {steps} parts")


class DemoEngine:
    """Workers and a producer on their own event loop in a thread, beside the console.

    Two workers share the queues; draining one from the console (key d on the workers
    screen) shows its cutoff and in-flight jobs, and a replacement starts once it has exited.
    """

    def __init__(self, app: Forklift, *, concurrency: int) -> None:
        _declare_export(app)
        self.app = app
        self.concurrency = concurrency
        self.rng = random.Random()
        self.workers: dict[str, Worker] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._started = threading.Event()

    # -- the console's side (UI thread) -------------------------------------------------------
    def owns(self, worker_id: str) -> bool:
        return worker_id in self.workers

    def drain(self, worker_id: str) -> str:
        worker, loop = self.workers.get(worker_id), self._loop
        if worker is None or loop is None:
            return f"worker {worker_id} is not one of the demo's"
        loop.call_soon_threadsafe(worker.drain)
        return (
            f"draining {worker_id}: it claims nothing new, its jobs get {DRAIN_TIMEOUT:g}s to"
            f" finish, then the rest are interrupted and retried; a new worker starts"
            f" {RESTART_AFTER:g}s after it exits"
        )

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="forklift-demo", daemon=True)
        self._thread.start()
        self._started.wait(30)

    def stop(self) -> None:
        self._stop.set()
        loop = self._loop
        if loop is not None:
            for worker in list(self.workers.values()):
                loop.call_soon_threadsafe(worker.drain)
                loop.call_soon_threadsafe(worker.drain)  # the second call skips the wait
        if self._thread is not None:
            self._thread.join(timeout=30)

    # -- the engine's side (its own loop) -----------------------------------------------------
    def _run(self) -> None:
        asyncio.run(self._main())

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._started.set()
        slots = [
            asyncio.create_task(self._keep_worker(self.concurrency, None)),
            asyncio.create_task(
                self._keep_worker(max(4, self.concurrency // 2), ["default", "reports", "slow"])
            ),
        ]
        producer = asyncio.create_task(self._produce())
        await asyncio.gather(*slots)
        producer.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await producer

    async def _keep_worker(self, concurrency: int, queues: list[str] | None) -> None:
        """One worker slot: run a worker; when it exits (drained), start another."""
        while not self._stop.is_set():
            worker = Worker(self.app, queues=queues, concurrency=concurrency, lease=15.0,
                            drain_timeout=DRAIN_TIMEOUT)
            self.workers[worker.id] = worker
            try:
                await worker.run()
            except Exception:
                pass  # the console shows the worker gone; its replacement starts below
            finally:
                self.workers.pop(worker.id, None)
            for _ in range(int(RESTART_AFTER * 10)):
                if self._stop.is_set():
                    return
                await asyncio.sleep(0.1)

    async def _produce(self) -> None:
        n = 0
        rounds = 0
        while not self._stop.is_set():
            if rounds % BATCH_EVERY == 0:
                with contextlib.suppress(Exception):  # refused (caller busy) or a blip: later
                    await asyncio.to_thread(self._submit_batch, rounds // BATCH_EVERY)
            rounds += 1
            rows = [self.app.kind(demo_app.pick(self.rng)).row({"n": n + i}) for i in range(5)]
            if self.rng.random() < 0.08:
                rows.append(self.app.kind(EXPORT).row({"n": n}))
            n += len(rows)
            with contextlib.suppress(Exception):  # a database blip: try again next round
                await asyncio.to_thread(self.app.enqueue_rows, rows)
            await asyncio.sleep(0.25)

    def _submit_batch(self, k: int) -> None:
        self.app.batch("demo.report", [{"n": 10_000 * (k + 1) + i} for i in range(BATCH_TARGETS)],
                       caller="demo", key=f"demo-reports-{k}", max_parallel=3)
