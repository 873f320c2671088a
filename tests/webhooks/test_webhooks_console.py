"""The console's webhooks screen against a real database: endpoint health (last status,
failure streak, why disabled), and enable/disable that act through the operator API, audited."""

from __future__ import annotations

from typing import Any

import psycopg
from console_seed import drive, loaded, make_app, on_screen
from helpers import wait_until_async
from textual.pilot import Pilot
from textual.widgets import Button

from forklift_console.app import ConsoleApp
from forklift_console.screens.modals import ConfirmScreen
from forklift_console.screens.webhooks import WebhooksScreen
from forklift_console.widgets.table import LiveTable


def seed(conn: psycopg.Connection[Any]) -> None:
    conn.execute(
        "INSERT INTO forklift.webhook_endpoints (name, url, enabled, disabled_reason, disabled_by,"
        " disabled_at, last_status, failure_streak, failed, last_at) VALUES"
        " ('billing', 'https://billing.example/h', false, 'the endpoint answered 410',"
        "  'forklift:webhooks', now(), 410, 1, 1, now()),"
        " ('crm', 'https://crm.example/h', true, NULL, NULL, NULL, 503, 6, 6, now())")


def enabled(conn: psycopg.Connection[Any], name: str) -> bool:
    row = conn.execute("SELECT enabled FROM forklift.webhook_endpoints WHERE name = %s",
                       (name,)).fetchone()
    return bool(row and row[0])


def test_the_screen_shows_health_and_enables_and_disables(
        dsn: str, conn: psycopg.Connection[Any]) -> None:
    seed(conn)

    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        screen = await on_screen(app, WebhooksScreen)
        await loaded(app, screen)
        table = screen.query_one("#webhooks", LiveTable)
        assert table.keys == ["billing", "crm"]
        detail = str(screen.query_one("#detail").render())
        assert "disabled by forklift:webhooks" in detail and "answered 410" in detail
        await pilot.press("d")  # billing is disabled already: the key says why not
        assert not isinstance(app.screen, ConfirmScreen)
        await pilot.press("e")
        await wait_until_async(lambda: enabled(conn, "billing"), timeout=20,
                               message="billing was enabled")
        await wait_until_async(lambda: app.last_command == "forklift webhooks enable billing",
                               timeout=10)
        await pilot.press("down")
        await wait_until_async(lambda: table.current_key == "crm", timeout=10)
        detail = str(screen.query_one("#detail").render())
        assert "6 failed in a row" in detail
        await pilot.press("d")
        dialog = await on_screen(app, ConfirmScreen)
        dialog.query_one("#confirm", Button).press()
        await wait_until_async(lambda: not enabled(conn, "crm"), timeout=20,
                               message="crm was disabled")

    drive(make_app(dsn, start="webhooks"), scenario)
    got = conn.execute("SELECT actor, action, target FROM forklift.audit ORDER BY id").fetchall()
    assert got == [("tester", "webhooks.enable", {"endpoint": "billing"}),
                   ("tester", "webhooks.disable", {"endpoint": "crm"})]


def test_read_only_does_not_act(dsn: str, conn: psycopg.Connection[Any]
                                                    ) -> None:
    seed(conn)

    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        screen = await on_screen(app, WebhooksScreen)
        await loaded(app, screen)
        await pilot.press("e")
        assert not isinstance(app.screen, ConfirmScreen)

    drive(make_app(dsn, start="webhooks", read_only=True), scenario)
    assert not enabled(conn, "billing")
