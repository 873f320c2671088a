"""No key in ``?`` is inert: on every screen, each key the help lists is pressed, and it must
act (a dialog, another screen, a reload, a changed sort, mark, focus, cursor or refresh rate)
or say why it does not (a message)."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from console_seed import Seeded, drive, loaded, make_app, seed, seed_long_runs
from helpers import wait_until_async
from textual.pilot import Pilot

from forklift_console.app import ConsoleApp
from forklift_console.screens.base import ConsoleScreen
from forklift_console.screens.help import general_keys, key_rows
from forklift_console.widgets.header import MORE_SCREENS, TABS
from forklift_console.widgets.table import LiveTable

EVERY_MODE = [m for m, _, _ in TABS] + [m for m, _ in MORE_SCREENS]


@pytest.fixture
def seeded(conn: psycopg.Connection[Any]) -> Seeded:
    seeded = seed(conn)
    seeded.ids.update(seed_long_runs(conn).ids)
    return seeded


def picture(app: ConsoleApp, screen: ConsoleScreen[Any], said: list[str]) -> tuple[Any, ...]:
    """What a key may change, as a tuple to compare before and after."""
    tables = [(t.id, t.cursor_row, repr(vars(t.ordering)), repr(vars(t.marking)),
               t.row_count) for t in screen.query(LiveTable)]
    return (len(said), len(app.screen_stack), app.current_mode, id(app.screen),
            app.focused, app.status.interval, app.status.frozen, screen.loads, app.clipboard,
            tuple(tables))


async def back_to(app: ConsoleApp, pilot: Pilot[None], mode: str, depth: int) -> None:
    while len(app.screen_stack) > depth:
        app.pop_screen()
        await pilot.pause()
    if app.current_mode != mode:
        app.action_go(mode)
        await wait_until_async(lambda: app.current_mode == mode, timeout=10)
    await pilot.pause()


@pytest.mark.parametrize("mode", EVERY_MODE)
def test_every_key_in_help_acts_or_says_why(dsn: str, seeded: Seeded, mode: str) -> None:
    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        said: list[str] = []
        notify = app.notify

        def recording(message: str, *args: Any, **kw: Any) -> None:
            said.append(str(message))
            notify(message, *args, **kw)

        app.notify = recording  # type: ignore[method-assign]
        await wait_until_async(lambda: app.current_mode == mode
                               and isinstance(app.screen, ConsoleScreen), timeout=10)
        screen = app.screen
        assert isinstance(screen, ConsoleScreen)
        await loaded(app, screen)
        depth = len(app.screen_stack)
        rows = key_rows(screen, read_only=False)
        keys = [r.key for r in rows if r.key != "q"]  # q quits: the app would end here
        assert any(r.key == "q" for r in rows)
        general = dict(general_keys(screen))
        if "home end" in general:
            keys += ["end", "home"]
        if "tab" in general:
            keys.append("tab")
        inert = []
        for key in keys:
            screen.focus_list()
            await pilot.pause()
            tables = [t for t in screen.query(LiveTable) if t.display]
            if key in ("home", "end") and tables and tables[0].row_count > 1:
                # From the other end, so that the key has somewhere to go.
                tables[0].move_cursor(row=tables[0].row_count - 1 if key == "home" else 0)
                await pilot.pause()
            before = picture(app, screen, said)
            await pilot.press(key)
            try:
                await wait_until_async(lambda b=before: picture(app, screen, said) != b,
                                       timeout=5)
            except AssertionError:
                inert.append(key)
            await back_to(app, pilot, mode, depth)
        assert not inert, f"keys on {mode} that did nothing and said nothing: {inert}"

    drive(make_app(dsn, start=mode), scenario)
