"""What k9s and Oban Web users reach for: jump to a job by id, search by a payload field, pick
the sort column, copy a dialog's CLI line, saved filters, time-window charts. Driven with Pilot
against a real, seeded PostgreSQL."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from console_seed import Seeded, drive, loaded, make_app, on_screen, seed
from helpers import wait_until_async
from textual.pilot import Pilot
from textual.widgets import Input, Static

from forklift_console.app import ConsoleApp
from forklift_console.screens.help import HelpScreen
from forklift_console.screens.job import JobScreen
from forklift_console.screens.jump import JobIdError, JumpScreen, parse_job_id
from forklift_console.screens.modals import GotoScreen


@pytest.fixture
def seeded(conn: psycopg.Connection[Any]) -> Seeded:
    return seed(conn)


def text_of(widget: Static) -> str:
    return str(widget.render())


def palette_titles(app: ConsoleApp) -> list[str]:
    return [c.title for c in app.get_system_commands(app.screen)]


# -- jump to a job by id -------------------------------------------------------------------
def test_a_job_id_is_read_as_typed_and_refused_with_the_reason() -> None:
    assert parse_job_id(" 1234 ") == 1234
    assert parse_job_id("#1,234") == 1234
    for bad, words in (("", "type a job id"), ("12a", "not a job id"), ("-5", "not a job id"),
                       ("0", "out of range"), (str(2**63), "out of range")):
        with pytest.raises(JobIdError, match=words):
            parse_job_id(bad)


def test_J_jumps_to_a_job_from_any_screen_and_an_unknown_id_says_so(
    dsn: str, seeded: Seeded
) -> None:
    job = seeded.ids["dead_smtp"]

    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        await loaded(app)
        await pilot.press("J")
        jump: JumpScreen = await on_screen(app, JumpScreen)
        await pilot.press(*"12x", "enter")
        why = jump.query_one("#why", Static)
        assert "'12x' is not a job id" in text_of(why)
        assert app.screen is jump  # the dialog stays, with the reason beside the field
        jump.query_one("#job-id", Input).value = "999999"
        await pilot.press("enter")
        await wait_until_async(lambda: jump.refused is not None, timeout=10)
        assert "no job 999999" in text_of(why)
        assert app.screen is jump
        jump.query_one("#job-id", Input).value = str(job)
        await pilot.press("enter")
        shown: JobScreen = await on_screen(app, JobScreen)
        assert shown.job_id == job
        await loaded(app, shown)
        assert f"job {job}" in text_of(shown.query_one("#head", Static))
        await pilot.press("escape")
        assert app.current_mode == "overview" and not isinstance(app.screen, JobScreen)

    drive(make_app(dsn), scenario)


def test_colon_job_id_opens_the_job_and_the_key_is_in_help_and_palette(
    dsn: str, seeded: Seeded
) -> None:
    job = seeded.ids["hostile"]

    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        await loaded(app)
        assert "Jump to job id" in palette_titles(app)
        await pilot.press("question_mark")
        help_screen = await on_screen(app, HelpScreen)
        assert "Jump to job id" in text_of(help_screen.query_one("#help", Static))
        await pilot.press("escape")
        await pilot.press("colon")
        await on_screen(app, GotoScreen)
        await pilot.press(*f"job {job}", "enter")
        shown: JobScreen = await on_screen(app, JobScreen)
        assert shown.job_id == job
        await pilot.press("escape")
        await pilot.press("colon")
        await on_screen(app, GotoScreen)
        await pilot.press(*"job 77777777", "enter")
        jump: JumpScreen = await on_screen(app, JumpScreen)
        await wait_until_async(lambda: jump.refused is not None, timeout=10)
        assert "no job 77777777" in text_of(jump.query_one("#why", Static))

    drive(make_app(dsn), scenario)
