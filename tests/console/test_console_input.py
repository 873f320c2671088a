"""Input checked as it is typed, the error beside its field, nothing typed lost: a reason over
the operator API's 500 characters, a rate of ``10/0s``, a filter typed with its ``/`` or a
state word that is not a state."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from console_seed import Seeded, drive, loaded, make_app, on_screen, seed
from textual.pilot import Pilot
from textual.widgets import Button, Input, Static

from forklift.ops.filters import MAX_TEXT
from forklift_console.app import ConsoleApp
from forklift_console.screens.base import ConsoleScreen
from forklift_console.screens.flow import ValueScreen
from forklift_console.screens.forms import parse_rate
from forklift_console.screens.modals import ReasonScreen
from forklift_console.widgets.filterbar import FilterError, parse
from forklift_console.widgets.table import LiveTable


def test_a_filter_typed_with_its_slash_is_the_same_filter() -> None:
    assert parse("/state:dead") == parse("state:dead")
    assert parse("/state:dead").states == ("dead",)


@pytest.mark.parametrize(("word", "hint"), [("waiting", "state:scheduled"),
                                            ("failed", "state:dead"),
                                            ("Dead", "state:dead")])
def test_a_state_word_that_is_not_a_state_says_which_is(word: str, hint: str) -> None:
    with pytest.raises(FilterError, match=hint):
        parse(f"state:{word}")


def test_a_rate_is_checked_as_the_api_would() -> None:
    assert parse_rate("100/s") == "100/s"
    assert parse_rate("none") is None
    for bad in ("10/0s", "x", "0/s", ""):
        with pytest.raises(ValueError):
            parse_rate(bad)


@pytest.fixture
def seeded(conn: psycopg.Connection[Any]) -> Seeded:
    return seed(conn)


def test_a_long_reason_is_refused_beside_its_field_and_kept(dsn: str, seeded: Seeded) -> None:
    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        screen = await on_screen(app, ConsoleScreen)
        await loaded(app, screen)
        table = screen.query(LiveTable).first()
        table.focus()
        await pilot.pause()
        await pilot.press("p")
        dialog = await on_screen(app, ReasonScreen)
        long = "x" * (MAX_TEXT + 12)
        dialog.query_one("#reason", Input).value = long
        await pilot.pause()
        error = dialog.query_one("#reason-error", Static)
        assert error.display and f"{MAX_TEXT + 12:,} characters" in str(error.render())
        assert dialog.query_one("#confirm", Button).disabled
        dialog.query_one("#reason", Input).focus()
        await pilot.press("enter", "enter")
        await pilot.pause()
        assert app.screen is dialog  # nothing ran, nothing lost
        assert dialog.query_one("#reason", Input).value == long
        dialog.query_one("#reason", Input).value = "outage"
        await pilot.pause()
        assert not error.display and not dialog.query_one("#confirm", Button).disabled

    drive(make_app(dsn, start="queues"), scenario)


def test_a_rate_of_ten_per_zero_seconds_is_refused_as_typed(dsn: str, seeded: Seeded) -> None:
    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        await loaded(app, await on_screen(app, ConsoleScreen))
        dialog = ValueScreen("Rate of queue mail", "", "none", lambda v: f"set {v}", parse_rate)
        app.push_screen(dialog)
        await on_screen(app, ValueScreen)
        await pilot.press(*"10/0s")
        error = dialog.query_one("#value-error", Static)
        assert error.display and "period" in str(error.render())
        assert dialog.query_one("#confirm", Button).disabled
        await pilot.press("enter")
        assert app.screen is dialog
        assert dialog.query_one("#value", Input).value == "10/0s"
        await pilot.press("backspace", "backspace", "s")  # 10/s
        assert not error.display

    drive(make_app(dsn), scenario)
