"""Identifiers that hide characters: the console shows them with visible escapes,
and a dialog, its CLI line and the action all name exactly the object the operator picked."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from console_seed import SCHEMA, drive, loaded, make_app, on_screen
from helpers import wait_until_async
from textual.pilot import Pilot
from textual.widgets import Input

from forklift.ops.display import shell_quote
from forklift_console.app import ConsoleApp
from forklift_console.screens.modals import ReasonScreen
from forklift_console.screens.queues import QueuesScreen
from forklift_console.widgets.table import LiveTable

REAL = "mail"
FAKES = ("mail\x1b[0m", "mail\u200b")


def paused(conn: psycopg.Connection[Any]) -> dict[str, bool]:
    rows = conn.execute(f"SELECT name, paused FROM {SCHEMA}.queues").fetchall()
    return {str(n): bool(p) for n, p in rows}


@pytest.mark.parametrize("fake", FAKES, ids=["escape", "zero-width"])
def test_the_pause_dialog_shows_and_acts_on_the_queue_picked(
    dsn: str, conn: psycopg.Connection[Any], fake: str
) -> None:
    for name in (REAL, *FAKES):  # already stored, as before names were checked at enqueue
        conn.execute(f"INSERT INTO {SCHEMA}.jobs (queue, kind) VALUES (%s, 'demo.fast')", (name,))

    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        screen = await on_screen(app, QueuesScreen)
        await loaded(app, screen)
        table = screen.query_one("#queues", LiveTable)
        shown = [table.cell_value(k, "queue").plain for k in table.keys]
        assert len(set(shown)) == 3, shown  # three queues, three different looks
        assert "mail\\x1b[0m" in shown and "mail\\u200b" in shown and "mail" in shown
        assert not any("\x1b" in s or "\u200b" in s for s in shown)
        table.focus()
        assert table.move_to_key(fake)
        await pilot.press("p")
        dialog = await on_screen(app, ReasonScreen)
        title = str(dialog.query_one("#title").render())
        assert title.startswith("Pause queue mail\\") and "\x1b" not in title
        cli_line = str(dialog.query_one("#cli").render())
        assert shell_quote(fake) in cli_line and shell_quote(fake).startswith("$'")
        assert isinstance(app.focused, Input)
        await pilot.press("enter")
        await wait_until_async(lambda: paused(conn).get(fake) is True, timeout=20)
        await wait_until_async(lambda: app.last_command is not None, timeout=10)
        assert app.last_command == f"forklift queues pause {shell_quote(fake)}"

    drive(make_app(dsn, start="queues"), scenario)
    assert paused(conn) == {REAL: False, FAKES[0]: fake == FAKES[0], FAKES[1]: fake == FAKES[1]}
    audited = conn.execute(f"SELECT target->>'queue' FROM {SCHEMA}.audit").fetchall()
    assert audited == [(fake,)]
