"""`forklift demo` opens the console on live traffic: watch a worker drain from the console."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from console_seed import SCHEMA, drive, loaded, on_screen
from helpers import wait_until_async
from textual.pilot import Pilot

from forklift_console import demo_app
from forklift_console.app import ConsoleApp
from forklift_console.backend import Backend
from forklift_console.demo import EXPORT, EXPORT_SECONDS, DemoEngine
from forklift_console.screens.workers import WorkersScreen
from forklift_console.widgets.table import LiveTable


@pytest.fixture
def engine(dsn: str) -> Iterator[DemoEngine]:
    app = demo_app.app
    app.use(dsn)
    engine = DemoEngine(app, concurrency=4)
    engine.start()
    try:
        yield engine
    finally:
        engine.stop()


def test_a_worker_drains_from_the_console_and_shows_its_cutoff(
    dsn: str, conn: psycopg.Connection[Any], engine: DemoEngine
) -> None:
    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        await pilot.press("5")
        workers = await on_screen(app, WorkersScreen)
        table = workers.query_one("#workers", LiveTable)

        async def owned() -> list[str]:
            await loaded(app, workers)
            return [k for k in table.keys if engine.owns(k)]

        ids = await wait_until_async(lambda: _two(owned), timeout=30,
                                     message="the demo's two workers never registered")
        # Long exports on every slot, so the drained worker has jobs in flight to show.
        long = [n for n in range(500) if random.Random(n).uniform(*EXPORT_SECONDS) > 30][:10]
        export = demo_app.app.kind(EXPORT)
        for n in long:
            export.enqueue({"n": n})
        table.focus()
        assert table.move_to_key(ids[0])

        def started() -> bool:
            # Started, not only held: a job waiting in the worker's local buffer is listed in
            # flight too, and a drain gives it straight back, so a worker holding exports only
            # in its buffer drained and exited at once (the pane then read "exited").
            row = conn.execute(
                f"SELECT count(*) FROM {SCHEMA}.jobs WHERE worker_id = %s AND kind = %s"
                " AND state = 'running' AND attempted_at IS NOT NULL", (ids[0], EXPORT),
            ).fetchone()
            return bool(row and row[0])

        async def busy() -> bool:
            await loaded(app, workers)
            return EXPORT in str(workers.query_one("#inflight").render()) and started()

        await wait_until_async(busy, timeout=30, message="no export ran on the worker")
        assert workers.check_action("drain", ()) is True
        await pilot.press("d")

        async def draining() -> bool:
            await loaded(app, workers)
            pane = str(workers.query_one("#inflight").render())
            return "DRAINING: cutoff in" in pane and "will be interrupted" in pane

        await wait_until_async(draining, timeout=30, message=lambda: (
            "the drain never showed; the pane read: "
            + str(workers.query_one("#inflight").render())))
        assert "draining" in str(table.get_cell(ids[0], "state"))
        assert workers.check_action("drain", ()) is None  # already draining

    app = ConsoleApp(Backend.open(dsn, schema=SCHEMA, actor="tester"), demo=engine,
                     interval=3600)
    drive(app, scenario)


async def _two(owned: Any) -> list[str] | None:
    ids: list[str] = await owned()
    return ids if len(ids) == 2 else None


def test_drain_is_hidden_outside_the_demo_and_disabled_read_only(dsn: str) -> None:
    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        await pilot.press("5")
        workers = await on_screen(app, WorkersScreen)
        assert workers.check_action("drain", ()) is False

    drive(ConsoleApp(Backend.open(dsn, schema=SCHEMA, actor="tester"), interval=3600),
          scenario)


def test_the_demo_submits_batches_the_batches_screen_shows(dsn: str, engine: DemoEngine) -> None:
    """17.19: the Batches screen was empty in `forklift demo`."""
    from forklift_console.screens.batches import BatchesScreen

    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        await pilot.press("7")
        batches = await on_screen(app, BatchesScreen)
        table = batches.query_one("#batches", LiveTable)

        async def shown() -> bool:
            await loaded(app, batches)
            return bool(table.keys)

        await wait_until_async(shown, timeout=30, message="the demo's batch never showed")

    app = ConsoleApp(Backend.open(dsn, schema=SCHEMA, actor="tester"), demo=engine,
                     interval=3600)
    drive(app, scenario)
