"""The console's Workflows screen (command palette: Go to Workflows), with Pilot against a real
PostgreSQL: outbox topics with pending and dead counts, messages, events, and a retry of a
topic's dead messages after confirmation (effect and audit row). The job detail of a parked job:
why it is parked, the jobs a held job waits for, and the steps."""

from __future__ import annotations

from typing import Any

import psycopg
from apps import workflows as wf
from apps.basic import running_worker
from console_seed import drive, loaded, make_app, on_screen
from helpers import wait_until, wait_until_async
from textual.pilot import Pilot
from textual.widgets import Button, Static

from forklift import Forklift
from forklift_console.app import ConsoleApp
from forklift_console.screens.job import JobScreen
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


def test_the_job_detail_shows_a_sleeping_job_its_steps_and_what_a_held_job_waits_for(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    with wf.bound(dsn, conn) as app:
        sleeper = app.kind("wf.sleeper").enqueue({"secs": 3600}).id
        held = app.kind("wf.steps").enqueue({"n": 1}, after=[sleeper]).id
        with running_worker(app, lease=2.0, poll_interval=0.1, concurrency=2):
            wait_until(lambda: conn.execute(
                "SELECT state FROM forklift.job_steps WHERE job_id = %s AND name = 'cool-down'",
                (sleeper,)).fetchone() == ("sleeping",), timeout=30)

    async def scenario(console: ConsoleApp, pilot: Pilot[None]) -> None:
        console.push_screen(JobScreen(sleeper))
        detail = await on_screen(console, JobScreen)
        await loaded(console, detail)
        text = str(detail.query_one("#steps", Static).render())
        assert "Parked: sleeping (cool-down) until" in text
        assert "Steps (2)" in text and "before" in text and "completed" in text
        assert "cool-down" in text and "sleeping" in text
        console.pop_screen()
        console.push_screen(JobScreen(held))
        other = await on_screen(console, JobScreen)
        await wait_until_async(lambda: other.job_id == held and other.loads > 0, timeout=20)
        await loaded(console, other)
        text = str(other.query_one("#steps", Static).render())
        assert f"Parked: waiting for jobs {sleeper}" in text
        assert f"Waits for: job {sleeper} (scheduled)" in text

    drive(make_app(dsn, start="overview"), scenario)


def parked_scene(dsn: str, conn: psycopg.Connection[Any]) -> dict[str, int]:
    """A sleeping job, one waiting for an event (with a deadline), one held for two jobs, and a
    job merely scheduled (a delay), each still in state scheduled."""
    with wf.bound(dsn, conn) as app:
        ids = {
            "sleeping": app.kind("wf.sleeper").enqueue({"secs": 3600}).id,
            "event": app.kind("wf.waiter").enqueue({"event": "order.paid", "timeout": 3600}).id,
            "delayed": app.kind("wf.task").enqueue({"n": 1}, delay=3600).id,
        }
        ids["held"] = app.kind("wf.task").enqueue(
            {"n": 2}, after=[ids["sleeping"], ids["delayed"]]).id
        with running_worker(app, lease=2.0, poll_interval=0.1, concurrency=2, lead=False):
            wait_until(lambda: conn.execute(
                "SELECT count(*) FROM forklift.job_steps WHERE job_id = ANY(%s)"
                " AND state IN ('sleeping', 'waiting')", ([ids["sleeping"], ids["event"]],)
            ).fetchone() == (2,), timeout=30)
    return ids


def test_the_jobs_list_says_why_a_scheduled_job_waits(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    import json

    from typer.testing import CliRunner

    from forklift.cli.main import app as cli
    from forklift.ops import JobFilter, Operator

    ids = parked_scene(dsn, conn)
    wake = conn.execute("SELECT wake_at FROM forklift.job_steps WHERE job_id = %s"
                        " AND name = 'cool-down'", (ids["sleeping"],)).fetchone()[0]  # type: ignore[index]
    with Operator(dsn, actor="test") as op:
        page = op.jobs(JobFilter(states=("scheduled",)))
    rows = {j.id: j for j in page.jobs}
    assert {j.state for j in page.jobs} == {"scheduled"}
    sleeping, event = rows[ids["sleeping"]].parked, rows[ids["event"]].parked
    held = rows[ids["held"]].parked
    assert sleeping is not None and (sleeping.why, sleeping.until) == ("sleeping", wake)
    assert sleeping.text == f"sleeping until {wake.isoformat()}"
    assert event is not None and (event.why, event.event) == ("event", "order.paid")
    assert event.text.startswith("waiting for event order.paid until ")
    assert held is not None and (held.why, held.jobs, held.text) == ("jobs", 2, "waiting for 2 jobs")
    assert rows[ids["delayed"]].parked is None

    runner = CliRunner()
    got = runner.invoke(cli, ["jobs", "list", "--state", "scheduled", "--json"],
                        env={"FORKLIFT_DSN": dsn})
    assert got.exit_code == 0, got.output
    listed = {j["id"]: j for j in json.loads(got.stdout)["jobs"]}
    assert listed[ids["held"]]["state"] == "scheduled"
    assert listed[ids["held"]]["parked"] == {"why": "jobs", "until": None, "event": None,
                                             "jobs": 2, "text": "waiting for 2 jobs"}
    assert listed[ids["sleeping"]]["parked"]["until"] == wake.isoformat()
    assert listed[ids["delayed"]]["parked"] is None
    human = runner.invoke(cli, ["jobs", "list", "--state", "scheduled"],
                          env={"FORKLIFT_DSN": dsn, "COLUMNS": "200"})
    assert human.exit_code == 0, human.output
    lines = {int(line.split()[0]): line for line in human.stdout.splitlines()
             if line.split() and line.split()[0].isdigit() and "shown of" not in line}
    assert "sleeping until " in lines[ids["sleeping"]]
    assert "waiting for event order.paid until " in lines[ids["event"]]
    assert "waiting for 2 jobs" in lines[ids["held"]]
    assert "scheduled" in lines[ids["delayed"]]


def test_the_jobs_screen_says_why_a_scheduled_job_waits(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    from forklift_console.screens.jobs import JobsScreen

    ids = parked_scene(dsn, conn)

    async def scenario(console: ConsoleApp, pilot: Pilot[None]) -> None:
        console.switch_mode("jobs")
        screen = await on_screen(console, JobsScreen)
        await loaded(console, screen)
        table = screen.query_one("#jobs", LiveTable)

        def cell(name: str, column: str) -> str:
            return str(table.cell_value(str(ids[name]), column).plain)

        assert cell("sleeping", "state") == "◷ sleeping"
        assert cell("sleeping", "info").startswith("sleeping until ")
        assert cell("event", "state") == "◷ waiting"
        assert cell("event", "info").startswith("waiting for event order.paid until ")
        assert cell("held", "state") == "◷ held"
        assert cell("held", "info") == "waiting for 2 jobs"
        assert cell("delayed", "state") == "◷ scheduled"

    drive(make_app(dsn, start="overview"), scenario)


def test_the_job_detail_replays_a_workflow_from_a_picked_step_and_opens_the_new_job(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    from textual.widgets import OptionList

    from forklift_console.screens.modals import PickScreen

    with wf.bound(dsn, conn) as app:
        done = app.kind("wf.pipeline").enqueue({}).id
        with running_worker(app, lease=2.0, poll_interval=0.1, concurrency=2):
            wait_until(lambda: conn.execute("SELECT state FROM forklift.jobs WHERE id = %s",
                                            (done,)).fetchone() == ("completed",), timeout=30)

    async def scenario(console: ConsoleApp, pilot: Pilot[None]) -> None:
        console.push_screen(JobScreen(done))
        detail = await on_screen(console, JobScreen)
        await loaded(console, detail)
        await pilot.press("R")
        picker = await on_screen(console, PickScreen)
        options = picker.query_one("#choices", OptionList)
        assert [options.get_option_at_index(i).id for i in range(options.option_count)] == [
            "a", "b", "c"]
        options.highlighted = 1
        await pilot.press("enter")
        dialog = await on_screen(console, ConfirmScreen)
        assert dialog.plan.cli == f"forklift workflows replay {done} --from-step b"
        dialog.query_one("#confirm", Button).press()
        await wait_until_async(lambda: isinstance(console.screen, JobScreen)
                               and console.screen.job_id != done, timeout=20)

    drive(make_app(dsn, start="overview"), scenario)
    fork = conn.execute("SELECT id, meta -> 'replay' FROM forklift.jobs WHERE id <> %s",
                        (done,)).fetchall()
    assert len(fork) == 1 and fork[0][1] == {"of": done, "from_step": "b"}
    assert conn.execute("SELECT name FROM forklift.job_steps WHERE job_id = %s",
                        (fork[0][0],)).fetchall() == [("a",)]
    assert conn.execute("SELECT actor, action FROM forklift.audit").fetchall() == [
        ("tester", "workflows.replay")]


def test_the_kinds_screen_pauses_and_resumes_a_kind_and_names_the_pause(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    from forklift_console.screens.kinds import KindsScreen

    with wf.bound(dsn, conn) as app:
        waiting = app.kind("wf.plain").enqueue({}).id

    def state() -> tuple[str, int]:
        row = conn.execute("SELECT state, extract(year FROM run_at)::int FROM forklift.jobs"
                           " WHERE id = %s", (waiting,)).fetchone()
        assert row is not None
        return row[0], row[1]

    async def scenario(console: ConsoleApp, pilot: Pilot[None]) -> None:
        console.switch_mode("kinds")
        screen = await on_screen(console, KindsScreen)
        await loaded(console, screen)
        table = screen.query_one("#kinds", LiveTable)
        table.focus()
        table.move_cursor(row=table.keys.index("default\x1fwf.plain"))
        await pilot.press("p")
        dialog = await on_screen(console, ConfirmScreen)
        assert dialog.plan.cli == "forklift kinds pause wf.plain"
        dialog.query_one("#confirm", Button).press()
        await wait_until_async(lambda: state() == ("scheduled", 9999), timeout=20)
        await on_screen(console, KindsScreen)
        await loaded(console, screen)
        assert "paused: kind wf.plain paused by tester: console (1 held)" in str(
            screen.query_one("#info", Static).render())
        await pilot.press("p")
        dialog = await on_screen(console, ConfirmScreen)
        assert dialog.plan.cli == "forklift kinds resume wf.plain"
        dialog.query_one("#confirm", Button).press()
        await wait_until_async(lambda: state()[0] == "available", timeout=20)

    drive(make_app(dsn, start="overview"), scenario)
    assert [a for (a,) in conn.execute("SELECT action FROM forklift.audit ORDER BY id")] == [
        "kinds.pause", "kinds.resume"]
