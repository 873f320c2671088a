"""The console's job detail shows each attempt's log (a job that logged nothing shows no such
section), with Pilot against a real PostgreSQL and jobs run by a real worker."""

from __future__ import annotations

from typing import Any

import psycopg
from apps import joblogs
from apps.basic import running_worker
from console_seed import drive, loaded, make_app, on_screen
from helpers import wait_until
from textual.pilot import Pilot
from textual.widgets import Static

from forklift_console.app import ConsoleApp
from forklift_console.screens.job import JobScreen


def test_the_job_detail_shows_each_attempts_log(dsn: str,
                                                conn: psycopg.Connection[Any]) -> None:
    joblogs.app.use(dsn)
    try:
        flaky = joblogs.flaky.enqueue({}).id
        chatty = joblogs.chatty.enqueue({"n": 8}).id
        silent = joblogs.silent.enqueue({"i": 1}).id
        with running_worker(joblogs.app, queues=["logs"]):
            wait_until(lambda: conn.execute(
                "SELECT count(*) FROM forklift.jobs WHERE id = ANY(%s) AND state = 'completed'",
                ([flaky, chatty, silent],)).fetchone() == (3,), timeout=30)
    finally:
        joblogs.app.close()

    async def scenario(console: ConsoleApp, pilot: Pilot[None]) -> None:
        console.push_screen(JobScreen(flaky))
        detail = await on_screen(console, JobScreen)
        await loaded(console, detail)
        logs = detail.query_one("#logs", Static)
        assert logs.display
        text = str(logs.render())
        assert "Logs (2 lines)" in text
        assert text.index("attempt 1") < text.index("try 1") < text.index("attempt 2") \
            < text.index("try 2")
        console.pop_screen()
        console.push_screen(JobScreen(chatty))
        capped = await on_screen(console, JobScreen)
        await loaded(console, capped)
        text = str(capped.query_one("#logs", Static).render())
        assert "log capped at 5 lines for this attempt: 3 later lines dropped" in text
        console.pop_screen()
        console.push_screen(JobScreen(silent))
        quiet = await on_screen(console, JobScreen)
        await loaded(console, quiet)
        assert not quiet.query_one("#logs", Static).display

    drive(make_app(dsn, start="overview"), scenario)
