"""The console's Workflows screen (command palette: Go to Workflows), with Pilot against a real
PostgreSQL: outbox topics with pending and dead counts, messages, events, and a retry of a
topic's dead messages after confirmation (effect and audit row)."""

from __future__ import annotations

from typing import Any

import psycopg
from console_seed import drive, loaded, make_app, on_screen
from helpers import wait_until_async
from textual.pilot import Pilot
from textual.widgets import Button, Static

from forklift import Forklift
from forklift_console.app import ConsoleApp
from forklift_console.screens.modals import ConfirmScreen
from forklift_console.screens.workflows import WorkflowsScreen
from forklift_console.widgets.table import LiveTable


def test_workflows_screen_shows_the_outbox_and_events_and_retries_a_topic(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    app = Forklift(dsn)
    try:
        ok = app.outbox.publish("orders.paid", {"order": 1})
        dead = app.outbox.publish("orders.paid", {"order": 2})
        app.outbox.publish("mail.sent", {"to": "x"})
        conn.execute("UPDATE forklift.outbox SET state = 'dead', attempts = 10, last_error ="
                     " '{\"code\": \"delivery_failed\", \"message\": \"boom\"}' WHERE id = %s",
                     (dead,))
        event = app.publish_event("order.paid", {"order": 1})
    finally:
        app.close()

    async def scenario(console: ConsoleApp, pilot: Pilot[None]) -> None:
        console.switch_mode("workflows")
        screen = await on_screen(console, WorkflowsScreen)
        await loaded(console, screen)
        topics = screen.query_one("#topics", LiveTable)
        assert topics.keys == ["mail.sent", "orders.paid"]
        assert topics.cell_value("orders.paid", "dead").plain == "1"
        messages = screen.query_one("#messages", LiveTable)
        assert str(dead) in messages.keys and str(ok) in messages.keys
        assert "boom" in messages.cell_value(str(dead), "error").plain
        assert screen.query_one("#events", LiveTable).keys == [str(event.id)]
        assert "1 dead" in str(screen.query_one("#info", Static).render())

        topics.focus()
        topics.move_cursor(row=1)
        await pilot.press("r")
        dialog = await on_screen(console, ConfirmScreen)
        assert dialog.plan.cli == "forklift outbox retry --topic orders.paid --yes"
        dialog.query_one("#confirm", Button).press()
        await on_screen(console, WorkflowsScreen)
        await wait_until_async(lambda: conn.execute(
            "SELECT state FROM forklift.outbox WHERE id = %s", (dead,)).fetchone() == ("pending",),
            timeout=20)

    drive(make_app(dsn, start="overview"), scenario)
    assert conn.execute("SELECT actor, action FROM forklift.audit").fetchall() == [
        ("tester", "outbox.retry")]
