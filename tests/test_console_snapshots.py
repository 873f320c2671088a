"""Snapshots of every console screen at 120x36 and 80x24, plus dialogs and NO_COLOR.

Deterministic: a fresh database (fixed ids) seeded relative to a frozen instant, the console's
clock frozen at that instant, and the database's ``now()`` frozen there too, so the server's
windows, ages and countdowns agree with it. Refresh ticks are an hour apart; each snapshot is
taken once its screen has loaded. Update with ``pytest --snapshot-update`` after a deliberate
change, and look at the SVGs before committing them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import psycopg
import pytest
from console_seed import Seeded, freeze_db_clock, make_app, on_screen, seed
from helpers import wait_until_async
from textual.pilot import Pilot

from forklift.console.screens.base import ConsoleScreen
from forklift.console.screens.job import JobScreen
from forklift.console.widgets.table import LiveTable

SIZES = {"120x36": (120, 36), "80x24": (80, 24)}
SCREENS = ("overview", "queues", "jobs", "dead", "workers", "audit")
#: The row each list screen highlights, so its lower pane has something to say.
HIGHLIGHT = {"queues": "mail", "workers": "web-2:5151:b2"}


@pytest.fixture
def frozen(dsn: str, conn: psycopg.Connection[Any]) -> tuple[str, Seeded]:
    seeded = seed(conn)
    freeze_db_clock(conn)
    return dsn, seeded


async def settled(pilot: Pilot[None]) -> ConsoleScreen[Any]:
    app = pilot.app
    await wait_until_async(
        lambda: isinstance(app.screen, ConsoleScreen) and app.screen.loads > 0
        and not app.screen._loading,
        timeout=30,
        message=lambda: f"{app.screen!r} never loaded",
    )
    screen = app.screen
    assert isinstance(screen, ConsoleScreen)
    return screen


def highlight(mode: str) -> Callable[[Pilot[None]], Awaitable[None]]:
    async def run_before(pilot: Pilot[None]) -> None:
        screen = await settled(pilot)
        key = HIGHLIGHT.get(mode)
        if key is not None:
            table = screen.query(LiveTable).first()
            table.focus()
            assert table.move_to_key(key)
        await pilot.pause()

    return run_before


@pytest.mark.parametrize("size", list(SIZES), ids=list(SIZES))
@pytest.mark.parametrize("mode", SCREENS)
def test_screen(snap_compare: Any, frozen: tuple[str, Seeded], mode: str, size: str) -> None:
    dsn, _ = frozen
    assert snap_compare(make_app(dsn, start=mode), terminal_size=SIZES[size],
                        run_before=highlight(mode))


def detail_of(job_id: int) -> Callable[[Pilot[None]], Awaitable[None]]:
    async def run_before(pilot: Pilot[None]) -> None:
        await settled(pilot)
        pilot.app.push_screen(JobScreen(job_id))
        await on_screen(pilot.app, JobScreen)
        await settled(pilot)

    return run_before


@pytest.mark.parametrize("size", list(SIZES), ids=list(SIZES))
def test_job_detail(snap_compare: Any, frozen: tuple[str, Seeded], size: str) -> None:
    dsn, seeded = frozen
    assert snap_compare(make_app(dsn, start="jobs"), terminal_size=SIZES[size],
                        run_before=detail_of(seeded.ids["progress"]))


def test_dead_job_detail_with_hostile_text(snap_compare: Any, frozen: tuple[str, Seeded]) -> None:
    dsn, seeded = frozen
    assert snap_compare(make_app(dsn, start="jobs"), terminal_size=(120, 36),
                        run_before=detail_of(seeded.ids["hostile"]))


def test_help(snap_compare: Any, frozen: tuple[str, Seeded]) -> None:
    dsn, _ = frozen

    async def run_before(pilot: Pilot[None]) -> None:
        await settled(pilot)
        await pilot.press("question_mark")

    assert snap_compare(make_app(dsn, start="jobs"), terminal_size=(120, 36),
                        run_before=run_before)


def test_typed_confirmation_of_a_dead_letter_group(
    snap_compare: Any, frozen: tuple[str, Seeded]
) -> None:
    dsn, _ = frozen

    async def run_before(pilot: Pilot[None]) -> None:
        screen = await settled(pilot)
        screen.query_one(LiveTable).focus()
        await pilot.press("r")

    assert snap_compare(make_app(dsn, start="dead"), terminal_size=(80, 24),
                        run_before=run_before)


def test_read_only_overview(snap_compare: Any, frozen: tuple[str, Seeded]) -> None:
    dsn, _ = frozen
    assert snap_compare(make_app(dsn, start="queues", read_only=True), terminal_size=(80, 24),
                        run_before=highlight("queues"))


def test_no_color(
    snap_compare: Any, frozen: tuple[str, Seeded], monkeypatch: pytest.MonkeyPatch
) -> None:
    dsn, _ = frozen
    monkeypatch.setenv("NO_COLOR", "1")
    assert snap_compare(make_app(dsn, start="overview"), terminal_size=(120, 36),
                        run_before=highlight("overview"))
