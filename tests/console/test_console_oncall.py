"""The on-call tasks, each in at most three keys once its screen is open, driven with
Pilot against a real, seeded PostgreSQL.

Every key pressed after the screen's number key is counted (a typed confirmation's digits
too); each test checks the outcome as well as the count. Where a task is about one row ("job
X", "this queue") the row is put under the cursor first, as a search or a drill-down leaves it.
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from console_seed import (
    SCHEMA,
    Seeded,
    drive,
    freeze_db_clock,
    loaded,
    make_app,
    on_screen,
    seed,
    seed_long_runs,
)
from helpers import wait_until_async
from test_backfill_console import rate_of, seed_running, until_db
from textual.pilot import Pilot
from textual.widgets import Static

from forklift_console.app import ConsoleApp
from forklift_console.screens.backfills import BackfillsScreen
from forklift_console.screens.base import ConsoleScreen
from forklift_console.screens.batches import BatchesScreen
from forklift_console.screens.dead import DeadScreen
from forklift_console.screens.job import JobScreen
from forklift_console.screens.jobs import JobsScreen
from forklift_console.screens.modals import ConfirmScreen, ReasonScreen
from forklift_console.screens.queues import QueuesScreen
from forklift_console.screens.workers import WorkersScreen
from forklift_console.widgets.table import LiveTable

MOST = 3


class Keys:
    """Presses keys and counts them."""

    def __init__(self, pilot: Pilot[None]) -> None:
        self.pilot = pilot
        self.count = 0

    async def __call__(self, *keys: str) -> None:
        self.count += len(keys)
        await self.pilot.press(*keys)


async def open_screen(app: ConsoleApp, pilot: Pilot[None], key: str, kind: type[Any]) -> Any:
    await pilot.press(key)
    screen = await on_screen(app, kind)
    await loaded(app, screen)
    screen.query(LiveTable).first().focus()
    await pilot.pause()
    return screen


def text_of(screen: ConsoleScreen[Any], selector: str) -> str:
    return str(screen.query_one(selector, Static).render())


@pytest.fixture
def seeded(conn: psycopg.Connection[Any]) -> Seeded:
    return seed(conn)


def test_what_is_failing_and_why(dsn: str, seeded: Seeded) -> None:
    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        keys = Keys(pilot)
        dead = await open_screen(app, pilot, "4", DeadScreen)
        # With no key at all: the busiest failure, its error and how often it happened.
        group = dead.selected()
        assert (group.kind, group.code) == ("demo.failing", "mailbox_full")
        sample = text_of(dead, "#sample")
        assert "9 dead jobs" in sample and "mailbox_full: the mailbox is full" in sample
        await keys("enter")  # and exactly the jobs behind it
        jobs = await on_screen(app, JobsScreen)
        await loaded(app, jobs)
        assert len(jobs.query_one("#jobs", LiveTable).keys) == 9
        assert keys.count <= MOST

    drive(make_app(dsn), scenario)


def test_why_is_job_x_not_running(dsn: str, seeded: Seeded) -> None:
    job = seeded.ids["lagging"]  # reports: three running against a limit of two

    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        keys = Keys(pilot)
        jobs = await open_screen(app, pilot, "3", JobsScreen)
        assert jobs.query_one("#jobs", LiveTable).move_to_key(str(job))
        await pilot.pause()
        await keys("enter")
        detail = await on_screen(app, JobScreen)
        await wait_until_async(lambda: "concurrency limit" in text_of(detail, "#why"),
                               timeout=20, message=lambda: text_of(detail, "#why"))
        assert keys.count <= MOST

    drive(make_app(dsn), scenario)


def test_requeue_a_dead_letter_group(
    dsn: str, conn: psycopg.Connection[Any], seeded: Seeded
) -> None:
    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        keys = Keys(pilot)
        dead = await open_screen(app, pilot, "4", DeadScreen)
        assert dead.selected().count == 9
        await keys("r")
        await on_screen(app, ConfirmScreen)
        await keys("9", "enter")  # the count typed is the confirmation
        await wait_until_async(lambda: dead_count(conn, "mailbox_full") == 0, timeout=20)
        assert keys.count <= MOST

    drive(make_app(dsn), scenario)


def dead_count(conn: psycopg.Connection[Any], code: str) -> int:
    row = conn.execute(f"SELECT count(*) FROM {SCHEMA}.jobs WHERE state = 'dead'"
                       " AND errors -> -1 ->> 'code' = %s", (code,)).fetchone()
    assert row is not None
    return int(row[0])


def test_pause_and_resume_a_queue(dsn: str, conn: psycopg.Connection[Any], seeded: Seeded) -> None:
    def paused() -> bool:
        row = conn.execute(f"SELECT paused FROM {SCHEMA}.queues WHERE name = 'default'").fetchone()
        return bool(row and row[0])

    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        queues = await open_screen(app, pilot, "2", QueuesScreen)
        assert queues.query_one("#queues", LiveTable).current_key == "default"
        pause = Keys(pilot)
        await pause("p")
        await on_screen(app, ReasonScreen)
        await pause("enter")  # no reason, no expiry: both optional, enter confirms
        await wait_until_async(paused, timeout=20)
        assert pause.count <= MOST
        await loaded(app, queues)
        resume = Keys(pilot)
        await resume("p")
        await on_screen(app, ReasonScreen)
        await resume("enter")
        await wait_until_async(lambda: not paused(), timeout=20)
        assert resume.count <= MOST

    drive(make_app(dsn), scenario)


def test_watch_a_worker_drain(dsn: str, conn: psycopg.Connection[Any], seeded: Seeded) -> None:
    freeze_db_clock(conn)  # the seeded heartbeats are fresh at the console's instant

    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        keys = Keys(pilot)
        workers = await open_screen(app, pilot, "5", WorkersScreen)
        table = workers.query_one("#workers", LiveTable)
        while table.current_key != "web-2:5151:b2" and keys.count < MOST:
            await keys("down")
        assert table.current_key == "web-2:5151:b2"
        await wait_until_async(lambda: "DRAINING: cutoff in" in text_of(workers, "#inflight"),
                               timeout=10, message=lambda: text_of(workers, "#inflight"))
        # Its countdown, and what the cutoff will interrupt.
        assert "In flight (3)" in text_of(workers, "#inflight")
        assert keys.count <= MOST

    drive(make_app(dsn), scenario)


def test_cancel_a_batch(dsn: str, conn: psycopg.Connection[Any], seeded: Seeded) -> None:
    seed_long_runs(conn)
    freeze_db_clock(conn)

    def cancel_asked(batch: int) -> bool:
        row = conn.execute(f"SELECT cancel_requested_at FROM {SCHEMA}.batches WHERE id = %s",
                           (batch,)).fetchone()
        return row is not None and row[0] is not None

    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        keys = Keys(pilot)
        batches = await open_screen(app, pilot, "7", BatchesScreen)
        batch = batches.selected()
        assert batch is not None and not batch.is_terminal
        await keys("C")
        await on_screen(app, ConfirmScreen)  # enter confirms
        await keys("enter")
        await wait_until_async(lambda: cancel_asked(batch.id), timeout=20)
        assert keys.count <= MOST

    drive(make_app(dsn), scenario)


def test_change_a_backfills_rate(dsn: str, conn: psycopg.Connection[Any]) -> None:
    seed_running(conn, dsn)
    assert rate_of(conn) == ("running", 4.0)

    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        keys = Keys(pilot)
        await open_screen(app, pilot, "9", BackfillsScreen)
        await keys("greater_than_sign")  # no dialog: one press doubles it, audited
        await until_db(conn, ("running", 8.0))
        assert keys.count <= MOST

    drive(make_app(dsn), scenario)
