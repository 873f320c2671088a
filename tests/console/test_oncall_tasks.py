"""The twelve on-call tasks, walked like the person on call walks them: from the Overview, with
only the keys a screen shows (its footer, ``?``, the tab bar or a hint on the screen), counting
every key pressed from the Overview on (typed characters included). Tasks a, b, d, e and g
take at most three keys, the others at most five; each test asserts what the person needs to
see (or what the database holds) at the end, against a real, seeded PostgreSQL.

No cursor is placed for the person here: a row under the cursor got there by the keys counted.
A task the console cannot yet do within its budget is written as it should be and marked
``xfail(strict=True)`` with what is missing.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from apps import faults, flow_keys
from apps.flow_keys import Work
from console_seed import (
    FROZEN,
    SCHEMA,
    Seeded,
    _Seeder,
    drive,
    freeze_db_clock,
    loaded,
    make_app,
    on_screen,
    seed,
    seed_long_runs,
    settled,
)
from helpers import wait_until_async
from test_backfill_console import rate_of, seed_running
from test_console_workflows import parked_scene
from textual.pilot import Pilot
from textual.widgets import OptionList, Static

from forklift._features.flow import declare
from forklift.ops import Operator
from forklift.ops.horizon import advice
from forklift_console.app import ConsoleApp
from forklift_console.screens.backfills import BackfillsScreen
from forklift_console.screens.base import READ_ONLY_WHY, ConsoleScreen
from forklift_console.screens.batches import BatchesScreen
from forklift_console.screens.dead import DeadScreen
from forklift_console.screens.flow import FlowScreen
from forklift_console.screens.health import HealthScreen
from forklift_console.screens.job import JobScreen
from forklift_console.screens.jobs import JobsScreen
from forklift_console.screens.overview import OverviewScreen
from forklift_console.screens.queues import QueuesScreen
from forklift_console.screens.schedules import SchedulesScreen
from forklift_console.screens.workers import WorkersScreen
from forklift_console.widgets.table import LiveTable

#: Keys for tasks a, b, d, e and g; the others get FEW.
MOST = 3
FEW = 5


class Keys:
    """Presses keys and counts them."""

    def __init__(self, pilot: Pilot[None]) -> None:
        self.pilot = pilot
        self.pressed: list[str] = []

    @property
    def count(self) -> int:
        return len(self.pressed)

    async def __call__(self, *keys: str) -> None:
        self.pressed.extend(keys)
        await self.pilot.press(*keys)

    async def type(self, text: str) -> None:
        await self(*(_KEY_NAMES.get(c, c) for c in text))


_KEY_NAMES = {"/": "slash", ":": "colon", " ": "space", ".": "full_stop", ">": "greater_than_sign"}


async def start(app: ConsoleApp) -> OverviewScreen:
    """The Overview as the person first sees it: loaded, its list focused."""
    screen = await on_screen(app, OverviewScreen)
    await settled(app)
    return screen  # type: ignore[no-any-return]


async def arrive(app: ConsoleApp, kind: type[Any]) -> Any:
    """The screen a key led to, once it shows data fetched after the key."""
    screen = await on_screen(app, kind)
    await loaded(app, screen)
    return screen


def text_of(screen: ConsoleScreen[Any], selector: str) -> str:
    return str(screen.query_one(selector, Static).render())


def row_of(table: LiveTable, key: str) -> str:
    return " ".join(str(cell) for cell in table.get_row(key))


class Toasts:
    """Every notification the app shows, kept (the app's own list drops them as they
    expire)."""

    def __init__(self, app: ConsoleApp) -> None:
        self.said: list[str] = []
        shown_by_app = app.notify

        def notify(message: str, **options: Any) -> None:
            self.said.append(str(message))
            shown_by_app(message, **options)

        app.notify = notify  # type: ignore[method-assign]


def shown(app: ConsoleApp, key: str) -> bool:
    """Whether the person can find ``key`` on this screen: a binding with a description (the
    footer shows it, or ``?`` lists it)."""
    active = app.screen.active_bindings.get(key)
    return active is not None and bool(active.binding.description)


@pytest.fixture
def seeded(conn: psycopg.Connection[Any]) -> Seeded:
    """The seeded scene, with the database's clock at the console's instant (what died "in
    the last minutes" did so before the instant both agree on)."""
    out = seed(conn)
    freeze_db_clock(conn)
    return out


# -- a. what is failing ---------------------------------------------------------------------
def test_a_what_is_failing(dsn: str, seeded: Seeded) -> None:
    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        keys = Keys(pilot)
        overview = await start(app)
        # The Overview alone says that something dies, and where.
        alerts = [str(o.prompt) for o in overview.query_one("#alerts", OptionList).options]
        assert any("dead letters growing" in line for line in alerts), alerts
        await keys("4")
        dead = await arrive(app, DeadScreen)
        # The busiest failure, its error and how often: no key beyond the screen's.
        group = dead.selected()
        assert (group.kind, group.code) == ("demo.failing", "mailbox_full")
        sample = text_of(dead, "#sample")
        assert "9 dead jobs" in sample and "mailbox_full: the mailbox is full" in sample
        await keys("enter")  # and exactly the jobs behind it
        jobs = await arrive(app, JobsScreen)
        assert len(jobs.query_one("#jobs", LiveTable).keys) == 9
        assert keys.count <= MOST, keys.pressed

    drive(make_app(dsn), scenario)


# -- b. why is a job not running ------------------------------------------------------------
def seed_lagging(conn: psycopg.Connection[Any]) -> None:
    """One live worker on the reports queue, two reports running against the queue's limit
    of two and six waiting, the oldest for four minutes: the one trouble on the Overview."""
    s = _Seeder(conn, FROZEN)
    with conn.transaction():
        conn.execute(
            f"""INSERT INTO {SCHEMA}.workers (id, host, pid, queues, slots, in_use, state,
                started_at, heartbeat_at, version)
            VALUES ('web-1:4242:a1', 'web-1', 4242, ARRAY['reports'], 10, 2, 'running', %s, %s,
                '0.1.0')""", (s.ago(7200), s.ago(2)))
        for _ in range(2):
            s.job("demo.report", "reports", "running", created=300, attempted=280, attempt=1,
                  worker="web-1:4242:a1", lease=-25)
        for i in range(6):
            s.job("demo.report", "reports", "available", args={"n": 600 + i},
                  created=250 - i * 30)
        conn.execute(f"UPDATE {SCHEMA}.queues SET concurrency = 2 WHERE name = 'reports'")
    freeze_db_clock(conn)


def test_b_why_is_a_job_not_running(dsn: str, conn: psycopg.Connection[Any]) -> None:
    """The Overview's alert says the reports queue lags; enter shows its waiting jobs, enter
    on the first says why it waits: the queue's concurrency limit."""
    seed_lagging(conn)

    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        keys = Keys(pilot)
        overview = await start(app)
        box = overview.query_one("#alerts", OptionList)
        assert app.focused is box
        assert box.highlighted is not None
        assert "queue reports" in str(box.options[box.highlighted].prompt)
        await keys("enter")  # the queue's waiting jobs
        jobs = await arrive(app, JobsScreen)
        table = jobs.query_one("#jobs", LiveTable)
        assert len(table.keys) == 6 and app.focused is table
        await keys("enter")  # the highlighted one in full
        detail = await on_screen(app, JobScreen)
        await wait_until_async(lambda: "concurrency limit" in text_of(detail, "#why"),
                               timeout=20, message=lambda: text_of(detail, "#why"))
        assert keys.count <= MOST, keys.pressed

    drive(make_app(dsn), scenario)


# -- c. requeue a dead-letter group ---------------------------------------------------------
def dead_count(conn: psycopg.Connection[Any], code: str) -> int:
    row = conn.execute(f"SELECT count(*) FROM {SCHEMA}.jobs WHERE state = 'dead'"
                       " AND errors -> -1 ->> 'code' = %s", (code,)).fetchone()
    assert row is not None
    return int(row[0])


def test_c_requeue_a_dead_letter_group(
    dsn: str, conn: psycopg.Connection[Any], seeded: Seeded
) -> None:
    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        keys = Keys(pilot)
        await start(app)
        await keys("4")
        dead = await arrive(app, DeadScreen)
        assert dead.selected().count == 9
        assert shown(app, "r")
        await keys("r")
        from forklift_console.screens.modals import ConfirmScreen

        await on_screen(app, ConfirmScreen)
        await keys("9", "enter")  # the count typed is the confirmation
        await wait_until_async(lambda: dead_count(conn, "mailbox_full") == 0, timeout=20)
        assert keys.count <= FEW, keys.pressed

    drive(make_app(dsn), scenario)
    # One action, audited under the console's actor, with the nine jobs it requeued.
    rows = conn.execute(f"SELECT count FROM {SCHEMA}.audit WHERE actor = 'tester'").fetchall()
    assert rows == [(9,)], rows


# -- d. pause and resume a queue ------------------------------------------------------------
def paused(conn: psycopg.Connection[Any], name: str) -> bool:
    row = conn.execute(f"SELECT paused FROM {SCHEMA}.queues WHERE name = %s", (name,)).fetchone()
    return bool(row and row[0])


def test_d_pause_a_queue(dsn: str, conn: psycopg.Connection[Any], seeded: Seeded) -> None:
    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        from forklift_console.screens.modals import ReasonScreen

        await start(app)
        keys = Keys(pilot)
        await keys("2")
        queues = await arrive(app, QueuesScreen)
        table = queues.query_one("#queues", LiveTable)
        while (table.current_key is None or paused(conn, table.current_key)) and keys.count < 2:
            await keys("down")
        name = table.current_key
        assert name is not None and not paused(conn, name)
        assert shown(app, "p")
        await keys("p")
        await on_screen(app, ReasonScreen)
        await keys("enter")  # no reason, no expiry: both optional
        await wait_until_async(lambda: paused(conn, name), timeout=20)
        assert keys.count <= MOST, keys.pressed

    drive(make_app(dsn), scenario)


def test_d_resume_a_paused_queue(dsn: str, conn: psycopg.Connection[Any], seeded: Seeded
                                 ) -> None:
    """The seeded mail queue is paused (alice, an SMTP outage): the Overview's alert says so
    and that p resumes it; p shows who paused it and why, enter resumes it. With a second
    queue paused, p asks which first."""
    assert paused(conn, "mail")

    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        from forklift_console.screens.modals import PickScreen, ReasonScreen

        said = Toasts(app)
        overview = await start(app)
        alerts = [str(o.prompt) for o in overview.query_one("#alerts", OptionList).options]
        line = next((a for a in alerts if "queue mail" in a and "paused" in a), None)
        assert line is not None and "p resumes" in line, alerts
        keys = Keys(pilot)
        assert shown(app, "p")
        await keys("p")
        dialog = await on_screen(app, ReasonScreen)
        assert "SMTP provider outage" in str(dialog.query_one("#context").render())
        await keys("enter")
        await wait_until_async(lambda: not paused(conn, "mail"), timeout=20)
        assert keys.count <= MOST, keys.pressed
        # None paused: p says so. Two paused: p asks which.
        await loaded(app, overview)
        await pilot.press("p")
        await wait_until_async(lambda: any("no queue is paused" in t for t in said.said),
                               timeout=10)
        conn.execute(f"UPDATE {SCHEMA}.queues SET paused = true WHERE name IN ('mail', 'slow')")
        await loaded(app, overview)
        await pilot.press("p")
        pick = await on_screen(app, PickScreen)
        choices = pick.query_one("#choices", OptionList)
        assert sorted(str(choices.get_option_at_index(i).id)
                      for i in range(choices.option_count)) == ["mail", "slow"]
        await pilot.press("escape")
        await on_screen(app, OverviewScreen)

    drive(make_app(dsn), scenario)


# -- e. watch a drain -----------------------------------------------------------------------
@pytest.fixture
def fault_procs(dsn: str, conn: psycopg.Connection[Any], tmp_path: Path
                ) -> Iterator[faults.Procs]:
    faults.setup(conn)
    procs = faults.Procs(dsn, tmp_path)
    try:
        yield procs
    finally:
        procs.close()


def test_e_watch_a_drain(
    dsn: str, conn: psycopg.Connection[Any], fault_procs: faults.Procs
) -> None:
    """A real worker process is sent SIGTERM while it holds jobs: the Workers screen shows it
    draining with its cutoff, then, once its jobs finish, no longer running."""
    for _ in range(2):
        faults.enqueue(conn, "faults.hold", {"gate": "drain"})
    proc = fault_procs.start(concurrency=2, drain_timeout=120.0, poll_interval=0.2)

    def holding() -> str | None:
        row = conn.execute(f"SELECT worker_id FROM {SCHEMA}.jobs WHERE state = 'running'"
                           " GROUP BY worker_id HAVING count(*) = 2").fetchone()
        return str(row[0]) if row else None

    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        worker = await wait_until_async(holding, timeout=60,
                                        message=lambda: "the worker never held both jobs:\n"
                                        + proc.log()[-3000:])
        keys = Keys(pilot)
        await start(app)
        await keys("5")
        workers = await arrive(app, WorkersScreen)
        table = workers.query_one("#workers", LiveTable)
        assert table.current_key == worker
        os.kill(proc.pid, signal.SIGTERM)  # the drain, as Kubernetes or systemd starts it

        async def draining() -> bool:
            await loaded(app, workers)
            pane = text_of(workers, "#inflight")
            return "DRAINING: cutoff in" in pane and "In flight (2)" in pane

        await wait_until_async(draining, timeout=30,
                               message=lambda: text_of(workers, "#inflight"))
        assert "draining" in str(table.cell_value(worker, "state"))
        faults.open_gate(conn, "drain")  # its jobs finish; it exits

        async def gone() -> bool:
            await loaded(app, workers)
            return worker not in table.keys or "exited" in str(table.cell_value(worker, "state"))

        await wait_until_async(gone, timeout=60, message=lambda: str(table.keys))
        assert keys.count <= MOST, keys.pressed

    try:
        drive(make_app(dsn), scenario)
    finally:
        print(proc.log()[-3000:])
    assert proc.popen.wait(60) == 0


# -- f. batch progress and cancel -----------------------------------------------------------
def test_f_batch_progress_and_cancel(
    dsn: str, conn: psycopg.Connection[Any], seeded: Seeded
) -> None:
    seed_long_runs(conn)
    freeze_db_clock(conn)

    def cancel_asked(batch: int) -> bool:
        row = conn.execute(f"SELECT cancel_requested_at FROM {SCHEMA}.batches WHERE id = %s",
                           (batch,)).fetchone()
        return row is not None and row[0] is not None

    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        from forklift_console.screens.modals import ConfirmScreen

        keys = Keys(pilot)
        await start(app)
        await keys("7")
        batches = await arrive(app, BatchesScreen)
        batch = batches.selected()
        assert batch is not None and not batch.is_terminal
        # Its progress, rate and ETA are on screen before any key.
        table = batches.query_one("#batches", LiveTable)
        assert table.current_key is not None
        row_text = row_of(table, table.current_key)
        assert f"{batch.completed}" in row_text, row_text
        await keys("C")
        await on_screen(app, ConfirmScreen)
        await keys("enter")
        await wait_until_async(lambda: cancel_asked(batch.id), timeout=20)
        assert keys.count <= FEW, keys.pressed

    drive(make_app(dsn), scenario)


# -- g. backfill pace and rate --------------------------------------------------------------
def test_g_backfill_pace_and_rate(dsn: str, conn: psycopg.Connection[Any]) -> None:
    seed_running(conn, dsn)
    assert rate_of(conn) == ("running", 4.0)

    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        said = Toasts(app)
        keys = Keys(pilot)
        await start(app)
        await keys("9")
        backfills = await arrive(app, BackfillsScreen)
        detail = text_of(backfills, "#detail")
        assert "pace" in detail.lower() and "rate" in detail.lower(), detail
        assert shown(app, "greater_than_sign")
        assert backfills.check_action("rate_up", ()) is True, said.said
        await keys("greater_than_sign")  # no dialog: one press doubles it, audited
        await wait_until_async(lambda: rate_of(conn) == ("running", 8.0), timeout=30,
                               message=lambda: f"run is {rate_of(conn)}, said {said.said}")
        assert keys.count <= MOST, keys.pressed

    drive(make_app(dsn), scenario)


# -- h. keys at limit and change a rate -----------------------------------------------------
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
    conn.execute(f"UPDATE {SCHEMA}.jobs SET state = 'running', attempt = 1, worker_id = 'w1',"
                 f" fence = nextval('{SCHEMA}.fence_seq'), attempted_at = now(),"
                 " lease_expires_at = now() + interval '1 minute'"
                 f" WHERE id IN (SELECT id FROM {SCHEMA}.jobs WHERE kind = 'flow.keys.sync'"
                 " ORDER BY id LIMIT 2)")
    conn.execute(f"UPDATE {SCHEMA}.queues SET rate_limit = 100, rate_per = 1, rate_burst = 100,"
                 " flow = true WHERE name = 'rated'")
    return conn


def test_h_keys_at_limit_and_change_a_rate(dsn: str, flow_db: psycopg.Connection[Any]) -> None:
    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        from forklift_console.screens.modals import ConfirmScreen

        keys = Keys(pilot)
        await start(app)
        await keys("0")
        flow = await arrive(app, FlowScreen)
        # Which key is at its limit, without a key: the keys table says so.
        tenant = flow._keys["tenant"]
        assert (tenant.running, tenant.at_limit) == (2, 1)
        key_rows = flow.query_one("#flow-keys", LiveTable)
        cells = {c: str(key_rows.cell_value("tenant", c)) for c in ("limit", "running", "full")}
        assert cells == {"limit": "2", "running": "2", "full": "1"}, row_of(key_rows, "tenant")
        table = flow.query_one("#flow-queues", LiveTable)
        assert app.focused is table
        while table.current_key != "queue:rated" and keys.count < FEW:
            await keys("down")
        assert shown(app, "less_than_sign")
        await keys("<")  # halve the rate in force: 100/s
        dialog = await on_screen(app, ConfirmScreen)
        assert "50/s" in str(dialog.query_one("#cli").render())
        await keys("enter")
        await wait_until_async(lambda: flow_db.execute(
            f"SELECT rate_limit, rate_per FROM {SCHEMA}.queues WHERE name = 'rated'"
        ).fetchone() == (50, 1), timeout=20)
        assert keys.count <= FEW, keys.pressed

    drive(make_app(dsn), scenario)


# -- i. a parked workflow job and what wakes it ---------------------------------------------
def test_i_a_parked_workflow_job_and_what_wakes_it(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    ids = parked_scene(dsn, conn)

    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        keys = Keys(pilot)
        await start(app)
        await keys("3")
        jobs = await arrive(app, JobsScreen)
        table = jobs.query_one("#jobs", LiveTable)
        target = str(ids["event"])
        while table.current_key != target and keys.count < FEW - 1:
            await keys("down")
        assert str(table.cell_value(target, "state").plain) == "◷ waiting"
        await keys("enter")
        detail = await arrive(app, JobScreen)
        steps = text_of(detail, "#steps")
        # What wakes it: the event it waits for, and until when it waits.
        assert 'Parked: waiting for event "order.paid" (' in steps, steps
        assert "wait:order.paid  waiting" in steps, steps
        why = text_of(detail, "#why")  # and the command that wakes it now
        assert "wake it now: forklift events publish order.paid" in why, why
        assert keys.count <= FEW, keys.pressed

    drive(make_app(dsn), scenario)


# -- j. database health including the xmin holder -------------------------------------------
def test_j_database_health_and_the_xmin_holder(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    seed(conn)
    with Operator(dsn) as op:
        op.set_health_threshold("horizon_seconds", 0.0)  # any open snapshot is an alert
    side = psycopg.connect(dsn, application_name="stuck-report")
    side.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
    side.execute("SELECT 1").fetchone()
    pid = side.info.backend_pid
    try:
        async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
            keys = Keys(pilot)
            overview = await start(app)

            async def alerted() -> bool:
                await loaded(app, overview)
                box = overview.query_one("#alerts", OptionList)
                return any("database: horizon held:" in str(o.prompt) for o in box.options)

            await wait_until_async(alerted, timeout=30,
                                   message="the overview never raised the horizon alert")
            await keys("h")
            health = await arrive(app, HealthScreen)
            text = text_of(health, "#checks") + "\n" + text_of(health, "#holders")
            assert f"pid {pid}" in text and "stuck-report" in text and "since" in text
            assert advice("transaction", pid, None, "idle in transaction") in text
            assert "xmin horizon" in text
            assert keys.count <= FEW, keys.pressed

        drive(make_app(dsn), scenario)
    finally:
        side.rollback()
        side.close()


# -- k. read-only ---------------------------------------------------------------------------
#: (the key that opens the screen, the screen, its destructive keys).
READ_ONLY_KEYS: tuple[tuple[str, type[Any], tuple[str, ...]], ...] = (
    ("2", QueuesScreen, ("p", "l", "P")),
    ("3", JobsScreen, ("r", "C", "D")),
    ("4", DeadScreen, ("r", "D")),
    ("5", WorkersScreen, ("d",)),
    ("7", BatchesScreen, ("C", "r")),
    ("8", SchedulesScreen, ("p", "n")),
    ("9", BackfillsScreen, ("p", "greater_than_sign", "less_than_sign", "C")),
    ("0", FlowScreen, ("l", "r", "x")),
)


def test_k_read_only_every_destructive_key_refuses_with_its_cause(
    dsn: str, conn: psycopg.Connection[Any], seeded: Seeded
) -> None:
    """Each destructive key, pressed once on its screen (reached with one key from the
    Overview), opens nothing, changes nothing, and says why: the console is read-only."""
    seed_long_runs(conn)
    before = conn.execute(f"SELECT state, count(*) FROM {SCHEMA}.jobs GROUP BY state"
                          " ORDER BY state").fetchall()

    async def refuses(app: ConsoleApp, keys: Keys, key: str) -> None:
        screen = app.screen
        seen = len(said.said)
        assert shown(app, key), f"{key} is not among {type(screen).__name__}'s keys"
        await keys(key)
        await wait_until_async(lambda: len(said.said) > seen, timeout=10,
                               message=lambda: f"{key} on {type(screen).__name__} said nothing"
                               f" (focus {app.focused!r}, on {app.screen!r})")
        new = said.said[seen:]
        assert any("is not available" in t and READ_ONLY_WHY in t for t in new), new
        assert app.screen is screen, f"{key} opened {app.screen!r}"

    said: Toasts

    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        nonlocal said
        said = Toasts(app)
        await start(app)
        for screen_key, kind, destructive in READ_ONLY_KEYS:
            keys = Keys(pilot)
            await keys(screen_key)
            await arrive(app, kind)
            for key in destructive:
                await refuses(app, keys, key)
            assert keys.count == 1 + len(destructive), keys.pressed
        # A job's own detail refuses the same way.
        keys = Keys(pilot)
        await keys("3")
        await arrive(app, JobsScreen)
        await keys("enter")
        await arrive(app, JobScreen)
        for key in ("r", "C", "D"):
            await refuses(app, keys, key)
        assert keys.count == FEW, keys.pressed

    drive(make_app(dsn, read_only=True), scenario)
    assert conn.execute(f"SELECT count(*) FROM {SCHEMA}.audit WHERE actor = 'tester'"
                        ).fetchone() == (0,)
    assert conn.execute(f"SELECT state, count(*) FROM {SCHEMA}.jobs GROUP BY state"
                        " ORDER BY state").fetchall() == before
    assert paused(conn, "mail")


# -- l. small and wide terminals without colour ---------------------------------------------
def pin_server_wide_health(monkeypatch: pytest.MonkeyPatch) -> None:
    """The server is shared by the suite's other tests: its client connections and the
    statistics collector's table counters are the one part of the Health screen no seed can
    fix. The real reading is taken, those parts set to fixed values, and the verdicts judged
    again from them with the operator API's own rules."""
    from dataclasses import replace

    from forklift.ops import health as ops_health

    real = ops_health.health

    def pinned(*args: Any, **kwargs: Any) -> Any:
        h = real(*args, **kwargs)
        tables = [ops_health.TableHealth(t.table, 0, 0, 0.0, 0, 0, None, 0, None, None, None,
                                         None, 0, 8192, 16384) for t in h.tables]
        connections = replace(h.connections, max_connections=100, superuser_reserved=3,
                              in_use=7)
        h = replace(h, tables=tables, connections=connections, notify_queue_usage=0.0)
        found = ops_health.alerts(h)
        h = replace(h, alerts=found, level=ops_health.level(found))
        return replace(h, checks=ops_health.checks(h))

    monkeypatch.setattr(ops_health, "health", pinned)


SIZES = {"80x24": (80, 24), "200x50": (200, 50)}
SNAPSHOT_SCREENS = {"overview": ("1", OverviewScreen), "jobs": ("3", JobsScreen),
                    "health": ("h", HealthScreen)}


@pytest.mark.parametrize("size", list(SIZES))
@pytest.mark.parametrize("where", list(SNAPSHOT_SCREENS))
def test_l_small_and_wide_terminals_without_colour(
    snap_compare: Any, dsn: str, seeded: Seeded, where: str, size: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Under NO_COLOR, at 80x24 and at 200 columns: every state still a glyph and a word.
    Reached from the Overview with one key, as the person would."""
    monkeypatch.setenv("NO_COLOR", "1")
    pin_server_wide_health(monkeypatch)
    key, kind = SNAPSHOT_SCREENS[where]

    async def run_before(pilot: Any) -> None:
        app = pilot.app
        await start(app)
        if kind is not OverviewScreen:
            await pilot.press(key)
        await arrive(app, kind)
        await pilot.pause()

    assert snap_compare(make_app(dsn), terminal_size=SIZES[size], run_before=run_before)
