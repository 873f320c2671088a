"""`forklift demo`: the bundled demo app, its traffic and its workers, and the console on them.

Without ``--headless`` it starts the demo's workers as processes of their own (the console
lists them by pid; draining one sends it SIGTERM), plays a scenario's traffic
(:mod:`forklift_console.demo_scenarios`) and opens the operator console on it; closing the
console stops the traffic and the workers, leaving no process behind. ``--headless`` runs a
fixed number of quick jobs to the end in this process and prints a summary (for scripts and CI).
"""

from __future__ import annotations

import asyncio
import random
import time
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

from forklift import STATES, TERMINAL_STATES, Forklift, Worker
from forklift.ops.connect import connection
from forklift.ops.jobs import count_by_state
from forklift_console import demo_app
from forklift_console.demo_fleet import DemoFleet, SlotSpec
from forklift_console.demo_pin import HorizonPin
from forklift_console.demo_scenarios import SCENARIOS
from forklift_console.demo_traffic import DemoTraffic

if TYPE_CHECKING:
    from forklift_console.app import ConsoleApp


def _table(counts: dict[str, int], title: str) -> Table:
    table = Table(title=title)
    for state in STATES:
        table.add_column(state, justify="right")
    table.add_row(*(str(counts.get(s, 0)) for s in STATES))
    return table


def run_demo(
    *,
    headless: bool,
    jobs: int,
    concurrency: int,
    dsn: str | None,
    scenario: str = "all",
    pin_horizon: bool = False,
    read_only: bool = False,
) -> int:
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

    engine = DemoEngine(app, concurrency=concurrency, scenario=scenario, pin_horizon=pin_horizon)
    engine.start()
    try:
        console_app(app, engine, read_only=read_only).run()
    finally:
        engine.stop()
    return 0


def console_app(app: Forklift, engine: DemoEngine, *, read_only: bool = False) -> ConsoleApp:
    """The console as ``forklift demo`` opens it (scripts/screenshots.py takes the docs'
    screenshots of this one, header and refresh rate included)."""
    from forklift_console.app import ConsoleApp
    from forklift_console.backend import Backend

    return ConsoleApp(Backend.open(app.dsn, schema=app.schema, actor=None,
                                   read_only=read_only or None),
                      demo=engine, interval=LIVE_REFRESH)


# -- live: the console on a scenario's traffic --------------------------------------------------
#: The console's refresh interval in the demo (seconds).
LIVE_REFRESH = 1.0
EXPORT = demo_app.EXPORT
EXPORT_SECONDS = demo_app.EXPORT_SECONDS
DRAIN_TIMEOUT = 20.0
#: Seconds after a drained worker exits before its replacement starts (a rolling restart).
RESTART_AFTER = 5.0


class DemoEngine:
    """The demo's worker processes, its traffic and its pinned horizon, beside the console.

    Two workers share the queues (one on every queue, one on the report and default queues);
    draining one from the console (key d on the Workers screen, or ``kill -TERM <pid>``) shows
    its cutoff and in-flight jobs, and a replacement starts once it has exited.
    """

    def __init__(self, app: Forklift, *, concurrency: int, scenario: str = "all",
                 pin_horizon: bool = False) -> None:
        if scenario not in SCENARIOS:
            raise ValueError(f"--scenario {scenario!r} is not one of: {', '.join(SCENARIOS)}")
        self.app = app
        self.scenario = SCENARIOS[scenario]
        dsn = app.dsn  # the embedded server starts (and migrates) here, before any worker
        self.fleet = DemoFleet(dsn, [
            SlotSpec(None, concurrency),
            SlotSpec(("default", "reports", "slow"), max(4, concurrency // 2)),
        ], schema=app.schema, drain_timeout=DRAIN_TIMEOUT, restart_after=RESTART_AFTER)
        self.pin = HorizonPin(dsn)
        streams = self.scenario.streams + (("horizon",) if pin_horizon else ())
        self.traffic = DemoTraffic(app, tuple(dict.fromkeys(streams)), self.pin)

    # -- the console's side (UI thread) -------------------------------------------------------
    @property
    def pids(self) -> list[int]:
        return self.fleet.pids

    def owns(self, worker_id: str) -> bool:
        return self.fleet.owns(worker_id)

    def drain(self, worker_id: str) -> str:
        if not self.fleet.drain(worker_id):
            return f"worker {worker_id} is not one of the demo's"
        return (
            f"sent SIGTERM to {worker_id}: it claims nothing new, its jobs get"
            f" {DRAIN_TIMEOUT:g}s to finish, then the rest are interrupted and retried; a new"
            f" worker starts {RESTART_AFTER:g}s after it exits"
        )

    def pin_horizon(self) -> str:
        return self.pin.toggle()

    def start(self) -> None:
        self.fleet.start()
        self.traffic.start()

    def stop(self) -> None:
        self.traffic.stop()
        self.pin.release()
        self.fleet.stop()
