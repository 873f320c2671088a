"""No key fails silently: enter on any row opens it or says why, naming the cause; every
dialog confirms with enter and focuses what comes next; the batch-cancel dialog counts the
targets that really run."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from console_seed import SCHEMA, Seeded, drive, loaded, make_app, on_screen, seed, seed_long_runs
from helpers import wait_until_async
from textual.pilot import Pilot
from textual.widgets import Button, Static

from forklift_console.app import ConsoleApp
from forklift_console.screens.base import ConsoleScreen
from forklift_console.screens.job import JobScreen
from forklift_console.screens.modals import ConfirmScreen
from forklift_console.widgets.table import LiveTable


@pytest.fixture
def seeded(conn: psycopg.Connection[Any]) -> Seeded:
    seeded = seed(conn)
    seeded.ids.update(seed_long_runs(conn).ids)
    return seeded


def messages(app: ConsoleApp) -> list[str]:
    """Every notification so far (Textual drops them from the screen after a while)."""
    return getattr(app, "said", [])


def record(app: ConsoleApp) -> None:
    said: list[str] = []
    notify = app.notify

    def recording(message: str, *args: Any, **kw: Any) -> None:
        said.append(str(message))
        notify(message, *args, **kw)

    app.said = said  # type: ignore[attr-defined]
    app.notify = recording  # type: ignore[method-assign]


async def said(app: ConsoleApp, words: str) -> None:
    await wait_until_async(lambda: any(words in m for m in messages(app)), timeout=10,
                           message=lambda: f"no message with {words!r}: {messages(app)}")


async def start(app: ConsoleApp, pilot: Pilot[None]) -> tuple[ConsoleScreen[Any], LiveTable]:
    record(app)
    screen = await on_screen(app, ConsoleScreen)
    await loaded(app, screen)
    table = next(t for t in screen.query(LiveTable) if t.display)
    table.focus()
    await pilot.pause()
    return screen, table


def test_enter_on_an_audit_row_says_there_is_nothing_behind_it(dsn: str, seeded: Seeded) -> None:
    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        _, table = await start(app, pilot)
        assert table.row_count > 0
        await pilot.press("enter")
        await said(app, "an audit entry is shown whole")
        assert not any("does not apply to what is shown now" in m for m in messages(app))

    drive(make_app(dsn, start="audit"), scenario)


def test_enter_on_an_empty_list_names_the_cause(dsn: str, seeded: Seeded) -> None:
    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        _, table = await start(app, pilot)
        await pilot.press("slash", *"nosuchqueue", "enter")
        await wait_until_async(lambda: table.row_count == 0, timeout=10)
        table.focus()
        await pilot.pause()
        await pilot.press("enter")
        await said(app, "the filter hides all")
        await pilot.press("p")  # a row key, with no row
        await wait_until_async(lambda: sum("the filter hides" in m
                                           for m in messages(app)) >= 2, timeout=10,
                               message=lambda: str(messages(app)))

    drive(make_app(dsn, start="queues"), scenario)


def test_a_confirm_dialog_confirms_with_enter(
    dsn: str, seeded: Seeded, conn: psycopg.Connection[Any]
) -> None:
    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        await start(app, pilot)
        await pilot.press("enter")
        job = await on_screen(app, JobScreen)
        await loaded(app, job)
        state = conn.execute(f"SELECT state FROM {SCHEMA}.jobs WHERE id = %s",
                             (job.job_id,)).fetchone()
        assert state is not None
        key = "C" if state[0] in ("available", "scheduled", "retryable", "running") else "D"
        await pilot.press(key)
        dialog = await on_screen(app, ConfirmScreen)
        labels = [str(b.label) for b in dialog.query(Button)]
        assert labels[0] == "Back (esc)" and labels[1].endswith("1 job (⏎)"), labels
        assert dialog.focused is dialog.query_one("#confirm", Button)
        await pilot.press("enter")
        await wait_until_async(lambda: not isinstance(app.screen, ConfirmScreen), timeout=10)
        await wait_until_async(
            lambda: (row := conn.execute(
                f"SELECT state, cancel_requested_at FROM {SCHEMA}.jobs WHERE id = %s",
                (job.job_id,)).fetchone()) is None or row != (state[0], None),
            timeout=10, message="enter did not confirm")

    drive(make_app(dsn, start="jobs"), scenario)


def test_batch_cancel_counts_the_targets_that_really_run(
    dsn: str, seeded: Seeded, conn: psycopg.Connection[Any]
) -> None:
    row = conn.execute(f"SELECT id, total - completed - failed - cancelled FROM {SCHEMA}.batches"
                       " WHERE kind = 'images.resize'").fetchone()
    assert row is not None
    batch_id, remaining = row
    running = conn.execute(f"SELECT count(*) FROM {SCHEMA}.jobs WHERE batch_id = %s"
                           " AND state = 'running'", (batch_id,)).fetchone()
    assert running is not None and running[0] == 3  # 8 released, 3 of them running

    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        _, table = await start(app, pilot)
        assert table.move_to_key(str(batch_id))
        await pilot.pause()
        await pilot.press("C")
        dialog = await on_screen(app, ConfirmScreen)
        scope = str(dialog.query_one("#scope", Static).render())
        assert "3 running targets" in scope, scope
        assert f"{remaining - 3:,} waiting targets" in scope, scope

    drive(make_app(dsn, start="batches"), scenario)
