"""The console on a streaming replica: the header shows the replica's lag while the screens read
there, and says so when they read the primary instead (a lagging replica, a stopped one); the
console keeps working throughout and takes the replica back when it is fit again.

Against a real standby of the test server (tests/replica.py); the replica is stopped and
started again last."""

from __future__ import annotations

from typing import Any

import psycopg
from console_seed import FROZEN, SCHEMA, drive, loaded, seed
from helpers import wait_until, wait_until_async
from psycopg.conninfo import conninfo_to_dict
from replica import Replica, replica  # noqa: F401 (the fixture)
from textual.pilot import Pilot

from forklift._db.embedded import server
from forklift_console.app import ConsoleApp
from forklift_console.backend import Backend
from forklift_console.widgets.header import StatusBar


def header(app: ConsoleApp) -> str:
    app.refresher.repaint()
    return str(app.screen.query_one(StatusBar).render())


def test_the_header_shows_the_replica_lag_and_the_fallback_to_the_primary(
    dsn: str, conn: psycopg.Connection[Any], replica: Replica  # noqa: F811
) -> None:
    seed(conn)
    dbname = str(conninfo_to_dict(dsn)["dbname"])
    row = conn.execute("SELECT count(*) FROM forklift.jobs").fetchone()
    jobs = row[0] if row else 0

    def replayed() -> bool:
        try:
            with replica.connect(dbname) as r:
                return r.execute("SELECT count(*) FROM forklift.jobs").fetchone() == (jobs,)
        except psycopg.Error:
            return False

    wait_until(replayed, timeout=60, message="the replica never caught up with the seed")
    backend = Backend.open(dsn, schema=SCHEMA, actor="tester", label="db.example:5432/app",
                           replica_dsn=replica.dsn(dbname), replica_max_lag=0.5,
                           replica_retry=0.2)

    async def fresh_header(app: ConsoleApp, text: str) -> bool:
        await loaded(app)
        return text in header(app)

    async def reads_replica(app: ConsoleApp) -> bool:
        await loaded(app)
        line = header(app)
        return "replica lag " in line and "reading the primary" not in line

    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        await wait_until_async(lambda: reads_replica(app), timeout=30,
                               message=lambda: f"no replica lag in the header: {header(app)}")
        assert app.backend.replica is not None and app.backend.replica.used

        replica.pause()
        try:
            conn.execute("UPDATE forklift.queues SET updated_at = now()")  # WAL to fall behind on
            await wait_until_async(
                lambda: fresh_header(app, "> 0.5s: reading the primary"), timeout=30,
                message=lambda: f"no lag fallback in the header: {header(app)}")
            assert header(app).count("replica lag") == 1
            assert app.status.connection == "connected" and app.status.error is None
        finally:
            replica.resume()
        await wait_until_async(lambda: reads_replica(app), timeout=60,
                               message=lambda: f"the replica was not taken back: {header(app)}")

        # A narrow terminal gets the short form, and the refresh's age still shows.
        await pilot.resize_terminal(80, 24)
        await pilot.pause()
        line = header(app)
        assert "replica " in line and "replica lag" not in line and "every 3600s" in line, line
        await pilot.resize_terminal(120, 36)
        await pilot.pause()

        replica.stop()
        try:
            await wait_until_async(
                lambda: fresh_header(app, "replica unreachable: reading the primary"),
                timeout=30, message=lambda: f"no unreachable replica: {header(app)}")
            # The console works on: data arrives from the primary, no banner, keys answer.
            assert app.status.connection == "connected" and app.status.failing_since is None
            await pilot.press("2")
            await loaded(app)
            assert app.current_mode == "queues" and app.status.error is None
            await pilot.press("1")
        finally:
            replica.info = server.start(replica.data, replica.bin_dir, replica.user)
        await wait_until_async(lambda: reads_replica(app), timeout=60,
                               message=lambda: f"the replica was not taken back: {header(app)}")

    drive(ConsoleApp(backend, clock=lambda: FROZEN, interval=3600.0), scenario)
