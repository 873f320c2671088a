"""The console's Backfills (key 9) and Schedules (key 8) screens, driven with Pilot against a
real PostgreSQL: progress, pace and ETA; rate +/-, pause/resume, cancel (confirmed), run-now;
every action audited; read-only offers none."""

from __future__ import annotations

import itertools
from typing import Any

import psycopg
from console_seed import drive, loaded, make_app, on_screen
from helpers import wait_until_async
from textual.pilot import Pilot
from textual.widgets import Button, Static

from forklift import Forklift, JobContext
from forklift._features.cron import sync_definitions_now
from forklift.ops import backfills as ops
from forklift.ops.context import OpsContext
from forklift_console.app import ConsoleApp
from forklift_console.screens.backfills import BackfillsScreen
from forklift_console.screens.modals import ConfirmScreen
from forklift_console.screens.schedules import SchedulesScreen
from forklift_console.widgets.table import LiveTable

OPS = OpsContext(schema="forklift", actor="seed")


def declare(dsn: str) -> Forklift:
    app = Forklift(dsn)

    def read(cursor: int | None, limit: int) -> tuple[list[int], int | None]:
        return [], None

    @app.backfill("reindex", page_size=50, rate=4.0, read=read, total=lambda: 1000)
    def reindex(items: list[int], conn: psycopg.Connection[Any]) -> None:
        return None

    @app.periodic("30 2 * * *", tz="Europe/Berlin", name="nightly")
    @app.job(name="report.nightly", queue="reports")
    def nightly(ctx: JobContext, args: dict[str, Any]) -> None:
        return None

    return app


def seed_running(conn: psycopg.Connection[Any], dsn: str) -> None:
    """A run 30% through, moving at about 100 items/s over the last few seconds."""
    app = declare(dsn)
    ops.start(conn, OPS, "reindex", definition=app.backfills["reindex"])
    conn.execute(
        "UPDATE forklift.backfill_runs SET items_done = 300, pages_done = 6, cursor = '300',"
        " total = 1000, created_at = now() - interval '1 minute',"
        " pace = (SELECT jsonb_agg(jsonb_build_array(floor(extract(epoch FROM now())) - s, 1, 100))"
        "         FROM generate_series(0, 9) s)")


def rate_of(conn: psycopg.Connection[Any]) -> tuple[str, float]:
    row = conn.execute("SELECT state, rate FROM forklift.backfill_runs ORDER BY id DESC LIMIT 1").fetchone()
    assert row is not None
    return str(row[0]), float(row[1])


def audit(conn: psycopg.Connection[Any]) -> list[tuple[Any, ...]]:
    return conn.execute("SELECT actor, action, target->>'rate', outcome FROM forklift.audit"
                        " WHERE actor = 'tester' ORDER BY id").fetchall()


async def until_db(conn: psycopg.Connection[Any], want: tuple[str, float]) -> None:
    await wait_until_async(lambda: rate_of(conn) == want, timeout=20,
                           message=lambda: f"run is {rate_of(conn)}, not {want}")


def test_backfills_screen_shows_pace_and_eta_and_acts(dsn: str, conn: psycopg.Connection[Any]) -> None:
    seed_running(conn, dsn)

    async def scenario(console: ConsoleApp, pilot: Pilot[None]) -> None:
        screen = await on_screen(console, BackfillsScreen)
        await loaded(console, screen)
        table = screen.query_one("#backfills", LiveTable)
        assert table.keys == ["reindex"]
        assert "300/1,000 30%" in table.cell_value("reindex", "progress").plain
        assert table.cell_value("reindex", "rate") == "4/s"
        assert table.cell_value("reindex", "eta") not in ("—", "")
        detail = str(screen.query_one("#detail", Static).render())
        assert "running" in detail and "items/s" in detail and "cursor 300" in detail

        await pilot.press("less_than_sign")  # slow it down, live
        await until_db(conn, ("running", 2.0))
        await pilot.press("greater_than_sign", "greater_than_sign")  # quick: both count
        await until_db(conn, ("running", 8.0))
        await loaded(console, screen)
        assert table.cell_value("reindex", "rate") == "8/s"
        await wait_until_async(lambda: console.last_command == "forklift backfills rate reindex 8",
                               timeout=20)

        await pilot.press("p")
        await until_db(conn, ("paused", 8.0))
        await loaded(console, screen)
        assert "paused" in table.cell_value("reindex", "state").plain
        assert table.cell_value("reindex", "eta") == "—"
        await pilot.press("p")
        await until_db(conn, ("running", 8.0))
        await loaded(console, screen)

        await pilot.press("C")
        dialog = await on_screen(console, ConfirmScreen)
        assert dialog.plan.cli == "forklift backfills cancel --yes reindex"
        assert console.focused is dialog.query_one("#confirm", Button)
        dialog.query_one("#confirm", Button).press()
        await on_screen(console, BackfillsScreen)
        await until_db(conn, ("cancelled", 8.0))

    drive(make_app(dsn, start="backfills"), scenario)
    assert audit(conn) == [
        ("tester", "backfill.rate", None, "done: rate 4/s -> 2/s"),
        ("tester", "backfill.rate", None, "done: rate 2/s -> 4/s"),
        ("tester", "backfill.rate", None, "done: rate 4/s -> 8/s"),
        ("tester", "backfill.pause", None, "done"),
        ("tester", "backfill.resume", None, "done"), ("tester", "backfill.cancel", None, "done"),
    ]


def test_eight_quick_presses_halve_eight_times_and_plus_is_the_refresh_rate(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    """17.4: each press acts on the rate as it is then (8 presses, 8 halvings, 8 audit rows
    saying from what to what); + and - mean one thing on every screen: the refresh rate."""
    seed_running(conn, dsn)

    async def scenario(console: ConsoleApp, pilot: Pilot[None]) -> None:
        screen = await on_screen(console, BackfillsScreen)
        await loaded(console, screen)
        await pilot.press(*["less_than_sign"] * 8)
        await wait_until_async(lambda: len(audit(conn)) == 8, timeout=30)
        before = console.status.interval
        await pilot.press("plus")
        assert console.status.interval < before
        faster = console.status.interval
        await pilot.press("minus")
        assert console.status.interval > faster

    drive(make_app(dsn, start="backfills"), scenario)
    assert rate_of(conn) == ("running", 0.0156)
    rows = audit(conn)
    assert len(rows) == 8
    rates = [4.0 / 2**i for i in range(9)]
    assert [o for *_, o in rows] == [
        f"done: rate {round(a, 4):g}/s -> {round(b, 4):g}/s"
        for a, b in itertools.pairwise(rates)
    ]


def test_backfills_screen_in_read_only_mode_offers_no_actions(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    seed_running(conn, dsn)

    async def scenario(console: ConsoleApp, pilot: Pilot[None]) -> None:
        screen = await on_screen(console, BackfillsScreen)
        await loaded(console, screen)
        for action in ("rate_up", "rate_down", "toggle_pause", "cancel"):
            assert screen.check_action(action, ()) is None
        await pilot.press("less_than_sign")
        await pilot.press("p")
        await pilot.pause()
        assert isinstance(console.screen, BackfillsScreen)

    drive(make_app(dsn, start="backfills", read_only=True), scenario)
    assert rate_of(conn) == ("running", 4.0)
    assert audit(conn) == []


def test_schedules_screen_pauses_and_runs_now(dsn: str, conn: psycopg.Connection[Any]) -> None:
    sync_definitions_now(conn, declare(dsn), "forklift")

    async def scenario(console: ConsoleApp, pilot: Pilot[None]) -> None:
        screen = await on_screen(console, SchedulesScreen)
        await loaded(console, screen)
        table = screen.query_one("#schedules", LiveTable)
        assert table.keys == ["nightly"]
        assert table.cell_value("nightly", "cron").plain == "30 2 * * *"
        assert "active" in table.cell_value("nightly", "state").plain
        detail = str(screen.query_one("#detail", Static).render())
        assert "report.nightly" in detail and "Europe/Berlin" in detail

        await pilot.press("p")
        await wait_until_async(lambda: conn.execute(
            "SELECT paused FROM forklift.schedules").fetchone() == (True,), timeout=20)
        await loaded(console, screen)
        assert "paused" in table.cell_value("nightly", "state").plain

        await pilot.press("n")
        dialog = await on_screen(console, ConfirmScreen)
        assert dialog.plan.cli == "forklift schedules run-now nightly"
        dialog.query_one("#confirm", Button).press()
        await on_screen(console, SchedulesScreen)
        await wait_until_async(lambda: conn.execute(
            "SELECT count(*) FROM forklift.jobs WHERE kind = 'report.nightly'").fetchone() == (1,),
            timeout=20)
        await loaded(console, screen)
        assert "available" in table.cell_value("nightly", "outcome").plain

    drive(make_app(dsn, start="schedules"), scenario)
    assert [(a, o) for _, a, _, o in audit(conn)] == [
        ("schedule.pause", "done"), ("schedule.run_now", "done")]


def test_a_key_asked_about_before_the_screen_is_mounted_is_disabled_not_an_error(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    seed_running(conn, dsn)

    async def scenario(console: ConsoleApp, pilot: Pilot[None]) -> None:
        await on_screen(console, BackfillsScreen)
        # the footer may ask a screen about its keys before its table exists (or after)
        unmounted = BackfillsScreen()
        for action in ("rate_up", "rate_down", "toggle_pause", "cancel"):
            assert unmounted.check_action(action, ()) is None

    drive(make_app(dsn, start="backfills"), scenario)
