"""Words that agree: a parked job reads the same in the list and its detail, and its "Why" does
not call a wait's deadline the time it becomes available; the no-worker alert names the
worker's real option; ``forklift console --help`` names the extra whole."""

from __future__ import annotations

from typing import Any

import psycopg
from console_seed import drive, loaded, make_app, on_screen
from test_console_workflows import parked_scene
from textual.pilot import Pilot
from textual.widgets import Static
from typer.testing import CliRunner

from forklift.cli.main import app as cli
from forklift_console.app import ConsoleApp
from forklift_console.screens.job import JobScreen
from forklift_console.screens.jobs import JobsScreen
from forklift_console.widgets.table import LiveTable


def test_a_parked_job_reads_the_same_in_the_list_and_its_detail(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    ids = parked_scene(dsn, conn)

    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        jobs = await on_screen(app, JobsScreen)
        await loaded(app, jobs)
        table = jobs.query_one("#jobs", LiveTable)
        for why, word in (("event", "waiting"), ("sleeping", "sleeping"), ("held", "held")):
            listed = table.cell_value(str(ids[why]), "state").plain
            assert word in listed, listed
            app.push_screen(JobScreen(ids[why]))
            detail = await on_screen(app, JobScreen)
            await loaded(app, detail)
            head = str(detail.query_one("#head", Static).render())
            assert word in head and "scheduled" not in head, head
            text = str(detail.query_one("#why", Static).render())
            assert "becomes available at" not in text, text
            if why == "event":
                assert "parked, waiting for event" in text, text
            app.pop_screen()
            await on_screen(app, JobsScreen)

    drive(make_app(dsn, start="jobs"), scenario)


def test_console_help_names_the_extra_whole() -> None:
    done = CliRunner().invoke(cli, ["console", "--help"], env={"COLUMNS": "200"})
    assert "pip install 'forklift[console]'" in done.output, done.output


def test_the_no_worker_alert_names_the_option_the_worker_takes() -> None:
    import inspect

    from forklift_console.screens import insight

    source = inspect.getsource(insight)
    assert "forklift worker --queues" in source and "--queue …" not in source
