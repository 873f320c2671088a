"""Navigation: every screen is named in the tab bar, the help, the palette and under ``:name``;
keys typed quickly after ``:`` are kept; home and end move on every list; tab leads to the
same pane whatever an earlier visit left focused; a drill-down shows the list it asked for."""

from __future__ import annotations

import io
from typing import Any

import psycopg
import pytest
from console_seed import Seeded, drive, loaded, make_app, on_screen, seed, seed_long_runs
from helpers import wait_until_async
from rich.console import Console
from textual.pilot import Pilot
from textual.widgets import Static

from forklift_console.app import ConsoleApp
from forklift_console.screens.base import ConsoleScreen
from forklift_console.screens.help import HelpScreen
from forklift_console.screens.job import JobScreen
from forklift_console.screens.jobs import JobsScreen
from forklift_console.screens.modals import PickScreen
from forklift_console.widgets.header import MORE_SCREENS, TABS, TabBar
from forklift_console.widgets.table import LiveTable

EVERY_MODE = [m for m, _, _ in TABS] + [m for m, _ in MORE_SCREENS]


def tab_line(app: ConsoleApp) -> str:
    return str(app.screen.query_one(TabBar).content)


def plain_text(widget: Static) -> str:
    """What a Static holds, as plain text (a Rich group or grid included)."""
    out = Console(width=200, record=True, file=io.StringIO())
    out.print(widget.content)
    return out.export_text()


@pytest.fixture
def seeded(conn: psycopg.Connection[Any]) -> Seeded:
    seeded = seed(conn)
    seeded.ids.update(seed_long_runs(conn).ids)
    return seeded


async def arrived(app: ConsoleApp, mode: str) -> ConsoleScreen[Any]:
    await wait_until_async(lambda: app.current_mode == mode, timeout=10,
                           message=lambda: f"on {app.current_mode}, not {mode}: "
                           f"{[n.message for n in app._notifications]} {app.screen_stack}"
                           f" {[(i.value, i.has_focus) for i in app.screen.query('Input')]}")
    screen = app.screen
    assert isinstance(screen, ConsoleScreen)
    await loaded(app, screen)
    return screen


def test_every_screen_answers_to_its_name_typed_ahead(dsn: str, seeded: Seeded) -> None:
    """``:health⏎`` typed in one burst (the field is not focused yet when the letters come)
    goes to Health; so does every other screen's name."""

    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        assert {"flow", "health", "workflows"} <= set(EVERY_MODE)
        for mode in ("health", "flow", "workflows", *EVERY_MODE):
            if mode == app.current_mode:
                continue
            await pilot.press("colon", *mode, "enter")
            await arrived(app, mode)
            tabs = tab_line(app)
            assert f"{mode}]" in tabs or f"{dict(MORE_SCREENS).get(mode, '')}]" in tabs \
                or any(f"[{k} {lbl}]" in tabs for m, k, lbl in TABS if m == mode), tabs

    drive(make_app(dsn), scenario, size=(120, 36))


@pytest.mark.parametrize("size", [(80, 24), (120, 36)])
def test_the_tab_bar_names_every_screen_or_counts_the_rest(
    dsn: str, seeded: Seeded, size: tuple[int, int]
) -> None:
    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        await loaded(app, await on_screen(app, ConsoleScreen))
        for mode in ("flow", "retries"):
            app.action_go(mode)
            await arrived(app, mode)
            tabs = tab_line(app)
            assert len(tabs.rstrip()) <= size[0]
            assert "│" in tabs, tabs  # the groups
            assert "[0 Flow control]" in tabs if mode == "flow" else "[:retries]" in tabs, tabs
            # Screens left out are counted, and ":" names them.
            shown = sum(f":{m}" in tabs for m, _ in MORE_SCREENS)
            if shown < 5:
                assert " +" in tabs and " :" in tabs, tabs

    drive(make_app(dsn), scenario, size=size)


def test_help_and_palette_name_every_screen(dsn: str, seeded: Seeded) -> None:
    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        screen = await on_screen(app, ConsoleScreen)
        await loaded(app, screen)
        titles = [c.title for c in app.get_system_commands(screen)]
        for mode, label in [(m, lbl) for m, _, lbl in TABS] + list(MORE_SCREENS):
            assert f"Go to {label}" in titles, (mode, titles)
        assert "Keys" not in titles  # Textual's panel of its internals
        await pilot.press("question_mark")
        help_screen = await on_screen(app, HelpScreen)
        text = " ".join(plain_text(s) for s in help_screen.query(Static))
        for mode in EVERY_MODE:
            assert f":{mode}" in text, mode
        assert "Focus Next" not in text and "super" not in text

    drive(make_app(dsn), scenario, size=(120, 36))


def test_every_help_box_names_its_own_screen(dsn: str, seeded: Seeded) -> None:
    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        titles = set()
        for mode in ("retries", "scheduled", "kinds", "flow", "workflows"):
            app.action_go(mode)
            await arrived(app, mode)
            await pilot.press("question_mark")
            help_screen = await on_screen(app, HelpScreen)
            first = plain_text(help_screen.query_one("#help", Static)).splitlines()[0]
            titles.add(first)
            await pilot.press("escape")
        assert len(titles) == 5, titles

    drive(make_app(dsn), scenario, size=(120, 36))


@pytest.mark.parametrize("mode", ["queues", "workers", "batches", "jobs", "audit"])
def test_home_and_end_move_on_every_list(dsn: str, seeded: Seeded, mode: str) -> None:
    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        screen = await arrived(app, mode)
        table = screen.query(LiveTable).first()
        table.focus()
        await pilot.pause()
        assert table.row_count > 1
        await pilot.press("end")
        assert table.cursor_row == table.row_count - 1
        await pilot.press("home")
        assert table.cursor_row == 0

    drive(make_app(dsn, start=mode), scenario)


def test_tab_leads_to_the_same_pane_whatever_an_earlier_visit_left(
    dsn: str, seeded: Seeded
) -> None:
    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        await pilot.press("3")
        await arrived(app, "jobs")
        await pilot.pause()
        first_tab = None
        for _ in range(2):
            await pilot.press("tab")
            await pilot.pause()
            first_tab = first_tab or app.focused
            assert app.focused is first_tab
            # The focus is left where tab put it; another screen, then back.
            app.action_go("queues")
            await arrived(app, "queues")
            app.action_go("jobs")
            await arrived(app, "jobs")
            await pilot.pause()
            assert isinstance(app.focused, LiveTable)

    drive(make_app(dsn), scenario)


def test_enter_on_a_queue_shows_its_jobs_not_a_detail_left_open(
    dsn: str, seeded: Seeded
) -> None:
    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        await pilot.press("3")
        jobs = await arrived(app, "jobs")
        jobs.query(LiveTable).first().focus()
        await pilot.press("enter")
        await on_screen(app, JobScreen)  # a detail left open on the jobs screen
        await pilot.press("2")
        queues = await arrived(app, "queues")
        queues.query(LiveTable).first().focus()
        await pilot.press("enter")
        await wait_until_async(lambda: isinstance(app.screen, JobsScreen), timeout=10,
                               message=lambda: f"on {app.screen!r}")
        assert app.screen is jobs
        assert jobs.filter_text.startswith("queue:")

    drive(make_app(dsn), scenario)


def test_a_palette_write_action_in_read_only_says_why_and_opens_no_picker(
    dsn: str, seeded: Seeded
) -> None:
    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        screen = await on_screen(app, ConsoleScreen)
        await loaded(app, screen)
        queues = app.views["queues"]
        app._palette_action("queues", queues, "toggle_pause", "Queues: Pause/resume")
        await pilot.pause()
        assert not isinstance(app.screen, PickScreen)
        assert any("read-only" in str(n.message) for n in app._notifications)

    drive(make_app(dsn, read_only=True), scenario)
