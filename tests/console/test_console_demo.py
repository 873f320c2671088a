"""`forklift demo` on live traffic: its workers are real processes the console lists by pid, a
drain is a SIGTERM the console watches, every scenario's stream shows what it promises, the
pinned horizon shows on Health, and nothing outlives the demo."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from console_seed import SCHEMA, drive, loaded, on_screen
from helpers import wait_until, wait_until_async
from textual.pilot import Pilot

from forklift.cli.console import SCENARIOS as CLI_SCENARIOS
from forklift.ops import JobFilter, Operator
from forklift_console import demo_app
from forklift_console.app import ConsoleApp
from forklift_console.backend import Backend
from forklift_console.demo import EXPORT, DemoEngine
from forklift_console.demo_fleet import worker_pid
from forklift_console.demo_pin import APPLICATION
from forklift_console.demo_scenarios import SCENARIOS, STREAMS, TASKS
from forklift_console.screens.health import HealthScreen
from forklift_console.screens.workers import WorkersScreen
from forklift_console.widgets.table import LiveTable


def demo_processes(parent: int) -> list[int]:
    """Every live demo worker process started by ``parent`` (read from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            status = (entry / "status").read_text()
        except OSError:
            continue
        if "State:\tZ" in status:
            continue  # exited, not yet reaped: it runs nothing
        if b"forklift_console.demo_worker" in argv and str(parent).encode() in argv:
            found.append(int(entry.name))
    return found


@pytest.fixture
def engine(dsn: str) -> Iterator[DemoEngine]:
    app = demo_app.app
    app.use(dsn)
    engine = DemoEngine(app, concurrency=4, scenario="drain")
    engine.start()
    try:
        yield engine
    finally:
        engine.stop()
    assert demo_processes(os.getpid()) == [], "a demo worker outlived the demo"
    assert engine.fleet.logs is not None and not engine.fleet.logs.exists()


def test_the_demos_workers_are_processes_and_a_drain_is_a_sigterm_the_console_watches(
    dsn: str, conn: psycopg.Connection[Any], engine: DemoEngine
) -> None:
    pids = wait_until(lambda: engine.pids if len(engine.pids) == 2 else None, timeout=30,
                      message="the demo's two worker processes never started")
    assert sorted(pids) == sorted(demo_processes(os.getpid()))
    drained: list[int] = []

    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        await pilot.press("5")
        workers = await on_screen(app, WorkersScreen)
        table = workers.query_one("#workers", LiveTable)

        async def listed() -> list[str] | None:
            await loaded(app, workers)
            ids = [k for k in table.keys if worker_pid(k) in pids
                   and "running" in str(table.get_cell(k, "state"))]
            return ids if len(ids) == 2 else None

        ids = await wait_until_async(listed, timeout=30,
                                     message="the console never listed both worker pids")
        target = ids[0]
        pid = worker_pid(target)
        assert pid is not None
        drained.append(pid)
        # An export started (not only buffered) on that worker, so its drain has work to show.
        export = demo_app.app.kind(EXPORT)
        for n in range(6):
            export.enqueue({"n": 10_000 + n})

        def started() -> bool:
            row = conn.execute(
                f"SELECT count(*) FROM {SCHEMA}.jobs WHERE worker_id = %s AND kind = %s"
                " AND state = 'running' AND attempted_at IS NOT NULL", (target, EXPORT),
            ).fetchone()
            return bool(row and row[0])

        await wait_until_async(started, timeout=30, message="no export ran on the worker")
        table.focus()
        assert table.move_to_key(target)
        await loaded(app, workers)
        assert workers.check_action("drain", ()) is True
        await pilot.press("d")

        async def draining() -> bool:
            await loaded(app, workers)
            pane = str(workers.query_one("#inflight").render())
            return "DRAINING: cutoff in" in pane and f"pid {worker_pid(target)}" in pane

        await wait_until_async(draining, timeout=30, message=lambda: (
            "the drain never showed; the pane read: "
            + str(workers.query_one("#inflight").render())))

    app = ConsoleApp(Backend.open(dsn, schema=SCHEMA, actor="tester"), demo=engine,
                     interval=3600)
    drive(app, scenario)
    # The SIGTERM'd process drains and exits; a replacement (a new pid) takes its slot.
    wait_until(lambda: drained[0] not in demo_processes(os.getpid()), timeout=60,
               message="the drained worker process never exited")
    state = conn.execute(f"SELECT state, exit_reason FROM {SCHEMA}.workers WHERE pid = %s",
                         (drained[0],)).fetchone()
    assert state is not None and state[0] == "exited" and state[1] in ("drained", "lease_lost")
    wait_until(lambda: len(engine.pids) == 2 and set(engine.pids) - set(pids), timeout=30,
               message="no replacement worker started")


def test_a_demo_killed_outright_leaves_no_worker_behind(dsn: str) -> None:
    """The demo process itself SIGKILLed (no clean-up runs): its workers notice and leave."""
    script = textwrap.dedent(f"""
        import sys, time
        from forklift_console.demo_fleet import DemoFleet, SlotSpec
        fleet = DemoFleet({dsn!r}, [SlotSpec(None, 2), SlotSpec(("default",), 2)],
                          drain_timeout=2.0)
        fleet.start()
        print(" ".join(map(str, fleet.pids)), fleet.logs, flush=True)
        time.sleep(600)
    """)
    demo = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    logs = ""
    try:
        assert demo.stdout is not None
        *started, logs = demo.stdout.readline().split()
        pids = [int(p) for p in started]
        assert len(pids) == 2 and Path(logs).is_dir()
        wait_until(lambda: sorted(demo_processes(demo.pid)) == sorted(pids), timeout=30,
                   message="the workers never ran")
        demo.send_signal(signal.SIGKILL)
        demo.wait(10)
        wait_until(lambda: not demo_processes(demo.pid), timeout=30,
                   message=lambda: f"orphaned demo workers: {demo_processes(demo.pid)}")
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait(10)
        for pid in demo_processes(demo.pid):
            os.kill(pid, signal.SIGKILL)
        if logs:  # the killed demo could not remove its workers' log directory
            shutil.rmtree(logs, ignore_errors=True)


def test_every_stream_shows_what_its_scenario_promises(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    app = demo_app.app
    app.use(dsn)
    engine = DemoEngine(app, concurrency=20, scenario="all")
    engine.start()
    try:
        def one(sql: str, *params: Any) -> Any:
            row = conn.execute(sql.replace("{s}", SCHEMA), params).fetchone()
            return row[0] if row else None

        # flow: tenant acme at its key's limit of 2 with more waiting; vendor held to its rate.
        wait_until(lambda: one(
            "SELECT count(*) FROM {s}.jobs WHERE kind = %s AND state = 'running'"
            " AND args->>'tenant' = 'acme'", demo_app.SYNC) == demo_app.TENANT_LIMIT
            and one("SELECT count(*) FROM {s}.jobs WHERE kind = %s AND state = 'available'"
                    " AND args->>'tenant' = 'acme'", demo_app.SYNC) > 0,
            timeout=60, message="tenant acme never sat at its limit with work waiting")
        with Operator(dsn) as op:
            vendor = next(f for f in op.queues.flows() if f.queue == demo_app.VENDOR_QUEUE)
            assert vendor.rate is not None
        wait_until(lambda: one("SELECT count(*) FROM {s}.jobs WHERE queue = %s AND state ="
                               " 'available'", demo_app.VENDOR_QUEUE) > 20, timeout=30,
                   message="the vendor queue's rate never held work back")
        # long: exports running; batches: a book running with chapters done and to do.
        wait_until(lambda: one("SELECT count(*) FROM {s}.jobs WHERE kind = %s AND state ="
                               " 'running'", EXPORT), timeout=60, message="no export ran")
        wait_until(lambda: one("SELECT count(*) FROM {s}.jobs WHERE kind = %s AND state ="
                               " 'completed'", demo_app.CHAPTER), timeout=60,
                   message="no chapter of the book completed")
        assert one("SELECT count(*) FROM {s}.batches WHERE state = 'running'") >= 1
        # failing: dead letters in more than one group (a failure code and an exception).
        def groups() -> set[str]:
            with Operator(dsn) as op:
                return {g.code for g in op.dead.groups(kind="demo.failing").groups}

        wait_until(lambda: len(groups()) >= 2, timeout=60,
                   message=lambda: f"demo.failing's dead-letter groups: {groups()}")
        # backfill: running, held to its rate.
        wait_until(lambda: one("SELECT state FROM {s}.backfill_runs WHERE name = %s"
                               " ORDER BY id DESC LIMIT 1",
                               demo_app.reindex.name) == "running", timeout=30,
                   message="the reindex backfill never ran")

        # workflows: orders waiting for their event, then sleeping; summaries held on jobs.
        def parked() -> set[str]:
            with Operator(dsn) as op:
                page = op.jobs(JobFilter(states=("scheduled",)), limit=500, count=False)
            return {j.parked.why for j in page.jobs if j.parked is not None}

        wait_until(lambda: parked() >= {"event", "sleeping", "jobs"}, timeout=90,
                   message=lambda: f"parked jobs seen: {parked()}")
    finally:
        engine.stop()
    assert demo_processes(os.getpid()) == []


def test_the_pinned_horizon_shows_on_health_and_lets_go(dsn: str) -> None:
    app = demo_app.app
    app.use(dsn)
    engine = DemoEngine(app, concurrency=2, scenario="horizon")  # not started: no workers

    async def scenario(console: ConsoleApp, pilot: Pilot[None]) -> None:
        await pilot.press("h")
        health = await on_screen(console, HealthScreen)
        await loaded(console, health)
        assert health.check_action("pin", ()) is True
        await pilot.press("p")

        async def shown() -> str | None:
            await loaded(console, health)
            text = str(health.query_one("#checks").render())
            return text if engine.pin.pid and f"pid {engine.pin.pid}" in text else None

        text = await wait_until_async(shown, timeout=30, message="the pin never showed")
        assert APPLICATION in text
        assert f"SELECT pg_terminate_backend({engine.pin.pid});" in text
        await pilot.press("p")

        async def released() -> bool:
            await loaded(console, health)
            return "xmin horizon: nothing holds it back" in str(
                health.query_one("#checks").render())

        await wait_until_async(released, timeout=30, message="the pin was never let go")
        assert engine.pin.pid is None

    try:
        drive(ConsoleApp(Backend.open(dsn, schema=SCHEMA, actor="tester"), demo=engine,
                         interval=3600), scenario)
    finally:
        engine.pin.release()


def test_the_scenarios_are_what_the_cli_offers_and_cover_every_task() -> None:
    assert tuple(SCENARIOS) == CLI_SCENARIOS
    for s in SCENARIOS.values():
        assert set(s.streams) <= set(STREAMS) and s.promise and set(s.tasks) <= set(TASKS)
    covered = {t for s in SCENARIOS.values() for t in s.tasks}
    assert covered == set(TASKS) and len(TASKS) == 12


def test_drain_is_hidden_outside_the_demo(dsn: str) -> None:
    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        await pilot.press("5")
        workers = await on_screen(app, WorkersScreen)
        assert workers.check_action("drain", ()) is False

    drive(ConsoleApp(Backend.open(dsn, schema=SCHEMA, actor="tester"), interval=3600),
          scenario)


def test_forklift_demo_in_a_terminal_runs_its_workers_and_quitting_leaves_nothing(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    """The real command in a pseudo-terminal: workers up as processes, q, nothing left."""
    import pty
    import threading
    import time

    master, slave = pty.openpty()
    env = {k: v for k, v in os.environ.items() if k not in ("FORKLIFT_DSN", "DATABASE_URL")}
    env.update(TERM="xterm-256color", COLUMNS="100", LINES="30")
    began = time.monotonic()
    demo = subprocess.Popen(
        [sys.executable, "-m", "forklift.cli.main", "demo", "--dsn", dsn, "--scenario",
         "failing", "--concurrency", "4"],
        stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True,
    )
    os.close(slave)
    screen: list[bytes] = []

    def read() -> None:  # the terminal must be read, or the console blocks writing to it
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                return
            if not chunk:
                return
            screen.append(chunk)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        def registered() -> list[int] | None:
            pids = demo_processes(demo.pid)
            if len(pids) != 2:
                return None
            row = conn.execute(f"SELECT count(*) FROM {SCHEMA}.workers WHERE state = 'running'"
                               " AND pid = ANY(%s)", (pids,)).fetchone()
            return pids if row and row[0] == 2 else None

        pids = wait_until(registered, timeout=60, message=lambda: (
            "the demo's workers never registered; the terminal showed: "
            + b"".join(screen)[-2000:].decode(errors="replace")))
        print(f"forklift demo: two workers registered {time.monotonic() - began:.1f}s after"
              " the command started")
        wait_until(lambda: b"Overview" in b"".join(screen), timeout=30,
                   message="the console never drew its overview")
        os.write(master, b"q")
        assert demo.wait(60) == 0
        assert demo_processes(demo.pid) == []
        rows = conn.execute(f"SELECT state FROM {SCHEMA}.workers WHERE pid = ANY(%s)",
                            (pids,)).fetchall()
        assert [r[0] for r in rows] == ["exited", "exited"]
    finally:
        if demo.poll() is None:
            os.killpg(demo.pid, signal.SIGKILL)
            demo.wait(10)
        for pid in demo_processes(demo.pid):
            os.kill(pid, signal.SIGKILL)
        os.close(master)
        reader.join(5)
