"""The console's Health screen (key h): every check of forklift.ops.health with its level in a
word and a symbol and the operator API's advice; the Overview's alert leads there."""

from __future__ import annotations

import threading
from typing import Any

import psycopg
from console_seed import drive, loaded, make_app, on_screen, seed
from helpers import wait_until, wait_until_async
from textual.widgets import OptionList

from forklift.ops import Operator
from forklift.ops.health import CHECK_TITLES
from forklift.ops.horizon import advice
from forklift_console.screens.health import HealthScreen


def _text(screen: HealthScreen) -> str:
    return "\n".join(str(screen.query_one(f"#{part}").render()) for part in ("checks", "holders"))


def test_the_health_screen_names_the_horizon_holder_and_what_to_do(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    seed(conn)
    with Operator(dsn) as op:
        op.set_health_threshold("horizon_seconds", 0.0)  # any open snapshot is an alert
    side = psycopg.connect(dsn, application_name="stuck-report")
    side.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
    side.execute("SELECT 1").fetchone()
    pid = side.info.backend_pid
    try:
        async def scenario(app: Any, pilot: Any) -> None:
            # The Overview raises the alert, and enter on it opens Health.
            overview = app.screen

            async def alerted() -> int | None:
                await loaded(app, overview)
                box = overview.query_one("#alerts", OptionList)
                lines = [str(o.prompt) for o in box.options]
                return next((i for i, line in enumerate(lines)
                             if "database: horizon held:" in line), None)

            index = await wait_until_async(alerted, timeout=30,
                                           message="the overview never raised the horizon alert")
            box = overview.query_one("#alerts", OptionList)
            line = str(box.options[index].prompt)
            assert line.startswith(("▲ ", "✖ ")) and ("warning" in line or "critical" in line)
            box.focus()
            box.highlighted = index
            await pilot.press("enter")
            screen = await on_screen(app, HealthScreen)
            await loaded(app, screen)
            text = _text(screen)
            # Who, since when, what to do: the advice is the operator API's, word for word.
            assert f"pid {pid}" in text and "stuck-report" in text and "since" in text
            assert advice("transaction", pid, None, "idle in transaction") in text
            assert "▲ WARNING  xmin horizon" in text or "✖ CRITICAL xmin horizon" in text
            # Every area is judged, each with a word (never colour alone).
            for title in ("xmin horizon", "blocking locks", "connections", "NOTIFY queue",
                          "table bloat", "retention backlog"):
                assert f"{title}:" in text, title
            assert "✔ ok       NOTIFY queue" in text
            assert "retention windows: completed 1d0h" in text
            table = screen.query_one("#tables")
            assert "jobs" in table.rows and "retention" in table.rows

        drive(make_app(dsn, start="overview"), scenario)
    finally:
        side.rollback()
        side.close()
    assert set(CHECK_TITLES) >= {"horizon", "locks", "connections", "notify_queue", "bloat",
                                 "retention", "replica"}


def test_the_health_screen_shows_who_blocks_a_session_and_how_to_end_it(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    conn.execute("INSERT INTO forklift.queues (name) VALUES ('blocked') ON CONFLICT DO NOTHING")
    with Operator(dsn) as op:
        op.set_health_threshold("lock_wait_seconds", 0.0)
    holder = psycopg.connect(dsn, application_name="migration-script")
    waiter = psycopg.connect(dsn, application_name="pause-button", autocommit=True)
    holder.execute("SELECT 1 FROM forklift.queues WHERE name = 'blocked' FOR UPDATE")
    blocked = threading.Thread(target=lambda: waiter.execute(
        "UPDATE forklift.queues SET paused = true WHERE name = 'blocked'"))
    blocked.start()
    try:
        wait_until(lambda: conn.execute(
            "SELECT 1 FROM pg_stat_activity WHERE pid = %s AND wait_event_type = 'Lock'",
            (waiter.info.backend_pid,)).fetchone(), timeout=10, message="the update never waited")

        async def scenario(app: Any, pilot: Any) -> None:
            await pilot.press("h")
            screen = await on_screen(app, HealthScreen)
            await loaded(app, screen)
            text = _text(screen)
            mine, theirs = holder.info.backend_pid, waiter.info.backend_pid
            assert f"pid {theirs} (pause-button) has waited" in text
            assert f"blocked by pid {mine}" in text and "migration-script" in text
            assert f"SELECT pg_terminate_backend({mine});" in text
            assert ("▲ WARNING  blocking locks" in text) or ("✖ CRITICAL blocking locks" in text)

        drive(make_app(dsn, start="overview"), scenario)
    finally:
        holder.rollback()
        blocked.join(10)
        holder.close()
        waiter.close()


def test_without_trouble_every_check_reads_ok(dsn: str, conn: psycopg.Connection[Any]) -> None:
    async def scenario(app: Any, pilot: Any) -> None:
        await pilot.press("h")
        screen = await on_screen(app, HealthScreen)
        await loaded(app, screen)
        text = _text(screen)
        assert "✔ all checks ok" in text
        assert "✔ ok       xmin horizon: nothing holds it back" in text
        assert screen.check_action("pin", ()) is False  # a demo-only key, hidden here

    drive(make_app(dsn, start="overview"), scenario)


def test_a_replica_that_cannot_serve_reads_is_a_warning_with_what_to_check(dsn: str) -> None:
    from forklift.ops.health import REPLICA_ADVICE
    from forklift_console.app import ConsoleApp
    from forklift_console.backend import Backend

    backend = Backend.open(dsn, schema="forklift", actor="tester",
                           replica_dsn="postgresql://tester@127.0.0.1:1/gone", replica_retry=0.2)

    async def scenario(app: Any, pilot: Any) -> None:
        await pilot.press("h")
        screen = await on_screen(app, HealthScreen)

        async def judged() -> str | None:
            await loaded(app, screen)
            text = _text(screen)
            return text if "replica:" in text else None

        text = await wait_until_async(judged, timeout=30, message="the replica was never judged")
        assert "▲ WARNING  replica: 127.0.0.1:1/gone: unreachable" in text
        assert REPLICA_ADVICE["unreachable"] in text

    drive(ConsoleApp(backend, interval=3600), scenario)
