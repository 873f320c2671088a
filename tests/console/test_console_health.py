"""The console's Health screen (key h): a thin view of forklift.ops.health."""

from __future__ import annotations

from typing import Any

import psycopg
from console_seed import drive, loaded, make_app, on_screen, seed

from forklift_console.screens.health import HealthScreen


def test_the_health_screen_names_the_horizon_holder(dsn: str, conn: psycopg.Connection[Any]) -> None:
    seed(conn)
    side = psycopg.connect(dsn, application_name="stuck-report")
    side.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
    side.execute("SELECT 1").fetchone()
    try:
        async def scenario(app: Any, pilot: Any) -> None:
            await pilot.press("h")
            screen = await on_screen(app, HealthScreen)
            await loaded(app, screen)
            info = str(screen.query_one("#info").render())
            assert f"pid {side.info.backend_pid}" in info and "stuck-report" in info
            assert "retention: completed 1d0h" in info
            table = screen.query_one("#tables")
            assert "jobs" in table.rows and "retention" in table.rows

        drive(make_app(dsn, start="overview"), scenario)
    finally:
        side.rollback()
        side.close()
