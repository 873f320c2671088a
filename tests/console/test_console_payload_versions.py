"""The console shows payload versions in words: the Kinds screen lists the live jobs of each
version of a kind whose live jobs carry a version other than 1 (no line while none does), and the job
detail names a job's version. Pilot against a real PostgreSQL."""

from __future__ import annotations

from typing import Any

import psycopg
from console_seed import drive, loaded, make_app, on_screen
from textual.pilot import Pilot
from textual.widgets import Static

from forklift import Forklift, JobContext
from forklift_console.app import ConsoleApp
from forklift_console.screens.job import JobScreen
from forklift_console.screens.kinds import KindsScreen

old = Forklift()
new = Forklift()


@old.job(name="pvcon.mail", queue="pvcon")
def mail_v1(ctx: JobContext, payload: dict[str, Any]) -> None:
    return None


@new.job(name="pvcon.mail", queue="pvcon", version=2, upcasters={1: lambda p: p})
def mail_v2(ctx: JobContext, payload: dict[str, Any]) -> None:
    return None


def test_kinds_screen_and_job_detail_name_payload_versions(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    old.use(dsn)
    new.use(dsn)
    try:
        plain = mail_v1.enqueue({"n": 0})
        v1 = [mail_v1.enqueue({"n": i}).id for i in range(1, 3)]
        v2 = mail_v2.enqueue({"n": 9})
    finally:
        old.close()
        new.close()

    async def scenario(console: ConsoleApp, pilot: Pilot[Any]) -> None:
        screen = await on_screen(console, KindsScreen)
        await loaded(console, screen)
        line = screen.query_one("#versions", Static)
        assert line.display
        text = str(line.render())
        assert text == "payload versions: pvcon.mail v1 3 · v2 1"
        assert "payload version" in screen.HELP
        # Version 1 drains: it is no longer listed.
        conn.execute("UPDATE forklift.jobs SET state = 'completed', finished_at = now()"
                     " WHERE id = ANY(%s)", ([plain.id, *v1],))
        await loaded(console, screen)
        assert str(line.render()) == "payload versions: pvcon.mail v2 1"
        # No live job of a version other than 1: no line at all.
        conn.execute("UPDATE forklift.jobs SET state = 'completed', finished_at = now()"
                     " WHERE id = %s", (v2.id,))
        await loaded(console, screen)
        assert not screen.query_one("#versions", Static).display
        console.push_screen(JobScreen(v2.id))
        detail = await on_screen(console, JobScreen)
        await loaded(console, detail)
        assert "payload version 2" in str(detail.query_one("#head", Static).render())
        console.pop_screen()
        console.push_screen(JobScreen(plain.id))
        unversioned = await on_screen(console, JobScreen)
        await loaded(console, unversioned)
        assert "payload version" not in str(unversioned.query_one("#head", Static).render())

    drive(make_app(dsn, start="kinds"), scenario)
