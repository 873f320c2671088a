"""The console's Consumers screen (``:consumers``), driven with Pilot against a real PostgreSQL:
each consumer's state, cursor and its age, failure streak and next try; ``p`` pauses and
resumes (audited); read-only offers neither."""

from __future__ import annotations

from typing import Any

import psycopg
from apps import consumers
from console_seed import drive, loaded, make_app, on_screen
from helpers import wait_until_async
from textual.pilot import Pilot
from textual.widgets import Static

from forklift_console.app import ConsoleApp
from forklift_console.screens.consumers import ConsumersScreen
from forklift_console.widgets.table import LiveTable


def seed(dsn: str, conn: psycopg.Connection[Any]) -> None:
    """``feed`` recorded with a run waiting; ``orders`` 40 items in, failing and backing off."""
    consumers.setup(conn, rows=0)
    consumers.app.use(dsn)
    try:
        consumers.apply_feed.start()
    finally:
        consumers.app.close()
    conn.execute(
        "INSERT INTO forklift.consumers (name, kind, queue, batch_size, cursor, cursor_at,"
        " items_done, batches_done, failures, last_error, failed_at, retry_at)"
        " VALUES ('orders', 'orders', 'consumers', 20, '40', now() - interval '5 minutes', 40, 2,"
        " 3, '{\"code\": \"error\", \"type\": \"ConnectionError\", \"message\": \"vendor down\"}',"
        " now() - interval '1 second', now() + interval '1 hour')")


def test_consumers_screen_shows_lag_and_streak_and_pauses(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    seed(dsn, conn)

    async def scenario(console: ConsoleApp, pilot: Pilot[None]) -> None:
        screen = await on_screen(console, ConsumersScreen)
        await loaded(console, screen)
        table = screen.query_one("#consumers", LiveTable)
        assert table.keys == ["feed", "orders"]
        assert "waiting" in table.cell_value("feed", "state").plain
        assert table.cell_value("feed", "cursor").plain == "start"
        assert "backing off" in table.cell_value("orders", "state").plain
        assert table.cell_value("orders", "cursor").plain == "40"
        assert table.cell_value("orders", "failures").plain == "3 in a row"
        assert str(table.cell_value("orders", "next")).startswith("in ")

        await pilot.press("down")
        detail = str(screen.query_one("#detail", Static).render())
        assert "3 failures in a row" in detail and "ConnectionError: vendor down" in detail
        await pilot.press("p")
        await wait_until_async(lambda: conn.execute(
            "SELECT paused FROM forklift.consumers WHERE name = 'orders'").fetchone() == (True,),
            timeout=20)
        await loaded(console, screen)
        assert "paused" in table.cell_value("orders", "state").plain
        await pilot.press("p")
        await wait_until_async(lambda: conn.execute(
            "SELECT paused FROM forklift.consumers WHERE name = 'orders'").fetchone() == (False,),
            timeout=20)

    drive(make_app(dsn, start="consumers"), scenario)
    audit = conn.execute("SELECT action, target->>'consumer', outcome FROM forklift.audit"
                         " ORDER BY id").fetchall()
    assert audit == [("consumer.pause", "orders", "done"), ("consumer.resume", "orders", "done")]


def test_read_only_console_offers_no_pause(dsn: str, conn: psycopg.Connection[Any]) -> None:
    seed(dsn, conn)

    async def scenario(console: ConsoleApp, pilot: Pilot[None]) -> None:
        screen = await on_screen(console, ConsumersScreen)
        await loaded(console, screen)
        await pilot.press("p")
        await loaded(console, screen)

    drive(make_app(dsn, start="consumers", read_only=True), scenario)
    assert conn.execute("SELECT count(*) FROM forklift.audit").fetchone() == (0,)
    assert conn.execute("SELECT bool_or(paused) FROM forklift.consumers").fetchone() == (False,)
