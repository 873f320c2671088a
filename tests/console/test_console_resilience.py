"""The console outlives its database: a banner while it is gone, recovery when it is back."""

from __future__ import annotations

import contextlib
import os
import signal
from typing import Any

import psycopg
from console_seed import FROZEN, drive, loaded, make_app, on_screen, seed
from helpers import wait_until_async
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict
from textual.pilot import Pilot

from forklift_console.app import ConsoleApp
from forklift_console.backend import Backend
from forklift_console.screens.base import ConsoleScreen
from forklift_console.screens.overview import OverviewScreen
from forklift_console.screens.queues import QueuesScreen


def _cut_off(admin_dsn: str, dbname: str, allow: bool) -> None:
    with psycopg.connect(admin_dsn, autocommit=True) as admin:
        admin.execute(
            sql.SQL("ALTER DATABASE {} ALLOW_CONNECTIONS {}").format(
                sql.Identifier(dbname), sql.SQL("true" if allow else "false")
            )
        )
        if not allow:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE datname = %s AND pid <> pg_backend_pid()",
                (dbname,),
            )


def test_the_database_going_away_shows_a_banner_and_the_console_recovers(
    dsn: str, admin_dsn: str, conn: psycopg.Connection[Any]
) -> None:
    seed(conn)
    dbname = str(conninfo_to_dict(dsn)["dbname"])

    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        screen = app.screen
        assert isinstance(screen, ConsoleScreen)
        await loaded(app)
        assert app.status.connection == "connected"
        banner = screen.query_one("#banner")
        assert not banner.display
        _cut_off(admin_dsn, dbname, allow=False)
        try:
            await wait_until_async(
                lambda: app.status.connection == "offline" and banner.display,
                timeout=30,
                message=lambda: f"no offline banner: {app.status}",
            )
            assert app.status.failing_since is not None
            assert "database" in str(app.status.error)
            assert "STALE" in str(banner.render())
            # Keys still work while the database is away.
            await pilot.press("3")
            await pilot.press("1")
            assert app.current_mode == "overview"
        finally:
            _cut_off(admin_dsn, dbname, allow=True)
        await wait_until_async(
            lambda: app.status.connection == "connected" and not banner.display,
            timeout=30,
            message=lambda: f"did not recover: {app.status}",
        )
        assert app.status.failing_since is None and app.status.error is None

    drive(make_app(dsn, interval=0.3), scenario)


def test_a_refresh_tick_that_lands_while_the_console_shuts_down_does_nothing(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    """Textual closes every mode's screens before it stops the app's timers. A refresh tick
    in between (late on a loaded machine) met an empty screen stack, and the exit of the test
    above raised ScreenStackError. Here a tick runs after each screen is closed."""
    seed(conn)
    ticked: list[str] = []

    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        await loaded(app)
        app.switch_mode("queues")  # a second mode: its screens close after the first's
        await loaded(app, await on_screen(app, QueuesScreen))
        app.switch_mode("overview")
        await on_screen(app, OverviewScreen)
        prune = app._prune

        def prune_then_tick(*nodes: Any, parent: Any = None) -> Any:
            removal = prune(*nodes, parent=parent)

            async def then() -> None:
                await removal
                app.refresher.tick()  # the timer firing between two closes
                ticked.append(app.current_mode)

            return then()

        app._prune = prune_then_tick  # type: ignore[method-assign]

    # No timer-driven refresh: one in flight at the exit would race the closing of its session.
    drive(make_app(dsn), scenario)  # the scenario's end closes the app
    assert "overview" in ticked, ticked


def test_a_database_that_hangs_is_cut_off_and_the_console_reconnects(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    """SIGSTOP the backend serving the console: its refresh never answers, the deadline shuts
    the session, a new one is opened, and data flows again while the old backend still hangs."""
    seed(conn)
    dbname = str(conninfo_to_dict(dsn)["dbname"])
    stopped: list[int] = []

    def console_backends() -> set[int]:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s AND application_name = %s"
            " AND pid <> pg_backend_pid()",
            (dbname, "forklift:ops"),
        ).fetchall()
        return {int(r[0]) for r in rows}

    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        screen = app.screen
        assert isinstance(screen, ConsoleScreen)
        await loaded(app)
        # The session that served that load (a refresh cut off just then is being replaced:
        # wait for the one session, not for whatever pg_stat_activity shows at this instant).
        def one_session() -> set[int]:
            got = console_backends()
            return got if len(got) == 1 else set()

        (pid,) = await wait_until_async(
            one_session, timeout=30,
            message=lambda: f"not one console session: {console_backends()}")
        os.kill(pid, signal.SIGSTOP)
        stopped.append(pid)
        try:
            await wait_until_async(
                lambda: app.status.failing_since is not None, timeout=30,
                message=lambda: f"the hung refresh was never cut off: {app.status}",
            )
            await wait_until_async(
                lambda: app.status.connection == "connected" and app.status.failing_since is None,
                timeout=30,
                message=lambda: f"no recovery past the hung session: {app.status}",
            )
            assert console_backends() - {pid}, "the console did not open a new session"
        finally:
            os.kill(pid, signal.SIGCONT)

    # The deadline cuts off the hung refresh; it must also let a healthy one finish on a loaded
    # machine (1.5 s cut off healthy refreshes with a CPU hog running), and stay well inside the
    # 30 s waits below.
    backend = Backend.open(dsn, schema="forklift", actor="tester", fetch_deadline=5.0)
    app = ConsoleApp(backend, clock=lambda: FROZEN, interval=0.3)
    try:
        drive(app, scenario)
    finally:
        for pid in stopped:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
