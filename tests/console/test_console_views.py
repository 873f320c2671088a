"""The list tools every table has (sort, ``/`` filter, marks) and the Retries and Scheduled
views, driven with Pilot against a real, seeded PostgreSQL."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import psycopg
import pytest
from console_seed import (
    SCHEMA,
    Scene,
    Seeded,
    drive,
    loaded,
    make_app,
    on_screen,
    seed,
)
from helpers import wait_until_async
from test_console_actions import audit, confirm, state_of
from test_console_snapshots import frozen  # noqa: F401  (the fixture)
from textual.pilot import Pilot
from textual.widgets import Button, Input, Sparkline, Static

from forklift_console.app import ConsoleApp
from forklift_console.screens import jobs as jobs_page
from forklift_console.screens.charts import ChartsScreen
from forklift_console.screens.dead import DeadScreen
from forklift_console.screens.forms import LimitScreen, PruneScreen
from forklift_console.screens.jobs import JobsScreen
from forklift_console.screens.kinds import KindsScreen
from forklift_console.screens.modals import ConfirmScreen, GotoScreen
from forklift_console.screens.queues import QueuesScreen
from forklift_console.screens.waiting import RetriesScreen, ScheduledScreen
from forklift_console.widgets.filterbar import FilterLine
from forklift_console.widgets.table import LiveTable


@pytest.fixture
def seeded(conn: psycopg.Connection[Any]) -> Seeded:
    return seed(conn)


async def goto(app: ConsoleApp, pilot: Pilot[None], name: str) -> Any:
    await pilot.press("colon")
    await on_screen(app, GotoScreen)
    await pilot.press(*name, "enter")
    await wait_until_async(lambda: app.current_mode == name, timeout=10)
    await loaded(app)
    return app.screen


async def open_queues(app: ConsoleApp, pilot: Pilot[None]) -> QueuesScreen:
    await pilot.press("2")
    queues: QueuesScreen = await on_screen(app, QueuesScreen)
    await loaded(app, queues)
    return queues


def plain(widget: Static) -> str:
    return str(widget.render())


# -- sort ----------------------------------------------------------------------------------
def test_s_sorts_by_the_next_column_with_a_glyph_and_keeps_the_cursor_row(
    dsn: str, seeded: Seeded
) -> None:
    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        queues = await open_queues(app, pilot)
        table = queues.query_one("#queues", LiveTable)
        table.focus()
        assert table.keys == ["default", "mail", "reports", "slow"]  # the screen's order
        assert table.move_to_key("reports")
        await pilot.press("s")  # State, A→Z
        assert table.sort_by == ("state", False)
        await pilot.press("s")  # Queue
        await pilot.press("s")  # Avail: numbers, biggest first
        assert table.sort_by == ("available", True)
        assert table.keys == ["mail", "default", "reports", "slow"]  # 23, 14, 6, 0
        assert table.current_key == "reports"  # the cursor stayed on its row
        header = table.columns[next(c for c in table.columns if c.value == "available")]
        assert header.label.plain == "Avail▼"  # the sort is a glyph, not only colour
        await pilot.press("S")
        assert table.keys == ["slow", "reports", "default", "mail"]
        assert table.columns[header.key].label.plain == "Avail▲"
        await loaded(app, queues)  # a refresh keeps the sort and the cursor row
        assert table.keys == ["slow", "reports", "default", "mail"]
        assert table.current_key == "reports"

    drive(make_app(dsn), scenario)


# -- filter --------------------------------------------------------------------------------
def test_slash_filters_a_list_by_column_and_a_rejected_filter_says_so(
    dsn: str, seeded: Seeded
) -> None:
    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        queues = await open_queues(app, pilot)
        line = queues.query_one(FilterLine)
        assert not line.display, app.focused  # no filter: no line
        await pilot.press("slash")
        assert line.display and app.focused is line.input
        await pilot.press(*"avail:>10", "enter")
        table = queues.query_one("#queues", LiveTable)
        assert table.keys == ["default", "mail"]
        assert "2 of 4 queues" in plain(line.query_one("#filter-status", Static))
        assert app.focused is table
        await pilot.press("slash")
        line.input.value = ""
        await pilot.press(*"bogus:1", "enter")
        status = plain(line.query_one("#filter-status", Static))
        assert "not applied: unknown column bogus:" in status
        assert "still showing avail:>10" in status
        assert table.keys == ["default", "mail"]  # the rows still show the applied filter
        line.input.value = ""
        await pilot.press("enter")  # an empty filter: every row again
        assert table.keys == ["default", "mail", "reports", "slow"]

    drive(make_app(dsn), scenario)


# -- Retries and Scheduled -----------------------------------------------------------------
def test_retries_lists_retryable_jobs_and_retry_now_asks_then_acts_and_audits(
    dsn: str, conn: psycopg.Connection[Any], seeded: Seeded
) -> None:
    job = seeded.ids["backing_off"]

    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        retries = await goto(app, pilot, "retries")
        assert isinstance(retries, RetriesScreen)
        assert retries.table.keys == [str(job)]
        await pilot.press("n")
        dialog = await confirm(app, pilot)
        assert dialog.plan.title == "Retry now 1 retryable job?"
        assert dialog.plan.cli == f"forklift jobs run-now {job} --yes"
        await wait_until_async(lambda: state_of(conn, job) == "available", timeout=20)
        await loaded(app, retries)
        assert retries.table.keys == []

    drive(make_app(dsn), scenario)
    assert audit(conn) == [("tester", "run_now", {"job": job}, 1, None, "made_available")]
    row = conn.execute(f"SELECT attempt, jsonb_array_length(errors) FROM {SCHEMA}.jobs"
                       " WHERE id = %s", (job,)).fetchone()
    assert row == (2, 2)  # the attempt count and the error history stay


def test_scheduled_marks_a_range_and_runs_them_now(
    dsn: str, conn: psycopg.Connection[Any], seeded: Seeded
) -> None:
    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        scheduled = await goto(app, pilot, "scheduled")
        assert isinstance(scheduled, ScheduledScreen)
        table = scheduled.table
        keys = table.keys
        assert len(keys) == 4 and keys[0] == str(seeded.ids["scheduled"])  # soonest first
        await pilot.press("shift+down", "shift+down")
        assert table.marks == set(keys[:3])
        await wait_until_async(
            lambda: "✓ 3 marked" in plain(scheduled.query_one("#info", Static)), timeout=10)
        await pilot.press("n")
        dialog = await on_screen(app, ConfirmScreen)
        assert dialog.plan.count == 3
        await confirm(app, pilot)
        await wait_until_async(
            lambda: [state_of(conn, int(k)) for k in keys] ==
            ["available"] * 3 + ["scheduled"], timeout=20)
        await wait_until_async(lambda: not table.marks, timeout=10)

    drive(make_app(dsn), scenario)
    assert [(a[1], a[3], a[5]) for a in audit(conn)] == [
        ("run_now_many", 3, "made_available: 3")]


def test_read_only_disables_run_now_and_says_so(dsn: str, seeded: Seeded) -> None:
    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        retries = await goto(app, pilot, "retries")
        assert retries.check_action("run_now", ()) is None  # shown, disabled
        await pilot.press("n")
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmScreen)
        assert app.screen.query_one("#retries-filter-input", Input) is not None

    drive(make_app(dsn, read_only=True), scenario)


# -- Queues: limit and prune ---------------------------------------------------------------
def test_l_sets_a_queue_limit_refusing_a_bad_value_first(
    dsn: str, conn: psycopg.Connection[Any], seeded: Seeded
) -> None:
    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        queues = await open_queues(app, pilot)
        assert queues.query_one("#queues", LiveTable).move_to_key("mail")
        await pilot.press("l")
        form = await on_screen(app, LimitScreen)
        field = form.query_one("#limit", Input)
        assert app.focused is field  # the value comes first
        field.value = ""
        await pilot.press(*"five")
        assert form.query_one("#confirm", Button).disabled
        assert "Set limit is disabled: 'five' is not a whole number" in plain(
            form.query_one("#missing", Static))
        field.value = ""
        await pilot.press(*"5", "enter")  # enter: on to the reason, not submitted yet
        assert app.screen is form and app.focused is form.query_one("#reason", Input)
        await pilot.press(*"upstream quota", "enter")
        await wait_until_async(lambda: conn.execute(
            f"SELECT concurrency FROM {SCHEMA}.queues WHERE name = 'mail'").fetchone() == (5,),
            timeout=20)

    drive(make_app(dsn), scenario)
    assert [(a[1], a[2], a[4]) for a in audit(conn)] == [
        ("limit", {"queue": "mail", "concurrency": 5}, "upstream quota")]


def test_P_prunes_after_counting_and_the_count_typed(
    dsn: str, conn: psycopg.Connection[Any], seeded: Seeded
) -> None:
    def dead() -> int:
        row = conn.execute(f"SELECT count(*) FROM {SCHEMA}.jobs WHERE state = 'dead'").fetchone()
        return int(row[0]) if row else -1

    before = dead()
    assert before > 0

    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        await open_queues(app, pilot)
        await pilot.press("P")
        form = await on_screen(app, PruneScreen)
        assert form.query_one("#confirm", Button).disabled  # no age given yet
        form.query_one("#prune-dead", Input).focus()
        await pilot.press(*"1d")
        assert not form.query_one("#confirm", Button).disabled
        assert plain(form.query_one("#cli", Static)).endswith(
            "forklift prune --dead-older-than 1d --yes")
        form.query_one("#confirm", Button).press()
        shown = await on_screen(app, ConfirmScreen)
        await wait_until_async(lambda: bool(shown.query("#typed")), timeout=10)  # mounted
        dialog = await confirm(app, pilot, typed=before)
        assert dialog.plan.count == before
        await wait_until_async(lambda: dead() == 0, timeout=20)

    drive(make_app(dsn), scenario)
    assert [a[1] for a in audit(conn)] == ["prune"]


# -- snapshots -----------------------------------------------------------------------------
VIEW_SCENES: tuple[Scene, ...] = (
    Scene("retries", "retries", alt="Retries: failed jobs waiting to try again, soonest first,"
          " with the attempt, when the next try is due and the last error; n retries now"),
    Scene("retries-80x24", "retries", (80, 24)),
    Scene("scheduled-marked", "scheduled", keys=("shift+down", "shift+down"),
          alt="Scheduled: jobs enqueued for later, soonest first; a range marked with"
          " shift+↓ (✓ and a count), n runs them now"),
    Scene("scheduled-80x24", "scheduled", (80, 24)),
    Scene("scheduled-no-color", "scheduled", keys=("shift+down",), no_color=True),
    Scene("queues-sorted", "queues", keys=("s", "s", "s"), alt="Queues sorted by a column"
          " (s steps through the columns, S reverses; ▲/▼ in the header)"),
    Scene("queues-limit", "queues", highlight="mail", keys=("l",),
          alt="Setting a queue's concurrency limit (l): the CLI command follows what is typed"),
    Scene("queues-limit-80x24", "queues", (80, 24), highlight="mail", keys=("l",)),
    Scene("queues-prune-80x24", "queues", (80, 24), keys=("P",)),
    Scene("queues-filter-80x24", "queues", (80, 24), keys=("slash", *"lag:>60", "enter")),
    Scene("kinds", "kinds", alt="Kinds: per queue and kind, completed and dead jobs in the"
          " window, the share that died, run time p50/p95, and what waits now"),
    Scene("kinds-80x24", "kinds", (80, 24)),
    Scene("charts", "charts", alt="Charts: completed jobs, failed attempts, pickups and deaths"
          " per minute over the last hour, and pickup lag and run time p50/p95, with numbers on"
          " the axes and the time below"),
    Scene("charts-80x24", "charts", (80, 24)),
)


@pytest.mark.parametrize("scene", VIEW_SCENES, ids=[s.name for s in VIEW_SCENES])
def test_view_scene(
    snap_compare: Any,
    frozen: tuple[str, Seeded],  # noqa: F811  (the fixture imported above)
    scene: Scene,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    dsn, seeded = frozen
    if scene.no_color:
        monkeypatch.setenv("NO_COLOR", "1")
    before = scene.before(seeded)

    async def run_before(pilot: Pilot[None]) -> None:
        await before(pilot)
        # A dialog's text cursor blinks on a timer: the picture must not depend on when it
        # is taken.
        for field in pilot.app.screen.query(Input):
            field.cursor_blink = False
        # Toasts expire after a few seconds: how many a scene's keys left showing depends on
        # how slow the run was (queues-sorted's three "Sort" toasts were two under load).
        pilot.app.clear_notifications()
        await pilot.pause()

    assert snap_compare(scene.app(dsn), terminal_size=scene.size, run_before=run_before)


@pytest.mark.parametrize("key", ["2", "4", "5", "6", "7", "8", "9"])
def test_every_list_screen_filters_with_slash(dsn: str, seeded: Seeded, key: str) -> None:
    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        await pilot.press(key)
        await wait_until_async(lambda: bool(app.screen.query(FilterLine)), timeout=10)
        screen = app.screen
        await loaded(app, screen)
        line = screen.query_one(FilterLine)
        table = line.table
        every = table.keys
        rows = {k: [natural_text(c) for c in table.get_row(k)] for k in every}
        await pilot.press("slash")
        assert app.focused is line.input, app.focused
        await pilot.press(*"no-such-thing-anywhere", "enter")
        assert table.keys == []
        assert f"0 of {len(every):,}" in plain(line.query_one("#filter-status", Static))
        if every:  # a word of the first row keeps that row (and only rows holding it)
            word = max((w for c in rows[every[0]] for w in c.split()), key=len)
            await pilot.press("slash")
            line.input.value = ""
            await pilot.press(*word, "enter")
            assert every[0] in table.keys and set(table.keys) <= set(every)
            for k in table.keys:
                assert any(word.casefold() in c.casefold() for c in rows[k])
        await pilot.press("slash")
        line.input.value = ""
        await pilot.press("enter")
        assert table.keys == every

    drive(make_app(dsn), scenario)


def natural_text(cell: Any) -> str:
    return cell.plain if hasattr(cell, "plain") else str(cell)


# -- Kinds ---------------------------------------------------------------------------------
def test_kinds_breaks_the_window_down_per_kind_and_w_changes_the_window(
    dsn: str, frozen: tuple[str, Seeded]  # noqa: F811  (the fixture imported above)
) -> None:
    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        kinds = await goto(app, pilot, "kinds")
        assert isinstance(kinds, KindsScreen)
        table = kinds.query_one("#kinds", LiveTable)
        assert table.keys, "the seeded history has finished jobs"
        first = kinds._rows[table.keys[0]]
        assert first.completed + first.dead > 0
        done = table.cell_value(table.keys[0], "done")
        assert natural_text(done) == f"{first.completed:,}"
        # Failed attempts per kind: the seeded retries of demo.flaky failed, then completed.
        flaky = kinds._rows["default\x1fdemo.flaky"]
        assert flaky.failed > 0 and flaky.attempt_failure_rate
        shown = natural_text(table.cell_value("default\x1fdemo.flaky", "attempts"))
        assert shown == f"{flaky.attempt_failure_rate:.0%}" and shown != "0%"
        hour = {k: r.completed for k, r in kinds._rows.items()}
        await pilot.press("w")  # 24 h
        await wait_until_async(lambda: kinds.window == timedelta(hours=24), timeout=5)
        await loaded(app, kinds)
        assert "last 24 h" in plain(kinds.query_one("#info", Static))
        day = {k: r.completed for k, r in kinds._rows.items()}
        assert all(day.get(k, 0) >= n for k, n in hour.items())  # a wider window holds more
        key = table.current_key
        assert key is not None
        await pilot.press("enter")
        await wait_until_async(lambda: app.current_mode == "jobs", timeout=10)
        jobs = app.screen
        await loaded(app, jobs)  # nothing still on its way when the app closes
        assert jobs.filter_text == "queue:{} kind:{}".format(*key.split("\x1f"))

    drive(make_app(dsn), scenario)


# -- Charts --------------------------------------------------------------------------------
def test_charts_draw_the_window_with_numbers_on_the_axes_and_w_changes_it(
    dsn: str, frozen: tuple[str, Seeded]  # noqa: F811  (the fixture imported above)
) -> None:
    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        charts = await goto(app, pilot, "charts")
        assert isinstance(charts, ChartsScreen)
        chart = charts.query_one("#completed-chart", Sparkline)
        values = [int(v) for v in chart.data or []]
        assert len(values) == 60 and sum(values) > 0  # 1 h in minutes; the seeded history
        title = plain(charts.query_one("#completed-title", Static))
        assert title.startswith("Completed per minute") and f"total {sum(values):,}" in title
        assert plain(charts.query_one("#completed-axis", Static)) == f"{max(values):,}\n0"
        assert plain(charts.query_one("#completed-time", Static)).split() == [
            "-1", "h", "-30", "min", "now"]
        await pilot.press("w")  # 24 h in 30-minute buckets
        await wait_until_async(lambda: charts.window == timedelta(hours=24), timeout=5)
        await loaded(app, charts)
        assert len(chart.data or []) == 48
        assert plain(charts.query_one("#completed-title", Static)).startswith(
            "Completed per 30 min")
        assert sum(int(v) for v in chart.data or []) >= sum(values)
        # Then the Overview's and the Queues' first window: 5 min in 10-second buckets.
        await pilot.press("w")
        await wait_until_async(lambda: charts.window == timedelta(minutes=5), timeout=5)
        await loaded(app, charts)
        assert len(chart.data or []) == 30 and sum(chart.data or []) > 0  # the last minutes
        assert plain(charts.query_one("#completed-title", Static)).startswith(
            "Completed per 10 s")
        assert plain(charts.query_one("#completed-time", Static)).split() == [
            "-5", "min", "-2.5", "min", "now"]
        assert "the last 5 min in 30 buckets" in plain(charts.query_one("#info", Static))

    drive(make_app(dsn), scenario)


def test_charts_draw_lag_and_run_time_percentiles_and_n_chooses_a_queue(
    dsn: str, frozen: tuple[str, Seeded]  # noqa: F811  (the fixture imported above)
) -> None:
    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        charts = await goto(app, pilot, "charts")
        assert isinstance(charts, ChartsScreen)
        every = [int(v) for v in charts.query_one("#completed-chart", Sparkline).data or []]
        run = charts.query_one("#run_p95-chart", Sparkline).data or []
        assert len(run) == 60 and max(run) > 0  # the seeded jobs' run times
        top, bottom = plain(charts.query_one("#run_p95-axis", Static)).split("\n")
        assert top.endswith("s") and bottom in ("0.0s", "0s")  # numbers, in seconds
        assert plain(charts.query_one("#lag_p50-title", Static)).startswith(
            "Pickup lag p50 per minute")
        assert "all queues" in plain(charts.query_one("#info", Static))
        names = charts._queues
        assert "reports" in names
        await pilot.press("n")  # the first queue by name
        assert charts.queue == names[0]
        while charts.queue != "reports":
            await pilot.press("n")
        await wait_until_async(lambda: charts.loads > 0, timeout=5)
        await loaded(app, charts)
        assert "queue reports" in plain(charts.query_one("#info", Static))
        one = [int(v) for v in charts.query_one("#completed-chart", Sparkline).data or []]
        assert 0 < sum(one) < sum(every)  # one queue's share
        for _ in range(len(names) - names.index("reports")):
            await pilot.press("n")
        assert charts.queue is None  # after the last queue: all again

    drive(make_app(dsn), scenario)


# -- marks: one way on every list that marks -------------------------------------------------
def test_jobs_marks_a_shift_range_and_shows_the_count(
    dsn: str, conn: psycopg.Connection[Any], seeded: Seeded
) -> None:
    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        await pilot.press("3")
        jobs = await on_screen(app, JobsScreen)
        await loaded(app, jobs)
        table = jobs.table
        table.focus()
        keys = table.keys
        assert len(keys) >= 4
        await pilot.press("shift+down", "shift+down", "shift+down")
        assert jobs.marks == {int(k) for k in keys[:4]}
        # The count follows the marks (a message later: wait for it, under load too).
        await wait_until_async(lambda: "✓ 4 marked" in plain(jobs.query_one("#info", Static)),
                               timeout=10)
        assert [table.get_row(k)[0].plain if hasattr(table.get_row(k)[0], "plain") else
                table.get_row(k)[0] for k in keys[:5]] == ["✓"] * 4 + [" "]
        await pilot.press("shift+up")  # back up: the range stays marked, nothing unmarks
        assert len(jobs.marks) == 4
        await pilot.press("C")
        dialog = await on_screen(app, ConfirmScreen)
        assert dialog.plan.count == 4 and set(dialog.plan.ids) == jobs.marks
        await pilot.press("escape")
        await pilot.press("escape")  # esc clears the marks
        assert not jobs.marks
        await wait_until_async(lambda: "marked" not in plain(jobs.query_one("#info", Static)),
                               timeout=10)

    drive(make_app(dsn), scenario)


def test_dead_letters_mark_a_shift_range_of_groups_and_show_the_count(
    dsn: str, seeded: Seeded
) -> None:
    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        await pilot.press("4")
        dead = await on_screen(app, DeadScreen)
        await loaded(app, dead)
        table = dead.query_one("#groups", LiveTable)
        table.focus()
        keys = table.keys
        assert len(keys) >= 2
        await pilot.press("shift+down")
        assert dead.marks == set(keys[:2])
        await wait_until_async(
            lambda: "✓ 2 groups marked" in plain(dead.query_one("#info", Static)), timeout=10)
        await pilot.press("r")
        dialog = await on_screen(app, ConfirmScreen)
        assert dialog.plan.count == sum(dead._groups[k].count for k in keys[:2])
        await pilot.press("escape")
        await loaded(app, dead)  # a refresh keeps the marks of groups still there
        assert dead.marks == set(keys[:2])

    drive(make_app(dsn), scenario)


# -- Jobs: sorted on the server ------------------------------------------------------------
def test_jobs_sort_orders_the_whole_list_not_the_page_shown(
    dsn: str, conn: psycopg.Connection[Any], seeded: Seeded
) -> None:
    # The alphabetically first kind is the oldest: newest first, it is nowhere on page 1.
    conn.execute(
        f"INSERT INTO {SCHEMA}.jobs (queue, kind, created_at)"
        " SELECT 'default', 'aaa.first', now() - interval '1 day' FROM generate_series(1, 3)")
    conn.execute(
        f"INSERT INTO {SCHEMA}.jobs (queue, kind)"
        " SELECT 'default', 'zzz.bulk' FROM generate_series(1, %s)", (jobs_page.PAGE + 20,))
    first = [int(r[0]) for r in conn.execute(
        f"SELECT id FROM {SCHEMA}.jobs ORDER BY kind, id LIMIT 5")]
    last = [int(r[0]) for r in conn.execute(
        f"SELECT id FROM {SCHEMA}.jobs ORDER BY kind DESC, id DESC LIMIT 5")]
    total = conn.execute(f"SELECT count(*) FROM {SCHEMA}.jobs").fetchone()

    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        await pilot.press("3")
        jobs = await on_screen(app, JobsScreen)
        await loaded(app, jobs)
        table = jobs.table
        table.focus()
        assert not set(first[:3]) & {int(k) for k in table.keys}  # not on the newest page
        await pilot.press("s", "s", "s", "s")  # Id, State, Queue, Kind (A→Z)
        assert table.sort_by == ("kind", False)
        await wait_until_async(lambda: jobs.sort.key == "kind" and jobs._page is not None
                               and jobs._page.sort == "kind", timeout=10)
        await loaded(app, jobs)
        assert [int(k) for k in table.keys[:5]] == first
        info = plain(jobs.query_one("#info", Static))
        assert f"jobs 1–{jobs_page.PAGE} of {total[0] if total else 0:,}" in info
        assert "sorted by Kind ▲" in info
        await pilot.press("right_square_bracket")  # the next page follows in the same order
        await wait_until_async(lambda: len(jobs._cursors) == 2, timeout=10)
        await loaded(app, jobs)
        await pilot.press("S")  # Z→A, from the first page again
        await wait_until_async(lambda: jobs._page is not None and jobs._page.sort == "-kind"
                               and len(jobs._cursors) == 1, timeout=10)
        await loaded(app, jobs)
        assert [int(k) for k in table.keys[:5]] == last

    drive(make_app(dsn), scenario)
