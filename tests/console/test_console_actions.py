"""The console's actions, driven with Textual's Pilot against a real, seeded PostgreSQL.

Each test asserts the effect in the database and the audit row, as an operator would check.
"""

from __future__ import annotations

import io
from typing import Any

import psycopg
import pytest
from console_seed import (
    SCHEMA,
    Seeded,
    drive,
    freeze_db_clock,
    loaded,
    make_app,
    on_screen,
    seed,
)
from helpers import wait_until_async
from rich.console import Console
from textual.pilot import Pilot
from textual.widgets import Button, Input, Static

from forklift_console.app import ConsoleApp
from forklift_console.screens.base import ConsoleScreen
from forklift_console.screens.job import JobScreen
from forklift_console.screens.jobs import JobsScreen
from forklift_console.screens.modals import ConfirmScreen, ReasonScreen
from forklift_console.widgets.filterbar import FilterBar
from forklift_console.widgets.table import LiveTable


@pytest.fixture
def seeded(conn: psycopg.Connection[Any]) -> Seeded:
    return seed(conn)


async def jobs_filtered(app: ConsoleApp, pilot: Pilot[None], text: str) -> JobsScreen:
    await pilot.press("3")
    jobs = await on_screen(app, JobsScreen)
    await pilot.press("slash")
    bar = jobs.query_one("#filter", Input)
    bar.value = text
    await pilot.press("enter")
    await loaded(app, jobs)
    return jobs


def state_of(conn: psycopg.Connection[Any], job_id: int) -> str | None:
    row = conn.execute(f"SELECT state FROM {SCHEMA}.jobs WHERE id = %s", (job_id,)).fetchone()
    return None if row is None else str(row[0])


def audit(conn: psycopg.Connection[Any]) -> list[tuple[Any, ...]]:
    return conn.execute(
        f"SELECT actor, action, target, count, reason, outcome FROM {SCHEMA}.audit"
        " WHERE actor = 'tester' ORDER BY id"
    ).fetchall()


async def confirm(app: ConsoleApp, pilot: Pilot[None], typed: int | None = None) -> ConfirmScreen:
    dialog = await on_screen(app, ConfirmScreen)
    if typed is not None:
        # What the person must do next has the focus: typing the count.
        await wait_until_async(lambda: app.focused is dialog.query_one("#typed", Input),
                               timeout=10, message="focus must start in the count field")
        assert dialog.query_one("#confirm", Button).disabled
        await pilot.press(*str(typed))
        assert not dialog.query_one("#confirm", Button).disabled
        await pilot.press("enter")
        return dialog
    await wait_until_async(lambda: app.focused is dialog.query_one("#confirm", Button),
                           timeout=10, message="focus must start on the confirm button")
    dialog.query_one("#confirm", Button).press()
    return dialog


# -- one job -----------------------------------------------------------------------------------
def test_requeue_one_dead_job_asks_first_then_acts_and_audits(
    dsn: str, conn: psycopg.Connection[Any], seeded: Seeded
) -> None:
    hostile = seeded.ids["hostile"]

    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        jobs = await jobs_filtered(app, pilot, f"id:{hostile}")
        assert jobs.query_one("#jobs", LiveTable).keys == [str(hostile)]
        await pilot.press("r")
        dialog = await on_screen(app, ConfirmScreen)
        assert dialog.plan.title == "Requeue 1 job?"
        assert dialog.plan.ids == (hostile,)
        assert app.focused is dialog.query_one("#confirm", Button)
        await pilot.press("escape")  # esc backs out: nothing happens
        await on_screen(app, JobsScreen)
        assert state_of(conn, hostile) == "dead"
        await pilot.press("r")
        await confirm(app, pilot)
        await wait_until_async(lambda: state_of(conn, hostile) == "available", timeout=20)
        await wait_until_async(lambda: app.last_command is not None, timeout=10)
        assert app.last_command == f"forklift jobs retry --yes {hostile}"

    drive(make_app(dsn), scenario)
    assert audit(conn) == [("tester", "requeue", {"job": hostile}, 1, None, "requeued")]


def test_cancel_an_available_job_from_the_list(
    dsn: str, conn: psycopg.Connection[Any], seeded: Seeded
) -> None:
    target = seeded.ids["lagging"]

    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        await jobs_filtered(app, pilot, f"id:{target}")
        await pilot.press("C")
        await confirm(app, pilot)
        await wait_until_async(lambda: state_of(conn, target) == "cancelled", timeout=20)

    drive(make_app(dsn), scenario)
    assert audit(conn) == [("tester", "cancel", {"job": target}, 1, None, "cancelled")]


def test_delete_from_the_detail_screen(
    dsn: str, conn: psycopg.Connection[Any], seeded: Seeded
) -> None:
    target = seeded.ids["dead_smtp"]

    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        await jobs_filtered(app, pilot, f"id:{target}")
        await pilot.press("enter")
        detail = await on_screen(app, JobScreen)
        await loaded(app, detail)
        await pilot.press("D")
        await confirm(app, pilot)
        await wait_until_async(lambda: state_of(conn, target) is None, timeout=20)
        await wait_until_async(
            lambda: "no longer exists" in str(detail.query_one("#head").render()), timeout=20
        )
        await pilot.press("escape")
        await on_screen(app, JobsScreen)

    drive(make_app(dsn), scenario)
    assert audit(conn) == [("tester", "delete", {"job": target}, 1, None, "deleted")]


def test_an_action_that_does_not_apply_is_disabled_and_core_refuses_it_anyway(
    dsn: str, conn: psycopg.Connection[Any], seeded: Seeded
) -> None:
    running = seeded.ids["progress"]

    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        await jobs_filtered(app, pilot, f"id:{running}")
        await pilot.press("enter")
        detail = await on_screen(app, JobScreen)
        await loaded(app, detail)
        assert detail.check_action("act", ("requeue",)) is None  # disabled: it is running
        assert detail.check_action("act", ("cancel",)) is True
        await pilot.press("r")
        await pilot.pause()
        assert isinstance(app.screen, JobScreen)  # no dialog opened
        # From the list (which does not know every state) the refusal comes from core.
        await pilot.press("escape")
        await on_screen(app, JobsScreen)
        await pilot.press("r")
        await confirm(app, pilot)
        await wait_until_async(
            lambda: any("refused" in n.title for n in app._notifications), timeout=20
        )

    drive(make_app(dsn), scenario)
    assert state_of(conn, running) == "running"
    assert audit(conn) == [
        ("tester", "requeue", {"job": running}, 0, None, "refused: not_requeueable")
    ]


# -- many jobs ---------------------------------------------------------------------------------
def test_marked_jobs_are_requeued_together(
    dsn: str, conn: psycopg.Connection[Any], seeded: Seeded
) -> None:
    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        jobs = await jobs_filtered(app, pilot, "state:dead queue:mail")
        table = jobs.query_one("#jobs", LiveTable)
        table.focus()
        first, second = (int(k) for k in table.keys[:2])
        await pilot.press("space", "space")
        assert jobs.marks == {first, second}
        await pilot.press("r")
        dialog = await confirm(app, pilot)
        assert dialog.plan.count == 2 and set(dialog.plan.ids) == {first, second}
        await wait_until_async(
            lambda: state_of(conn, first) == state_of(conn, second) == "available", timeout=20
        )
        await wait_until_async(lambda: not jobs.marks, timeout=10)

    drive(make_app(dsn), scenario)
    rows = audit(conn)
    assert [(r[1], r[3], r[5]) for r in rows] == [("requeue_many", 2, "requeued: 2")]


def test_all_matching_asks_for_the_count_typed(
    dsn: str, conn: psycopg.Connection[Any], seeded: Seeded
) -> None:
    before = conn.execute(
        f"SELECT count(*) FROM {SCHEMA}.jobs WHERE state = 'dead' AND kind = 'demo.failing'"
    ).fetchone()
    assert before is not None
    n = int(before[0])

    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        jobs = await jobs_filtered(app, pilot, "state:dead kind:demo.failing")
        jobs.query_one("#jobs", LiveTable).focus()
        await pilot.press("a")
        assert jobs.all_matching
        await pilot.press("D")
        dialog = await confirm(app, pilot, typed=n)
        assert dialog.plan.count == n and dialog.plan.typed
        assert dialog.plan.cli == (
            "forklift jobs delete --state dead --kind demo.failing --yes"
        )
        await wait_until_async(
            lambda: conn.execute(
                f"SELECT count(*) FROM {SCHEMA}.jobs WHERE kind = 'demo.failing'"
                " AND state = 'dead'"
            ).fetchone() == (0,),
            timeout=20,
        )

    drive(make_app(dsn), scenario)
    rows = audit(conn)
    assert [(r[1], r[3]) for r in rows] == [("delete_many", n)]


def test_a_dead_letter_group_is_requeued_after_typing_its_count(
    dsn: str, conn: psycopg.Connection[Any], seeded: Seeded
) -> None:
    group = [
        int(r[0]) for r in conn.execute(
            f"SELECT id FROM {SCHEMA}.jobs WHERE state = 'dead'"
            " AND errors -> -1 ->> 'code' = 'mailbox_full' ORDER BY id"
        )
    ]
    assert len(group) == 9

    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        await pilot.press("4")
        dead = await on_screen(app, ConsoleScreen)
        await loaded(app, dead)
        table = dead.query_one("#groups", LiveTable)
        table.focus()
        assert dead.selected().code == "mailbox_full"  # busiest in the last hour comes first
        await pilot.press("r")
        key = dead.selected().id
        dialog = await confirm(app, pilot, typed=9)
        assert dialog.plan.count == 9 and dialog.plan.cli == f"forklift dead requeue {key} --yes"
        await wait_until_async(
            lambda: all(state_of(conn, i) == "available" for i in group), timeout=20
        )

    drive(make_app(dsn), scenario)
    rows = audit(conn)
    assert [(r[1], r[3], r[5]) for r in rows] == [("requeue_many", 9, "requeued: 9")]


# -- queues ------------------------------------------------------------------------------------
def test_pause_with_a_reason_then_resume(
    dsn: str, conn: psycopg.Connection[Any], seeded: Seeded
) -> None:
    def paused() -> tuple[Any, ...] | None:
        return conn.execute(
            f"SELECT paused, pause_reason, paused_by FROM {SCHEMA}.queues WHERE name = 'default'"
        ).fetchone()

    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        await pilot.press("2")
        queues = await on_screen(app, ConsoleScreen)
        await loaded(app, queues)
        table = queues.query_one("#queues", LiveTable)
        table.focus()
        assert table.move_to_key("default")
        await pilot.press("p")
        dialog = await on_screen(app, ReasonScreen)
        await pilot.press(*"deploy in progress [red]x[/]")
        await pilot.press("tab")  # tab moves on to the expiry...
        assert app.focused is dialog.query_one("#for", Input)
        assert isinstance(app.screen, ReasonScreen)
        await pilot.press(*"30m")
        cli_line = str(dialog.query_one("#cli").render())
        assert "--for 30m" in cli_line  # ...and the shown CLI follows what is typed
        await pilot.press("enter")
        await wait_until_async(lambda: paused() == (True, "deploy in progress [red]x[/]",
                                                    "tester"), timeout=20)
        await wait_until_async(lambda: app.last_command is not None, timeout=10)
        assert app.last_command == (
            "forklift queues pause --reason 'deploy in progress [red]x[/]' --for 30m default"
        )
        await loaded(app, queues)
        assert table.move_to_key("default")
        await pilot.press("p")  # resuming asks too: whose pause it ends, and why
        dialog = await on_screen(app, ReasonScreen)
        context = str(dialog.query_one("#context").render())
        assert "paused by tester" in context and "deploy in progress [red]x[/]" in context
        await pilot.press("enter")
        await wait_until_async(lambda: paused() == (False, None, None), timeout=20)

    drive(make_app(dsn), scenario)
    rows = audit(conn)
    assert [(r[1], r[2]["queue"], r[4], r[5]) for r in rows] == [
        ("pause", "default", "deploy in progress [red]x[/]", "done"),
        ("resume", "default", None, "done"),
    ]


# -- read-only ---------------------------------------------------------------------------------
def test_read_only_disables_every_action_and_core_refuses_too(
    dsn: str, conn: psycopg.Connection[Any], seeded: Seeded
) -> None:
    dead = seeded.ids["dead_mailbox"]

    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        assert app.status.read_only
        jobs = await jobs_filtered(app, pilot, f"id:{dead}")
        for action in ("requeue", "cancel", "delete"):
            assert jobs.check_action("act", (action,)) is None
        await pilot.press("r", "C", "D", "space", "a")
        await pilot.pause()
        assert isinstance(app.screen, JobsScreen)  # no dialog
        await pilot.press("2")
        queues = await on_screen(app, ConsoleScreen)
        await loaded(app, queues)
        assert queues.check_action("toggle_pause", ()) is None
        await pilot.press("p")
        await pilot.pause()
        assert app.screen is queues
        # The palette still lists actions, marked disabled, and running one does nothing.
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert "Jobs: Requeue (disabled: read-only)" in titles
        await app.run_action("act('requeue')", app.views["jobs"])
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmScreen)
        # Core refuses on its own, whoever calls it.
        from forklift._base.errors import ReadOnly

        with pytest.raises(ReadOnly):
            app.backend.operator.requeue(dead)

    drive(make_app(dsn, read_only=True), scenario)
    assert state_of(conn, dead) == "dead"
    assert conn.execute(f"SELECT count(*) FROM {SCHEMA}.audit WHERE actor = 'tester'").fetchone() == (0,)


# -- live data ---------------------------------------------------------------------------------
def test_rows_update_in_place_by_key_and_the_cursor_stays_on_its_job(
    dsn: str, conn: psycopg.Connection[Any], seeded: Seeded
) -> None:
    target = seeded.ids["backing_off"]

    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        jobs = await jobs_filtered(app, pilot, "queue:default")
        table = jobs.query_one("#jobs", LiveTable)
        table.focus()
        assert table.move_to_key(target)
        keys = table.keys
        conn.execute(
            f"UPDATE {SCHEMA}.jobs SET state = 'available', run_at = now() WHERE id = %s",
            (target,),
        )
        await loaded(app, jobs)
        assert table.keys == keys  # same rows: only the changed cell was rewritten
        assert table.current_key == str(target)
        assert "available" in str(table.get_cell(str(target), "state"))
        row = conn.execute(
            f"INSERT INTO {SCHEMA}.jobs (queue, kind) VALUES ('default', 'demo.fast') RETURNING id"
        ).fetchone()
        assert row is not None
        await loaded(app, jobs)
        assert table.keys == [str(row[0]), *keys[:-1]]  # a page of 100: the oldest fell off
        assert table.current_key == str(target)  # the cursor followed its job

    drive(make_app(dsn), scenario)


def test_refresh_holds_while_frozen_or_while_a_dialog_is_open(
    dsn: str, seeded: Seeded
) -> None:
    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        screen = app.screen
        assert isinstance(screen, ConsoleScreen)
        await loaded(app)
        await pilot.press("f")
        assert app.status.frozen
        # A load the screen started on its own (its first resume can land late under load)
        # must end first: the point is that a tick while frozen starts none.
        await wait_until_async(lambda: not screen._loading, timeout=20)
        app.refresher.tick()
        assert not screen._loading
        await pilot.press("f")
        assert not app.status.frozen
        await loaded(app)
        await pilot.press("question_mark")
        await pilot.pause()
        await wait_until_async(lambda: not screen._loading, timeout=20)
        app.refresher.tick()
        assert not screen._loading
        await pilot.press("escape")
        await pilot.press("plus")
        assert app.status.interval < 3600
        await pilot.press("minus", "minus")
        assert app.status.interval == 30.0

    drive(make_app(dsn), scenario)


def test_payload_markup_and_escape_codes_show_literally(
    dsn: str, seeded: Seeded
) -> None:
    hostile = seeded.ids["hostile"]

    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        await jobs_filtered(app, pilot, f"id:{hostile}")
        await pilot.press("enter")
        detail = await on_screen(app, JobScreen)
        await loaded(app, detail)
        args = detail.query_one("#args").render()
        errors = detail.query_one("#errors").render()
        text = str(args) + str(errors)
        assert "[bold red]boom[/]" in text
        assert "[blink]ValueError[/blink]" in text
        assert "\x1b" not in text and "\u202e" not in text

    drive(make_app(dsn), scenario)


def test_keyset_pages_move_forward_and_back(dsn: str, conn: psycopg.Connection[Any]) -> None:
    conn.execute(
        f"INSERT INTO {SCHEMA}.jobs (queue, kind, args)"
        " SELECT 'bulk', 'demo.fast', jsonb_build_object('n', g) FROM generate_series(1, 250) g"
    )

    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        jobs = await jobs_filtered(app, pilot, "queue:bulk")
        table = jobs.query_one("#jobs", LiveTable)
        table.focus()
        assert table.keys[0] == "250" and len(table.keys) == 100
        await pilot.press("right_square_bracket")
        await loaded(app, jobs)
        assert table.keys[0] == "150"
        assert "jobs 101–200 of 250" in str(jobs.query_one("#info").render())
        await pilot.press("right_square_bracket")
        await loaded(app, jobs)
        assert table.keys[-1] == "1" and len(table.keys) == 50
        await pilot.press("left_square_bracket", "left_square_bracket")
        await loaded(app, jobs)
        assert table.keys[0] == "250"

    drive(make_app(dsn), scenario)


def test_a_bad_filter_is_explained_not_fatal(dsn: str, seeded: Seeded) -> None:
    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        jobs = await jobs_filtered(app, pilot, "state:zombie")
        assert jobs.filter_text == ""
        assert any("state:zombie is not a state" in n.message for n in app._notifications)
        await jobs_filtered(app, pilot, "queue:'mail; DROP TABLE x' \"%_\\\\\"")
        assert jobs.query_one("#jobs", LiveTable).keys == []

    drive(make_app(dsn), scenario)


# -- navigation, help, palette -----------------------------------------------------------------
def test_number_keys_colon_drill_down_and_escape_back(dsn: str, seeded: Seeded) -> None:
    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        for key, mode in (("2", "queues"), ("5", "workers"), ("6", "audit"), ("1", "overview")):
            await pilot.press(key)
            assert app.current_mode == mode
        await pilot.press("colon")
        await pilot.press(*"dead", "enter")
        assert app.current_mode == "dead"
        await pilot.press("2")
        queues = await on_screen(app, ConsoleScreen)
        await loaded(app, queues)
        table = queues.query_one("#queues", LiveTable)
        table.focus()
        assert table.move_to_key("mail")
        await pilot.press("enter")
        jobs = await on_screen(app, JobsScreen)
        assert jobs.filter_text == "queue:mail"
        jobs.query_one("#jobs", LiveTable).focus()
        await pilot.press("escape")
        assert app.current_mode == "queues"

    drive(make_app(dsn), scenario)


def test_help_lists_the_screens_keys_and_the_legend(dsn: str, seeded: Seeded) -> None:
    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        await pilot.press("3")
        await on_screen(app, JobsScreen)
        await pilot.press("question_mark")
        await pilot.pause()
        text = ""
        for part in ("#help", "#legend"):  # Rich grids: rendered as the terminal shows them
            out = Console(width=200, record=True, file=io.StringIO())
            out.print(app.screen.query_one(part, Static).content)
            text += out.export_text()
        for words in ("Requeue", "Cancel", "Delete", "Mark", "Filter", "↻ retryable",
                      "✖ dead", "◐ draining", "‖ paused", "Help"):
            assert words in text, words
        await pilot.press("escape")
        assert isinstance(app.screen, JobsScreen)

    drive(make_app(dsn), scenario)


def test_the_palette_lists_every_screen_and_action(dsn: str) -> None:
    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        titles = {c.title for c in app.get_system_commands(app.screen)}
        expected = {
            "Go to Overview", "Go to Queues", "Go to Jobs", "Go to Dead letters",
            "Go to Workers", "Go to Audit", "Help", "Freeze refresh", "Refresh faster",
            "Refresh slower", "Queues: Pause/resume", "Jobs: Filter", "Jobs: Mark",
            "Jobs: Mark all", "Jobs: Requeue", "Jobs: Cancel", "Jobs: Delete",
            "Dead letters: Requeue group", "Dead letters: Delete group", "Audit: Older",
        }
        assert expected <= titles, expected - titles
        # Running one from another screen switches there and runs it.
        command = next(c for c in app.get_system_commands(app.screen) if c.title == "Jobs: Filter")
        command.callback()
        await wait_until_async(lambda: isinstance(app.focused, FilterBar), timeout=10)
        assert app.current_mode == "jobs"

    drive(make_app(dsn), scenario)


def test_marked_dead_letter_groups_are_deleted_together(
    dsn: str, conn: psycopg.Connection[Any], seeded: Seeded
) -> None:
    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        await pilot.press("4")
        dead = await on_screen(app, ConsoleScreen)
        await loaded(app, dead)
        dead.query_one("#groups", LiveTable).focus()
        await pilot.press("space", "space")  # the two busiest groups
        assert len(dead.marks) == 2
        groups = [dead._groups[k] for k in dead.marks]
        marked = sorted(int(r[0]) for r in conn.execute(
            f"SELECT job_id FROM {SCHEMA}.dead_letters WHERE group_key = ANY(%s)",
            ([g.id for g in groups],)))
        assert len(marked) == sum(g.count for g in groups)
        await pilot.press("D")
        dialog = await confirm(app, pilot, typed=len(marked))
        assert dialog.plan.count == len(marked) and dialog.plan.verb == "Delete"
        await wait_until_async(lambda: all(state_of(conn, i) is None for i in marked),
                               timeout=20)
        await wait_until_async(lambda: not dead.marks, timeout=10)

    drive(make_app(dsn), scenario)
    # Each group is its own audited bulk action.
    assert sorted((r[1], r[5]) for r in audit(conn)) == [("delete_many", "deleted: 5"),
                                                         ("delete_many", "deleted: 9")]


def test_enter_on_an_alert_shows_the_jobs_behind_it(
    dsn: str, conn: psycopg.Connection[Any], seeded: Seeded
) -> None:
    freeze_db_clock(conn)  # the seeded dead letters are "recent" only at the seed's instant

    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        overview = app.screen
        await loaded(app, overview)
        alerts = overview.query_one("#alerts")
        alerts.focus()
        await pilot.press("down")  # the second alert: dead letters growing
        await pilot.press("enter")
        jobs = await on_screen(app, JobsScreen)
        assert jobs.filter_text == "state:dead"
        jobs.query_one("#jobs", LiveTable).focus()
        await pilot.press("escape")
        assert app.current_mode == "overview"

    drive(make_app(dsn), scenario)


def test_a_dead_job_holds_no_lease(dsn: str, conn: psycopg.Connection[Any], seeded: Seeded) -> None:
    """17.7: a dead job still carrying its last worker id and fence shows where it last ran,
    never "Lease: held by worker ... (fence N)"."""
    dead = seeded.ids["dead_smtp"]
    conn.execute(f"UPDATE {SCHEMA}.jobs SET worker_id = 'web-1:4242:a1', fence = 7 WHERE id = %s",
                 (dead,))

    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        await jobs_filtered(app, pilot, f"id:{dead}")
        await pilot.press("enter")
        detail = await on_screen(app, JobScreen)
        await loaded(app, detail)
        lease = str(detail.query_one("#lease").render())
        assert "Last ran on: worker web-1:4242:a1" in lease
        assert "held by" not in lease and "fence" not in lease

    drive(make_app(dsn), scenario)
