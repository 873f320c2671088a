"""The console's flow-control screen (key 0), driven with Textual's Pilot on a real database:
per queue and per key running against the limit, waiting jobs, holders, buckets; a limit or a
rate changed after a value dialog and a confirmation that show the CLI, audited; nothing to
change in read-only mode."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from apps import flow_keys
from apps.flow_keys import Work
from console_seed import SCHEMA, drive, loaded, make_app, on_screen
from textual.pilot import Pilot
from textual.widgets import Button, Input, Static

from forklift._features.flow import declare
from forklift.ops.rates import RateInfo
from forklift_console.app import ConsoleApp
from forklift_console.screens.flow import FlowScreen, ValueScreen, stepped_rate
from forklift_console.screens.modals import ConfirmScreen
from forklift_console.widgets.table import LiveTable


@pytest.fixture
def flow_db(dsn: str, conn: psycopg.Connection[Any]) -> psycopg.Connection[Any]:
    flow_keys.setup(conn)
    flow_keys.app.use(dsn)
    try:
        declare.record_sync(conn, SCHEMA, flow_keys.app)
        flow_keys.keyed.enqueue_many([Work("acme", f"a{i}") for i in range(5)])
        flow_keys.rated.enqueue_many([Work("x") for _ in range(3)])
    finally:
        flow_keys.app.close()
    # Two acme jobs are running (its tenant limit is 2) on a worker.
    conn.execute(f"UPDATE {SCHEMA}.jobs SET state = 'running', attempt = 1, worker_id = 'w1',"
                 f" fence = nextval('{SCHEMA}.fence_seq'), attempted_at = now(),"
                 " lease_expires_at = now() + interval '1 minute'"
                 f" WHERE id IN (SELECT id FROM {SCHEMA}.jobs WHERE kind = 'flow.keys.sync'"
                 " ORDER BY id LIMIT 2)")
    conn.execute(f"UPDATE {SCHEMA}.queues SET rate_limit = 100, rate_per = 1, rate_burst = 100,"
                 " flow = true WHERE name = 'rated'")
    return conn


async def flow_screen(app: ConsoleApp, pilot: Pilot[None]) -> FlowScreen:
    await pilot.press("0")
    screen = await on_screen(app, FlowScreen)
    await loaded(app, screen)
    return screen


def test_the_flow_screen_shows_queues_keys_values_and_holders(
    dsn: str, flow_db: psycopg.Connection[Any]
) -> None:
    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        screen = await flow_screen(app, pilot)
        assert screen.query_one("#flow-queues", LiveTable).keys == ["queue:keyed", "queue:rated"]
        keys = screen.query_one("#flow-keys", LiveTable)
        assert "tenant" in keys.keys and "flow.keys.rated" in keys.keys
        assert keys.move_to_key("tenant")
        await pilot.pause()
        await loaded(app, screen)
        detail = str(screen.query_one("#flow-detail", Static).render())
        assert "key tenant" in detail and "acme  2/2 running" in detail
        assert "on w1" in detail and "3 waiting" in detail
        tenant = screen._keys["tenant"]
        assert (tenant.running, tenant.queued, tenant.at_limit) == (2, 3, 1)
        rated = screen._queues["rated"]
        assert rated.rate is not None and rated.rate.text == "100/s" and rated.waiting == 3

    drive(make_app(dsn), scenario)


def test_a_key_limit_is_changed_after_the_value_and_a_confirmation_showing_the_cli(
    dsn: str, flow_db: psycopg.Connection[Any]
) -> None:
    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        screen = await flow_screen(app, pilot)
        keys = screen.query_one("#flow-keys", LiveTable)
        keys.focus()
        assert keys.move_to_key("tenant")
        await pilot.pause()
        await pilot.press("l")
        ask = await on_screen(app, ValueScreen)
        ask.query_one("#value", Input).value = "5"
        await pilot.pause()
        assert "forklift keys limit tenant 5" in str(ask.query_one("#cli", Static).render())
        await pilot.press("enter")
        dialog = await on_screen(app, ConfirmScreen)
        assert dialog.plan.cli == "forklift keys limit tenant 5"
        assert app.focused is dialog.query_one("#confirm", Button)
        dialog.query_one("#confirm", Button).press()
        await on_screen(app, FlowScreen)
        await loaded(app, screen)
        assert screen._keys["tenant"].concurrency == 5 and screen._keys["tenant"].overridden
        assert app.last_command == "forklift keys limit tenant 5"

    drive(make_app(dsn), scenario)
    assert flow_db.execute(f"SELECT actor, action, target FROM {SCHEMA}.audit").fetchall() == [
        ("tester", "key_limit", {"key": "tenant", "concurrency": 5})]


def test_a_queue_rate_is_changed_from_the_queue_table(dsn: str,
                                                      flow_db: psycopg.Connection[Any]) -> None:
    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        screen = await flow_screen(app, pilot)
        queues = screen.query_one("#flow-queues", LiveTable)
        queues.focus()
        assert queues.move_to_key("queue:rated")
        await pilot.pause()
        await pilot.press("r")
        ask = await on_screen(app, ValueScreen)
        ask.query_one("#value", Input).value = "10/s"
        await pilot.press("enter")
        dialog = await on_screen(app, ConfirmScreen)
        assert dialog.plan.cli == "forklift queues rate rated 10/s"
        dialog.query_one("#confirm", Button).press()
        await on_screen(app, FlowScreen)
        await loaded(app, screen)
        rate = screen._queues["rated"].rate
        assert rate is not None and rate.text == "10/s"

    drive(make_app(dsn), scenario)
    assert flow_db.execute(f"SELECT action FROM {SCHEMA}.audit").fetchall() == [("queue_rate",)]


def test_greater_and_less_double_and_halve_the_rate_in_force_after_one_confirmation(
    dsn: str, flow_db: psycopg.Connection[Any]
) -> None:
    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        screen = await flow_screen(app, pilot)
        queues = screen.query_one("#flow-queues", LiveTable)
        queues.focus()
        assert queues.move_to_key("queue:rated")
        await pilot.pause()
        await pilot.press(">")
        dialog = await on_screen(app, ConfirmScreen)
        assert dialog.plan.cli == "forklift queues rate rated 200/s"
        assert "was 100/s" in dialog.plan.title
        await pilot.press("enter")
        await on_screen(app, FlowScreen)
        await loaded(app, screen)
        rate = screen._queues["rated"].rate
        assert rate is not None and rate.text == "200/s"
        # A key without a rate: the key says why, and nothing opens.
        keys = screen.query_one("#flow-keys", LiveTable)
        keys.focus()
        assert keys.move_to_key("tenant")
        await pilot.pause()
        assert screen._keys["tenant"].rate is None
        assert screen.why_not("step_rate", (0.5,)) == (
            "it has no rate to double or halve: r sets one")
        await pilot.press("<")
        await pilot.pause()
        assert isinstance(app.screen, FlowScreen)

    drive(make_app(dsn), scenario)
    assert flow_db.execute(f"SELECT action FROM {SCHEMA}.audit").fetchall() == [("queue_rate",)]


@pytest.mark.parametrize(("text", "limit", "per", "factor", "stepped"), [
    ("100/s", 100, 1.0, 2, "200/s"),
    ("100/s", 100, 1.0, 0.5, "50/s"),
    ("10/5s", 10, 5.0, 0.5, "5/5s"),
    ("3/m", 3, 60.0, 0.5, "2/m"),
    ("1/s", 1, 1.0, 0.5, "1/2s"),
    ("1/2s", 1, 2.0, 2, "2/2s"),
])
def test_a_stepped_rate_keeps_its_period_until_one_start_is_left(
    text: str, limit: int, per: float, factor: float, stepped: str
) -> None:
    rate = RateInfo(limit=limit, per_seconds=per, burst=limit, text=text)
    assert stepped_rate(rate, factor) == stepped


def test_read_only_changes_nothing(dsn: str, flow_db: psycopg.Connection[Any]) -> None:
    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        screen = await flow_screen(app, pilot)
        keys = screen.query_one("#flow-keys", LiveTable)
        keys.focus()
        assert keys.move_to_key("tenant")
        await pilot.pause()
        assert screen.check_action("act", ("limit",)) is None
        await pilot.press("l")
        await pilot.pause()
        assert isinstance(app.screen, FlowScreen)

    drive(make_app(dsn, read_only=True), scenario)
    assert flow_db.execute(f"SELECT count(*) FROM {SCHEMA}.audit").fetchone() == (0,)
