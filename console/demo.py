"""`forklift demo`: the bundled demo app, a steady stream of work and a worker, in one process."""

from __future__ import annotations

import asyncio
import contextlib
import random
import time

from rich.console import Console
from rich.live import Live
from rich.table import Table

from forklift import demo as demo_app
from forklift.db import connection
from forklift.job import STATES, TERMINAL_STATES
from forklift.ops.jobs import count_by_state
from forklift.worker import Worker


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

    async def run_live() -> None:
        task = asyncio.create_task(worker.run())
        n = 0
        with connection(target, "ops") as conn, Live(console=console, refresh_per_second=4) as live:
            try:
                while not task.done():
                    rows = [app.kind(demo_app.pick(rng)).row({"n": n + i}) for i in range(5)]
                    n += len(rows)
                    app.enqueue_rows(rows)
                    live.update(_table(count_by_state(conn, app.schema),
                                       "forklift demo: Ctrl-C to stop"))
                    await asyncio.sleep(0.25)
            except asyncio.CancelledError:
                pass
        worker.drain()
        with contextlib.suppress(Exception):
            await task

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(run_live())
    return 0
