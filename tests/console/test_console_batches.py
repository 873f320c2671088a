"""The console's Batches screen (key 7), driven with Pilot against a real PostgreSQL: progress,
detail, cancel and retry-failed with confirmation (effect and audit row), read-only, drill down."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from apps import batches as bapp
from console_seed import drive, loaded, make_app, on_screen
from helpers import wait_until_async
from textual.pilot import Pilot
from textual.widgets import Button, Static

from forklift import Forklift
from forklift._features.batches import Batch, BatchLimits
from forklift_console.app import ConsoleApp
from forklift_console.screens.batches import BatchesScreen
from forklift_console.screens.jobs import JobsScreen
from forklift_console.screens.modals import ConfirmScreen
from forklift_console.widgets.table import LiveTable


@pytest.fixture
def app(dsn: str, conn: psycopg.Connection[Any]) -> Iterator[Forklift]:
    with bapp.bound(dsn, conn, BatchLimits(per_caller=5)) as bound_app:
        yield bound_app


def settle(conn: psycopg.Connection[Any], batch: Batch, states: list[str]) -> None:
    """Finish targets by index as if a worker had (the trigger does the batch's bookkeeping)."""
    for index, state in enumerate(states):
        if state in ("completed", "dead"):
            conn.execute(
                "UPDATE forklift.jobs SET state = %s, finished_at = now(),"
                " result = CASE WHEN %s = 'completed' THEN '1'::jsonb END"
                " WHERE batch_id = %s AND batch_index = %s",
                (state, state, batch.id, index),
            )


def batch_state(conn: psycopg.Connection[Any], batch_id: int) -> tuple[str, Any]:
    row = conn.execute("SELECT state, cancel_requested_at FROM forklift.batches WHERE id = %s",
                       (batch_id,)).fetchone()
    assert row is not None
    return str(row[0]), row[1]


def audit(conn: psycopg.Connection[Any]) -> list[tuple[Any, ...]]:
    return conn.execute("SELECT actor, action, target, count FROM forklift.audit ORDER BY id"
                        ).fetchall()


async def batches_screen(app: ConsoleApp, pilot: Pilot[None]) -> BatchesScreen:
    screen = await on_screen(app, BatchesScreen)
    await loaded(app, screen)
    return screen


def test_batches_screen_shows_progress_and_cancels_after_confirmation(
    app: Forklift, dsn: str, conn: psycopg.Connection[Any]
) -> None:
    old, _ = app.batch("batch.step", [{"n": i} for i in range(4)], caller="svc-a")
    settle(conn, old, ["completed", "dead", "completed", "completed"])
    running, _ = app.batch("batch.step", [{"n": i} for i in range(10)], caller="svc-b",
                           mode="serial")
    settle(conn, running, ["completed", "completed", "completed"])

    async def scenario(console: ConsoleApp, pilot: Pilot[None]) -> None:
        screen = await batches_screen(console, pilot)
        table = screen.query_one("#batches", LiveTable)
        assert table.keys == [str(running.id), str(old.id)]  # newest first
        progress = table.cell_value(str(running.id), "progress").plain
        assert progress.startswith("████") and "3✔ 0✖ /10" in progress
        assert "1✖" in table.cell_value(str(old.id), "progress").plain
        assert "partial" in table.cell_value(str(old.id), "state").plain
        await loaded(console, screen)
        detail = str(screen.query_one("#detail", Static).render())
        assert f"batch {running.id}" in detail and "serial" in detail and "waiting" in detail
        assert "1 live batch" in str(screen.query_one("#info", Static).render())

        await pilot.press("C")
        dialog = await on_screen(console, ConfirmScreen)
        assert dialog.plan.title == "Cancel 1 batch?" and dialog.plan.ids == (running.id,)
        # 17.6: the CLI would run in a script (--yes), and the dialog says how many targets
        # it cancels and what happens to the rest.
        assert dialog.plan.cli == f"forklift batches cancel --yes {running.id}"
        scope = str(dialog.query_one("#scope", Static).render())
        # The released target is available, not running: it ends now with the held ones.
        assert "7 waiting targets end cancelled now" in scope
        assert "0 running targets finish and keep their results" in scope
        assert "3 already settled" in scope
        assert not dialog.plan.typed
        await wait_until_async(lambda: console.focused is dialog.query_one("#confirm", Button),
                               timeout=10)
        await pilot.press("escape")  # esc backs out: nothing happens
        await on_screen(console, BatchesScreen)
        assert batch_state(conn, running.id) == ("running", None)

        await pilot.press("C")
        dialog = await on_screen(console, ConfirmScreen)
        dialog.query_one("#confirm", Button).press()
        await on_screen(console, BatchesScreen)
        await wait_until_async(lambda: batch_state(conn, running.id)[0] == "cancelled",
                               timeout=20)  # the action runs in a worker thread
        await loaded(console, screen)
        assert "cancelled" in table.cell_value(str(running.id), "state").plain

    drive(make_app(dsn, start="batches"), scenario)
    assert audit(conn) == [("tester", "cancel batch", {"batch": running.id}, 7)]


def test_batches_screen_retries_failed_targets_and_drills_down(
    app: Forklift, dsn: str, conn: psycopg.Connection[Any]
) -> None:
    batch, _ = app.batch("batch.step", [{"n": i} for i in range(3)], caller="svc-c")
    settle(conn, batch, ["completed", "dead", "dead"])
    assert batch_state(conn, batch.id)[0] == "partial"

    async def scenario(console: ConsoleApp, pilot: Pilot[None]) -> None:
        screen = await batches_screen(console, pilot)
        await pilot.press("r")
        dialog = await on_screen(console, ConfirmScreen)
        assert dialog.plan.cli == f"forklift batches retry-failed --yes {batch.id}"
        dialog.query_one("#confirm", Button).press()
        await on_screen(console, BatchesScreen)
        await wait_until_async(lambda: batch_state(conn, batch.id)[0] == "running", timeout=20)
        await loaded(console, screen)
        await pilot.press("enter")
        jobs = await on_screen(console, JobsScreen)
        await loaded(console, jobs)
        assert len(jobs.query_one("#jobs", LiveTable).keys) == 3

    drive(make_app(dsn, start="batches"), scenario)
    assert bapp.target_states(conn, batch.id) == ["completed", "available", "available"]
    assert audit(conn) == [("tester", "retry batch", {"batch": batch.id}, 2)]


def test_batches_screen_in_read_only_mode_offers_no_actions(
    app: Forklift, dsn: str, conn: psycopg.Connection[Any]
) -> None:
    batch, _ = app.batch("batch.step", [{"n": 0}, {"n": 1}], caller="svc-d")

    async def scenario(console: ConsoleApp, pilot: Pilot[None]) -> None:
        screen = await batches_screen(console, pilot)
        assert screen.check_action("cancel", ()) is None
        await pilot.press("C")
        await pilot.pause()
        assert isinstance(console.screen, BatchesScreen)

    drive(make_app(dsn, start="batches", read_only=True), scenario)
    assert batch_state(conn, batch.id) == ("running", None)
    assert audit(conn) == []
