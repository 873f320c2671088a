"""Rough edges an on-call person meets first, each driven through the real console against a
real PostgreSQL: the header keeps the database's name at 80 columns, an alert is a sentence
(not a chart's caption), the Overview's state column holds "∅ no worker", Run/lim bounds a
queue without a limit by its workers' slots, a job waiting for an event names the command that
wakes it (and that command wakes it), and without colour the focused pane is the reversed one.
"""

from __future__ import annotations

import io
import shlex
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from apps import workflows as wf
from apps.basic import running_worker
from apps.ops import error, insert_job, register_worker
from console_seed import SCHEMA, drive, loaded, make_app, on_screen
from helpers import wait_until, wait_until_async
from rich.console import Console
from textual.pilot import Pilot
from textual.widgets import OptionList, Static
from typer.testing import CliRunner

from forklift.cli.main import app as cli
from forklift_console.app import ConsoleApp
from forklift_console.screens.help import HelpScreen
from forklift_console.screens.job import JobScreen
from forklift_console.screens.overview import OverviewScreen
from forklift_console.screens.queues import QueuesScreen
from forklift_console.widgets.header import fit_location
from forklift_console.widgets.table import LiveTable


def screen_lines(app: ConsoleApp) -> list[str]:
    """The screen as the terminal shows it, line by line."""
    return ["".join(seg.text for seg in strip)
            for strip in app.screen._compositor.render_strips()]


def plain_text(widget: Static) -> str:
    """What a Static holds, as plain text (a Rich group or grid included)."""
    out = Console(width=200, record=True, file=io.StringIO())
    out.print(widget.content)
    return out.export_text()


# -- the header -------------------------------------------------------------------------------
@pytest.mark.parametrize(("target", "limit", "shown"), [
    ("db.example:5432/app", 60, "db.example:5432/app"),
    ("db.example:5432/app", 16, "db.exa…:5432/app"),  # the host gives way first
    ("db.example:5432/app", 10, "db.ex…/app"),  # then the port
    ("/var/run/postgresql:5432/orders", 20, "/var/ru…:5432/orders"),  # a socket's path
    ("localhost/app", 9, "loca…/app"),
])
def test_the_location_gives_way_host_first_and_keeps_the_database_name(
    target: str, limit: int, shown: str
) -> None:
    assert fit_location(target, limit).plain == shown
    assert len(shown) <= limit


def test_a_database_name_longer_than_the_room_is_cut_in_the_middle_not_at_its_end() -> None:
    shown = fit_location("db:5432/forklift_production_primary", 16).plain
    assert shown == "db:5432/fo…imary"


def test_the_header_keeps_the_database_name_and_schema_whole_at_80_columns(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        await loaded(app, await on_screen(app, QueuesScreen))
        header = screen_lines(app)[0]
        assert "db.exa…:5432/app · forklift" in header, header
        assert header.rstrip().endswith("every 3600s"), header
        await pilot.press("question_mark")  # the tail reads longer while a dialog is open
        await on_screen(app, HelpScreen)
        await wait_until_async(lambda: "held: dialog open" in screen_lines(app)[0], timeout=10)
        header = screen_lines(app)[0]
        assert "…/app · forklift" in header, header

    drive(make_app(dsn, start="queues"), scenario, size=(80, 24))


# -- the Overview -----------------------------------------------------------------------------
def failing_queue(conn: psycopg.Connection[Any]) -> None:
    """Queue billing: four jobs died in the last minutes, none completed; a worker listens."""
    register_worker(conn, "billing-1", ["billing"])
    now = datetime.now(UTC)
    for i in range(4):
        at = now - timedelta(minutes=2 + i)
        insert_job(conn, state="dead", queue="billing", kind="billing.charge", attempt=1,
                   max_attempts=1, attempted_at=at, finished_at=at,
                   errors=[error(code="declined", message="card declined", at=at)])


def test_a_failing_queue_alert_ends_in_words_not_a_charts_caption(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    failing_queue(conn)

    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        overview = await on_screen(app, OverviewScreen)
        await loaded(app, overview)
        box = overview.query_one("#alerts", OptionList)
        lines = [str(box.get_option_at_index(i).prompt) for i in range(box.option_count)]
        line = next((x for x in lines if "billing failing" in x), None)
        assert line is not None, lines
        assert line.endswith("4 failed attempts and 0 completed in the last 30 min"), line
        assert "point per" not in line, line

    drive(make_app(dsn), scenario, size=(160, 36))


def test_the_overview_state_column_holds_no_worker_whole_at_80_columns(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    insert_job(conn, state="available", queue="orphaned")

    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        overview = await on_screen(app, OverviewScreen)
        await loaded(app, overview)
        table = overview.query_one("#queues", LiveTable)
        assert table.keys == ["orphaned"]
        row = next((x for x in screen_lines(app)
                    if "orphaned" in x and "queue orphaned" not in x), None)  # not the alert
        assert row is not None, screen_lines(app)
        assert "∅ no worker " in row, row
        assert len(row.rstrip()) <= 80

    drive(make_app(dsn), scenario, size=(80, 24))


# -- Queues: Run/lim --------------------------------------------------------------------------
def test_run_without_a_queue_limit_is_bounded_by_the_live_workers_slots(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    register_worker(conn, "pay-1", ["payments", "default"], slots=4)
    register_worker(conn, "pay-2", ["payments"], slots=6, state="draining")
    register_worker(conn, "pay-gone", ["payments"], slots=50, heartbeat_age=3600)  # stale
    for _ in range(3):
        insert_job(conn, state="running", queue="payments", worker_id="pay-1",
                   attempt=1, attempted_at=datetime.now(UTC))
    insert_job(conn, state="available", queue="reports")
    insert_job(conn, state="available", queue="capped")
    conn.execute(f"UPDATE {SCHEMA}.queues SET concurrency = 2 WHERE name = 'capped'")

    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        queues = await on_screen(app, QueuesScreen)
        await loaded(app, queues)
        table = queues.query_one("#queues", LiveTable)
        run = {k: str(table.cell_value(k, "running")) for k in table.keys}
        # 4 + 6 slots of the live workers (a draining one still finishes its jobs; a stale
        # one is gone), marked w; a queue limit stays a bare number; no worker: 0 slots.
        assert run == {"payments": "3/10w", "capped": "0/2", "reports": "0/0w"}, run
        await pilot.press("question_mark")
        help_screen = await on_screen(app, HelpScreen)
        words = " ".join(plain_text(s) for s in help_screen.query(Static))
        assert "the slots of the live workers listening on it, marked w: 37/30w" in " ".join(
            words.split()), words

    drive(make_app(dsn, start="queues"), scenario, size=(120, 36))


# -- a job waiting for an event ---------------------------------------------------------------
def test_a_job_waiting_for_an_event_names_the_command_that_wakes_it(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    with wf.bound(dsn, conn) as app:
        job_id = app.kind("wf.waiter").enqueue(
            {"event": "order.paid", "match": {"order": 17}, "timeout": 3600}).id
        with running_worker(app, lease=2.0, poll_interval=0.1, concurrency=1, lead=False):
            wait_until(lambda: conn.execute(
                "SELECT count(*) FROM forklift.job_steps WHERE job_id = %s"
                " AND state = 'waiting'", (job_id,)).fetchone() == (1,), timeout=30)
    shown: list[str] = []

    async def scenario(console: ConsoleApp, pilot: Pilot[None]) -> None:
        console.push_screen(JobScreen(job_id))
        detail = await on_screen(console, JobScreen)
        await loaded(console, detail)
        why = " ".join(plain_text(detail.query_one("#why", Static)).split())
        assert "is parked, waiting for event" in why, why
        shown.append(why.split("wake it now: ", 1)[1])

    drive(make_app(dsn), scenario)
    line = shown[0]
    assert line == "forklift events publish --data '{\"order\": 17}' order.paid", line
    # The command works as shown: run it, and the job leaves its wait.
    words = shlex.split(line)
    result = CliRunner().invoke(cli, [*words[1:], "--dsn", dsn, "--reason", "test"])
    assert result.exit_code == 0, result.output
    wait_until(lambda: conn.execute(f"SELECT state FROM {SCHEMA}.jobs WHERE id = %s",
                                    (job_id,)).fetchone() != ("scheduled",), timeout=10,
               message="publishing the event did not wake the job")


# -- without colour ---------------------------------------------------------------------------
def test_without_colour_only_the_focused_pane_shows_its_row_reversed(
    dsn: str, conn: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    insert_job(conn, state="available", queue="orphaned")  # an alert and a queue row

    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        overview = await on_screen(app, OverviewScreen)
        await loaded(app, overview)
        alerts = overview.query_one("#alerts", OptionList)
        table = overview.query_one("#queues", LiveTable)
        await wait_until_async(lambda: alerts.option_count > 0 and table.row_count > 0,
                               timeout=10)

        def looks() -> tuple[bool, bool, bool, bool]:
            alert = alerts.get_component_rich_style("option-list--option-highlighted")
            row = table.get_component_rich_style("datatable--cursor")
            return (bool(alert.reverse), bool(alert.underline), bool(row.reverse),
                    bool(row.underline))

        alerts.focus()
        await wait_until_async(lambda: looks() == (True, False, False, True), timeout=5,
                               message=lambda: f"alerts focused: {looks()}")
        table.focus()
        await wait_until_async(lambda: looks() == (False, True, True, False), timeout=5,
                               message=lambda: f"queues focused: {looks()}")

    drive(make_app(dsn), scenario)


# -- a row gone by the time an action reaches it -----------------------------------------------
def test_a_palette_action_on_a_row_gone_in_a_refresh_says_so(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    job_id = insert_job(conn, state="available", queue="brief")

    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        queues = await on_screen(app, QueuesScreen)
        await loaded(app, queues)
        assert [key for key, _ in queues.palette_targets("toggle_pause")] == ["brief"]
        # The queue's only job is deleted and the queue row with it: the pick arrives late.
        conn.execute(f"DELETE FROM {SCHEMA}.jobs WHERE id = %s", (job_id,))
        conn.execute(f"DELETE FROM {SCHEMA}.queues WHERE name = 'brief'")
        await loaded(app, queues)
        assert queues.query_one("#queues", LiveTable).row_count == 0
        queues.act_on("toggle_pause", "brief")
        await wait_until_async(
            lambda: any("'brief' is no longer on this screen" in n.message
                        for n in app._notifications), timeout=10,
            message=lambda: str([n.message for n in app._notifications]))
        assert app.screen is queues  # no dialog for a queue that is not there

    drive(make_app(dsn, start="queues"), scenario)
