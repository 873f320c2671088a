"""The console's edges, one Pilot test each, against a real seeded PostgreSQL.

Each test is named for the behaviour it pins, one that a console without it would fail.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from apps.ops import error, insert_job, register_worker
from console_seed import (
    SCHEMA,
    Seeded,
    drive,
    freeze_db_clock,
    loaded,
    make_app,
    on_screen,
    seed,
    seed_long_runs,
    settled,
)
from helpers import wait_until_async
from textual.pilot import Pilot
from textual.widgets import Input, OptionList

from forklift_console.app import ConsoleApp
from forklift_console.screens.base import READ_ONLY_WHY
from forklift_console.screens.dead import DeadScreen
from forklift_console.screens.job import JobScreen
from forklift_console.screens.jobs import JobsScreen
from forklift_console.screens.modals import ConfirmScreen, GotoScreen, PickScreen, ReasonScreen
from forklift_console.screens.queues import QueuesScreen
from forklift_console.screens.waiting import RetriesScreen
from forklift_console.screens.workers import WorkersScreen
from forklift_console.widgets.table import LiveTable


@pytest.fixture
def seeded(conn: psycopg.Connection[Any]) -> Seeded:
    return seed(conn)


def messages(app: ConsoleApp) -> list[str]:
    return [n.message for n in app._notifications]


async def told(app: ConsoleApp, words: str) -> None:
    await wait_until_async(lambda: any(words in m for m in messages(app)), timeout=10,
                           message=lambda: f"no notification with {words!r}: {messages(app)}")


async def filtered(app: ConsoleApp, pilot: Pilot[None], text: str) -> JobsScreen:
    await pilot.press("3")
    jobs = await on_screen(app, JobsScreen)
    await pilot.press("slash")
    jobs.query_one("#filter", Input).value = text
    await pilot.press("enter")
    await loaded(app, jobs)
    return jobs


def info(jobs: JobsScreen) -> str:
    return str(jobs.query_one("#info").render())


def add_reports(conn: psycopg.Connection[Any], n: int) -> None:
    for i in range(n):
        conn.execute(
            f"INSERT INTO {SCHEMA}.jobs (queue, kind, args) VALUES ('reports', 'demo.report', %s)",
            (f'{{"n": {7000 + i}}}',),
        )


# -- the jobs count -------------------------------------------------------------------------------
def test_the_jobs_count_agrees_with_the_rows_shown(
    dsn: str, conn: psycopg.Connection[Any], seeded: Seeded
) -> None:
    """The count is recounted on its own clock (frozen here, so never): rows that outgrew or
    outlived it must not read "jobs 1-11 of 6"."""

    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        jobs = await filtered(app, pilot, "queue:reports state:available")
        assert "jobs 1–6 of 6" in info(jobs)
        add_reports(conn, 5)
        await loaded(app, jobs)
        assert len(jobs.query_one("#jobs", LiveTable).keys) == 11
        await wait_until_async(lambda: "jobs 1–11 of 11" in info(jobs), timeout=10,
                               message=lambda: info(jobs))
        conn.execute(f"DELETE FROM {SCHEMA}.jobs WHERE queue = 'reports' AND state = 'available'"
                     " AND id > (SELECT min(id) + 1 FROM {s}.jobs WHERE queue = 'reports'"
                     " AND state = 'available')".replace("{s}", SCHEMA))
        await loaded(app, jobs)
        assert len(jobs.query_one("#jobs", LiveTable).keys) == 2
        await wait_until_async(lambda: "jobs 1–2 of 2" in info(jobs), timeout=10,
                               message=lambda: info(jobs))

    drive(make_app(dsn), scenario)


# -- disabled keys say why ------------------------------------------------------------------------
def test_a_disabled_key_says_why(dsn: str, seeded: Seeded) -> None:
    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        app.push_screen(JobScreen(seeded.ids["lagging"]))
        job = await on_screen(app, JobScreen)
        await loaded(app, job)
        await pilot.press("D")
        await told(app, f"job {seeded.ids['lagging']} is available")
        assert any("cancel it first (C)" in m for m in messages(app))
        assert isinstance(app.screen, JobScreen)  # and nothing was asked or done

    drive(make_app(dsn), scenario)


def test_a_write_key_in_read_only_says_why(dsn: str, seeded: Seeded) -> None:
    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        jobs = await filtered(app, pilot, "state:dead")
        jobs.query_one("#jobs", LiveTable).focus()
        await pilot.press("r")
        await told(app, READ_ONLY_WHY)
        assert isinstance(app.screen, JobsScreen)

    drive(make_app(dsn, read_only=True), scenario)


# -- a rejected filter ----------------------------------------------------------------------------
def test_a_rejected_filter_does_not_stay_in_the_filter_line(
    dsn: str, seeded: Seeded
) -> None:
    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        jobs = await filtered(app, pilot, "queue:reports")
        shown = list(jobs.query_one("#jobs", LiveTable).keys)
        await pilot.press("slash")
        bar = jobs.query_one("#filter", Input)
        bar.value = "queue:reports state:zombie"
        await pilot.press("enter")
        await told(app, "state:zombie is not a state")
        await told(app, "still showing: queue:reports")
        assert bar.value == "queue:reports"  # the line says what the rows show
        assert jobs.filter_text == "queue:reports"
        assert list(jobs.query_one("#jobs", LiveTable).keys) == shown

    drive(make_app(dsn), scenario)


# -- palette row actions --------------------------------------------------------------------------
def test_a_palette_row_action_from_elsewhere_asks_which_row(
    dsn: str, seeded: Seeded
) -> None:
    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        queues = app.views["queues"]
        assert isinstance(queues, QueuesScreen)
        assert app.current_mode == "overview"
        command = next(c for c in app.get_system_commands(app.screen)
                       if c.title == "Queues: Pause/resume")
        command.callback()
        pick = await on_screen(app, PickScreen)
        await wait_until_async(lambda: isinstance(app.focused, OptionList), timeout=10)
        choices = pick.query_one("#choices", OptionList)
        keys = [choices.get_option_at_index(i).id for i in range(choices.option_count)]
        assert {"default", "mail", "reports", "slow"} <= set(keys)
        # Not whatever row the Queues screen had highlighted: the one picked here.
        while choices.highlighted_option is None or choices.highlighted_option.id != "slow":
            await pilot.press("down")
        await pilot.press("enter")
        dialog = await on_screen(app, ReasonScreen)
        assert dialog.title_text == "Pause queue slow?"
        await pilot.press("escape")
        await on_screen(app, QueuesScreen)

    drive(make_app(dsn), scenario)


# -- narrow terminals -----------------------------------------------------------------------------
def test_jobs_at_80_columns_gives_the_error_column_room(dsn: str, seeded: Seeded) -> None:
    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        jobs = await filtered(app, pilot, f"id:{seeded.ids['hostile']}")
        table = jobs.query_one("#jobs", LiveTable)
        labels = [str(c.label) for c in table.columns.values()]
        assert "Queue" not in labels and "Try" not in labels
        info_column = list(table.columns.values())[-1]
        assert info_column.get_render_width(table) >= 30
        # What the columns leave out is on the line under the table, for the highlighted job.
        current = str(jobs.query_one("#current").render())
        assert "queue default" in current and "attempt 4/4" in current
        await pilot.resize_terminal(120, 36)
        await wait_until_async(
            lambda: "Queue" in [str(c.label) for c in table.columns.values()],
            timeout=10, message="the wide layout must come back at 120 columns")
        # The same table, its rows and cursor kept (it is never missing while it changes).
        assert jobs.query_one("#jobs", LiveTable) is table
        assert table.keys == [str(seeded.ids["hostile"])]
        assert str(table.cell_value(str(seeded.ids["hostile"]), "queue")) == "default"

    drive(make_app(dsn), scenario, size=(80, 24))


# -- without colour -------------------------------------------------------------------------------
def test_without_colour_the_cursor_row_and_disabled_keys_still_read(
    dsn: str, seeded: Seeded, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NO_COLOR", "1")

    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        from textual.widgets._footer import FooterKey

        jobs = await filtered(app, pilot, "queue:nothing-here")
        table = jobs.query_one("#jobs", LiveTable)
        assert table.get_component_rich_style("datatable--cursor").reverse
        await wait_until_async(lambda: bool(app.screen.query("FooterKey.-disabled")), timeout=10,
                               message="r, C, D are disabled on an empty list")
        for key in app.screen.query("FooterKey.-disabled").results(FooterKey):
            assert key.rich_style.strike, key

    drive(make_app(dsn), scenario)


# -- queues that fail or have no worker -----------------------------------------------------------
def test_queues_show_failing_and_no_worker(dsn: str, conn: psycopg.Connection[Any]) -> None:
    """A queue where every job dies reads failing, not active; work waiting with no live worker
    listening reads no worker at once, not active until the lag passes a minute."""
    now = datetime.now(UTC)
    for i in range(4):
        at = now - timedelta(minutes=i + 1)
        insert_job(conn, queue="doomed", state="dead", errors=[error(at=at)], finished_at=at)
    insert_job(conn, queue="orphan", state="available")
    insert_job(conn, queue="flowing", state="available")
    insert_job(conn, queue="flowing", state="completed", finished_at=now)
    register_worker(conn, "w1", ["doomed", "flowing"], slots=4)

    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        await pilot.press("2")
        queues = await on_screen(app, QueuesScreen)
        await loaded(app, queues)
        table = queues.query_one("#queues", LiveTable)
        states = {k: str(table.cell_value(k, "state")) for k in table.keys}
        assert "failing" in states["doomed"], states
        assert "no worker" in states["orphan"], states
        assert "active" in states["flowing"], states

    drive(make_app(dsn, now=now), scenario)


# -- exited workers -------------------------------------------------------------------------------
def test_a_worker_that_exited_stays_listed_with_when_and_how(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    now = datetime.now(UTC)
    register_worker(conn, "live-1", ["default"])
    for wid, reason, ago in (("gone-1", "drained", 120), ("gone-2", "killed", 30),
                             ("gone-3", "lease_lost", 600)):
        register_worker(conn, wid, ["default"])
        conn.execute(f"UPDATE {SCHEMA}.workers SET state = 'exited', exit_reason = %s,"
                     " exited_at = %s WHERE id = %s",
                     (reason, now - timedelta(seconds=ago), wid))

    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        await pilot.press("5")
        workers = await on_screen(app, WorkersScreen)
        await loaded(app, workers)
        table = workers.query_one("#workers", LiveTable)
        # The live worker first, then the exited ones, newest exit first.
        assert table.keys == ["live-1", "gone-2", "gone-1", "gone-3"]
        assert "exited" in str(table.cell_value("gone-2", "state"))
        assert "exited 30s ago, killed" in str(table.cell_value("gone-2", "id"))
        assert "lease lost" in str(table.cell_value("gone-3", "id"))
        table.focus()
        table.move_to_key("gone-2")
        await wait_until_async(
            lambda: "killed: its heartbeat stopped" in str(
                workers.query_one("#inflight").render()), timeout=10,
            message=lambda: str(workers.query_one("#inflight").render()))
        assert "3 exited in the last day" in str(workers.query_one("#info").render())

    drive(make_app(dsn, now=now), scenario)


def test_workers_queues_are_not_cut_at_120_columns(dsn: str, seeded: Seeded) -> None:
    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        await pilot.press("5")
        workers = await on_screen(app, WorkersScreen)
        await loaded(app, workers)
        table = workers.query_one("#workers", LiveTable)
        assert str(table.cell_value("web-1:4242:a1", "queues")) == "default,mail,reports"

    drive(make_app(dsn), scenario)


def screen_lines(app: ConsoleApp) -> list[str]:
    """The screen as the terminal shows it, line by line."""
    return ["".join(seg.text for seg in strip)
            for strip in app.screen._compositor.render_strips()]


ALL_TABS = ("1 Overview", "2 Queues", "3 Jobs", "4 Dead letters", "5 Workers", "6 Audit",
            "7 Batches", "8 Schedules", "9 Backfills")


def test_tab_labels_stay_whole_beside_a_filter_and_a_colon_screen(
    dsn: str, seeded: Seeded
) -> None:
    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        await filtered(app, pilot, "queue:mail state:dead")
        tabs = screen_lines(app)[1]
        assert all(label in tabs for label in ALL_TABS), tabs  # was "4 Dead", "9 Backfi"
        assert "› queue:mail" in tabs  # the filter takes the room the labels leave
        await pilot.press("colon")
        await on_screen(app, GotoScreen)
        await pilot.press(*"retries", "enter")
        await loaded(app, await on_screen(app, RetriesScreen))
        tabs = screen_lines(app)[1]
        assert "[:retries]" in tabs
        assert all(label in tabs for label in ALL_TABS), tabs

    drive(make_app(dsn), scenario, size=(120, 36))


def test_the_header_keeps_the_schema_at_80_columns(dsn: str, seeded: Seeded) -> None:
    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        await pilot.press("2")
        await loaded(app, await on_screen(app, QueuesScreen))
        status = screen_lines(app)[0]
        assert status.rstrip().endswith("every 3600s"), status
        # The host gives way, the database's name and the schema do not.
        assert "…:5432/app · forklift" in status, status

    drive(make_app(dsn), scenario, size=(80, 24))


def test_the_dead_letters_footer_fits_at_80_columns(dsn: str, seeded: Seeded) -> None:
    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        await pilot.press("4")
        await loaded(app, await on_screen(app, DeadScreen))
        await wait_until_async(lambda: "Requeue group" in screen_lines(app)[-1], timeout=10)
        footer = screen_lines(app)[-1]
        for key in ("r Requeue group", "D Delete group", "/ Filter", "? Help", "q Quit"):
            assert key in footer, footer

    drive(make_app(dsn), scenario, size=(80, 24))


def long_runs_app(dsn: str, conn: psycopg.Connection[Any], start: str) -> ConsoleApp:
    seed(conn)
    seed_long_runs(conn)
    freeze_db_clock(conn)
    app: ConsoleApp = make_app(dsn, start=start)
    return app


def column_texts(table: LiveTable) -> dict[str, tuple[int, int]]:
    """Each column's label and its (first, last) x on the screen."""
    x, out = table.region.x, {}
    for column in table.ordered_columns:
        width = column.get_render_width(table)
        out[str(column.label).strip()] = (x, x + width - 1)
        x += width
    return out


@pytest.mark.parametrize(("start", "table_id", "kept", "wide_only"), [
    ("backfills", "backfills", ("Items/s", "ETA"), "Pace"),
    ("batches", "batches", ("Rate", "ETA"), "Caller"),
    ("schedules", "schedules", ("Next", "Outcome"), "Zone"),
])
def test_screens_7_to_9_keep_their_last_columns_in_view_at_80_columns(
    dsn: str, conn: psycopg.Connection[Any], start: str, table_id: str, kept: tuple[str, ...],
    wide_only: str,
) -> None:
    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        screen = await settled(app)
        table = screen.query_one(f"#{table_id}", LiveTable)
        columns = column_texts(table)
        for label in kept:  # Pace/ETA were past the 80th column
            assert label in columns and columns[label][1] < 80, columns
        assert wide_only not in columns
        header = screen_lines(app)[table.region.y]
        assert all(label in header for label in kept), header
        key = table.current_key
        await pilot.resize_terminal(120, 36)
        await wait_until_async(lambda: wide_only in column_texts(table), timeout=10,
                               message="the wide layout must come back at 120 columns")
        assert table.current_key == key and len(table.keys) > 1
        assert max(last for _, last in column_texts(table).values()) < 120

    drive(long_runs_app(dsn, conn, start), scenario, size=(80, 24))


# -- a dead-letter group's jobs -------------------------------------------------------------------
def test_enter_on_a_dead_letter_group_lists_exactly_its_jobs(
    dsn: str, conn: psycopg.Connection[Any], seeded: Seeded
) -> None:
    """The SMTP group (code "error", 5 jobs) shares its kind with the mailbox_full group (9):
    enter must not open ``state:dead kind:demo.failing`` (14)."""
    smtp = sorted(int(r[0]) for r in conn.execute(
        f"SELECT id FROM {SCHEMA}.jobs WHERE state = 'dead' AND kind = 'demo.failing'"
        " AND errors -> -1 ->> 'code' = 'error'"))
    assert len(smtp) == 5

    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        await pilot.press("4")
        dead = await on_screen(app, DeadScreen)
        await loaded(app, dead)
        table = dead.query_one("#groups", LiveTable)
        table.focus()
        key = next(k for k in table.keys
                   if dead._groups[k].code == "error" and dead._groups[k].kind == "demo.failing")
        assert table.move_to_key(key)
        await pilot.press("enter")
        jobs = await on_screen(app, JobsScreen)
        assert jobs.filter_text == f"group:{key}"
        await loaded(app, jobs)
        assert sorted(int(k) for k in jobs.query_one("#jobs", LiveTable).keys) == smtp
        assert "jobs 1–5 of 5" in info(jobs)
        # Acting on all of them names the group's own command.
        await pilot.press("a", "r")
        dialog = await on_screen(app, ConfirmScreen)
        assert dialog.plan.count == 5
        assert dialog.plan.cli == f"forklift dead requeue {key} --yes"

    drive(make_app(dsn), scenario)


# -- the overview's alerts: worker_lost and the database's health --------------------------------
async def alert_lines(app: ConsoleApp, words: str) -> list[str]:
    overview = app.views["overview"]
    await loaded(app, overview)
    box = overview.query_one("#alerts", OptionList)
    lines = [str(box.get_option_at_index(i).prompt) for i in range(box.option_count)]
    assert any(words in line for line in lines), lines
    return lines


def test_a_lagging_queue_alert_counts_workers_and_slots_in_words(
    dsn: str, conn: psycopg.Connection[Any], seeded: Seeded
) -> None:
    # reports lags (its oldest available job waited 4 minutes); one worker listens on it.
    conn.execute(f"UPDATE {SCHEMA}.workers SET queues = '{{default}}'"
                 " WHERE id = 'web-2:5151:b2'")
    conn.execute(f"UPDATE {SCHEMA}.queues SET concurrency = NULL WHERE name = 'reports'")
    freeze_db_clock(conn)

    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        lines = await alert_lines(app, "oldest available job has waited")
        lag = next(line for line in lines if "oldest available job" in line)
        assert "1 worker listening" in lag, lag  # was "1 workers listening"
        assert "workers listening" not in lag and "1 free slots" not in lag

    drive(make_app(dsn), scenario)


def test_the_overview_alerts_on_jobs_that_died_worker_lost(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    now = datetime.now(UTC)
    lost = sorted(
        insert_job(conn, state="dead", kind="mail.send",
                   errors=[error(code="worker_lost", message="worker w1 was lost", at=at)],
                   finished_at=at)
        for at in (now - timedelta(minutes=3), now - timedelta(minutes=9))
    )
    insert_job(conn, state="dead", kind="mail.send", errors=[error(code="bounce")])

    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        lines = await alert_lines(app, "2 jobs of mail.send died worker_lost")
        index = next(i for i, line in enumerate(lines) if "worker_lost" in line)
        box = app.screen.query_one("#alerts", OptionList)
        box.focus()
        box.highlighted = index
        await pilot.press("enter")
        jobs = await on_screen(app, JobsScreen)
        assert jobs.filter_text.startswith("group:")
        await loaded(app, jobs)
        assert sorted(int(k) for k in jobs.query_one("#jobs", LiveTable).keys) == lost

    drive(make_app(dsn, now=now), scenario)


def test_the_overview_shows_the_databases_health_alerts(dsn: str) -> None:
    from forklift.ops import Operator

    with Operator(dsn) as op:
        op.set_health_threshold("connections_ratio", 0.0)  # any client connection is "too many"

    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        lines = await alert_lines(app, "database: connections:")
        index = next(i for i, line in enumerate(lines) if "database: connections" in line)
        box = app.screen.query_one("#alerts", OptionList)
        box.focus()
        box.highlighted = index
        await pilot.press("enter")
        await wait_until_async(lambda: app.current_mode == "health", timeout=10)

    drive(make_app(dsn), scenario)


# -- copy a job's id and args -------------------------------------------------------------------
def test_copy_a_jobs_id_and_args(dsn: str, conn: psycopg.Connection[Any], seeded: Seeded) -> None:
    hostile = seeded.ids["hostile"]
    stored = conn.execute(f"SELECT args FROM {SCHEMA}.jobs WHERE id = %s", (hostile,)).fetchone()
    assert stored is not None

    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        jobs = await filtered(app, pilot, f"id:{hostile}")
        jobs.query_one("#jobs", LiveTable).focus()
        await pilot.press("y")
        await wait_until_async(lambda: app.clipboard == str(hostile), timeout=10)
        await pilot.press("enter")
        job = await on_screen(app, JobScreen)
        await loaded(app, job)
        await pilot.press("Y")
        await wait_until_async(lambda: app.clipboard != str(hostile), timeout=10)
        # The args exactly, escapes and markup included: only the clipboard gets them.
        assert json.loads(app.clipboard) == stored[0]
        assert "\\u001b" in app.clipboard and "[bold red]" in app.clipboard
        assert not any("\x1b" in m for m in messages(app))
        await told(app, f"copied job {hostile}'s args")

    drive(make_app(dsn), scenario)
