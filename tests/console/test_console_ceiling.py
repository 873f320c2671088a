"""The Queues screen shows a full queue (past its ceiling) in words, not colour alone: its
state reads 'full', the detail names the ceiling and what happens to enqueues, and the help
explains the state."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from console_seed import SCHEMA, Seeded, drive, make_app, seed
from test_console_views import open_queues, plain
from textual.pilot import Pilot
from textual.widgets import Static

from forklift_console.app import ConsoleApp
from forklift_console.screens.help import LEGEND_WORDS
from forklift_console.screens.queues import QueuesScreen
from forklift_console.widgets.table import LiveTable


@pytest.fixture
def seeded(conn: psycopg.Connection[Any]) -> Seeded:
    return seed(conn)


def test_a_full_queue_reads_full_with_its_ceiling(
        dsn: str, conn: psycopg.Connection[Any], seeded: Seeded) -> None:
    conn.execute(f"INSERT INTO {SCHEMA}.queues (name, ceiling_depth, full_by, measured_depth,"
                 " measured_at) VALUES ('mail', 2, 'depth', 3, now())"
                 " ON CONFLICT (name) DO UPDATE SET ceiling_depth = 2, full_by = 'depth',"
                 " measured_depth = 3, measured_at = now()")
    # live workers listen on both (a queue no live worker takes reads 'no worker' first)
    conn.execute(f"UPDATE {SCHEMA}.workers SET heartbeat_at = now(), state = 'running'")
    conn.execute(f"INSERT INTO {SCHEMA}.queues (name, ceiling_age) VALUES ('reports', 300)"
                 " ON CONFLICT (name) DO UPDATE SET ceiling_age = 300")

    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        queues: QueuesScreen = await open_queues(app, pilot)
        table = queues.query_one("#queues", LiveTable)
        assert table.move_to_key("mail")
        await pilot.pause()
        row = " ".join(str(c) for c in table.get_row("mail"))
        assert "full" in row  # the state in words
        detail = plain(queues.query_one("#detail", Static))
        assert "Ceiling: depth 2" in detail and "full (past its depth ceiling)" in detail
        assert "enqueues are refused" in detail
        assert table.move_to_key("reports")
        await pilot.pause()
        detail = plain(queues.query_one("#detail", Static))
        assert "Ceiling: age 300s — room" in detail
        assert "full" not in " ".join(str(c) for c in table.get_row("reports"))

    drive(make_app(dsn, read_only=True), scenario)
    assert "ceiling" in LEGEND_WORDS[("queues", "full")]
    assert "full" in QueuesScreen.HELP and "forklift queues ceiling" in QueuesScreen.HELP
