"""Paced backfills with an in-process worker on a real database: checkpoints in the page's
transaction, pacing on a frozen clock, live rate changes, pause, cancel, retries, `changed`."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from apps.basic import running_worker
from helpers import wait_until

from forklift import Backoff, ConfigError, Forklift, JobContext
from forklift._features.backfill import backfill as bf
from forklift.ops import backfills as ops
from forklift.ops.context import OpsContext

OPS = OpsContext(schema="forklift", actor="tester")
ITEMS = 100
PAGE = 10


class Fill:
    """A backfill over 0..ITEMS-1 that copies items into public.bf_items, with test hooks."""

    def __init__(self, dsn: str, *, rate: float = 4.0, max_attempts: int = 5,
                 name: str = "fill") -> None:
        self.dsn = dsn
        self.clock = bf.FrozenClock()
        self.page_times: list[float] = []
        self.calls = 0
        self.on_page: Callable[[int], None] = lambda page: None
        self.app = Forklift(dsn)
        fixed = Backoff(kind="fixed", base=0.01, max=0.01, jitter="none")

        def read(cursor: int | None, limit: int) -> tuple[list[int], int | None]:
            start = cursor or 0
            end = min(start + limit, ITEMS)
            return list(range(start, end)), (end if end < ITEMS else None)

        @self.app.backfill(name, page_size=PAGE, rate=rate, read=read, total=lambda: ITEMS,
                           clock=self.clock, retry=fixed, max_attempts=max_attempts)
        def process(items: list[int], conn: psycopg.Connection[Any]) -> None:
            self.calls += 1
            self.page_times.append(self.clock.now())
            conn.execute("INSERT INTO public.bf_items (item) SELECT unnest(%s::int[])", (items,))
            self.on_page(items[0] // PAGE)

        self.definition = self.app.backfills[name]

    def act(self, fn: Callable[..., Any], *args: Any) -> Any:
        """An operator acting from their own session while a page is in flight."""
        with psycopg.connect(self.dsn, autocommit=True) as other:
            return fn(other, OPS, self.definition.name, *args)


@pytest.fixture
def db(conn: psycopg.Connection[Any]) -> psycopg.Connection[Any]:
    conn.execute("CREATE TABLE public.bf_items (item int NOT NULL)")
    return conn


@pytest.fixture
def fill(dsn: str) -> Iterator[Fill]:
    f = Fill(dsn)
    yield f
    f.app.close()


def rows(conn: psycopg.Connection[Any]) -> tuple[int, int]:
    got = conn.execute("SELECT count(*), count(DISTINCT item) FROM public.bf_items").fetchone()
    assert got is not None
    return int(got[0]), int(got[1])


def state(conn: psycopg.Connection[Any], name: str = "fill") -> ops.BackfillInfo:
    return ops.get_backfill(conn, OPS, name)


def wait_state(conn: psycopg.Connection[Any], wanted: str, name: str = "fill") -> ops.BackfillInfo:
    return wait_until(lambda: (s := state(conn, name)).state == wanted and s, timeout=30,
                      message=lambda: f"backfill is {state(conn, name)}, not {wanted}")


def runner_jobs(conn: psycopg.Connection[Any]) -> list[tuple[int, str, Any]]:
    return conn.execute(
        "SELECT id, state, result FROM forklift.jobs WHERE kind = 'forklift.backfill' ORDER BY id"
    ).fetchall()


def no_live_runner(conn: psycopg.Connection[Any]) -> bool:
    return all(s in ("completed", "cancelled", "dead") for _, s, _ in runner_jobs(conn))


def settle_worker(conn: psycopg.Connection[Any], app: Forklift) -> None:
    """Proof the worker has moved on: a job enqueued now is claimed and finished."""
    @app.job(name=f"marker.{id(conn)}.{len(app.kinds)}", queue="backfills")
    def marker(ctx: JobContext, args: dict[str, Any]) -> None:
        return None

    job = marker.enqueue({}, conn=conn)
    wait_until(lambda: conn.execute("SELECT state FROM forklift.jobs WHERE id = %s",
                                    (job.id,)).fetchone() == ("completed",),
               timeout=30, message="the marker job did not run")


# -- the page loop ------------------------------------------------------------------------------
def test_runs_to_the_end_once_per_item_paced_on_its_clock(db: psycopg.Connection[Any], fill: Fill) -> None:
    with running_worker(fill.app, concurrency=2, leader_interval=0.1):
        started = ops.start(db, OPS, "fill", definition=fill.definition)
        assert started.outcome == "started" and not started.changed
        done = wait_state(db, "completed")
    assert rows(db) == (ITEMS, ITEMS)
    assert (done.items_done, done.pages_done, done.total, done.fraction) == (ITEMS, 10, ITEMS, 1.0)
    # 4 pages/s with a burst of one: the first page at once, then one every 0.25 s of its clock.
    gaps = [b - a for a, b in zip(fill.page_times, fill.page_times[1:], strict=False)]
    assert gaps == pytest.approx([0.25] * 9)
    assert sum(fill.clock.waits) == pytest.approx(2.25)
    assert [s for _, s, _ in runner_jobs(db)] == ["completed"]
    assert runner_jobs(db)[0][2]["completed"] == "completed"


def test_an_attempt_gives_its_slot_back_after_a_slice_and_keeps_the_pace(
    db: psycopg.Connection[Any], dsn: str
) -> None:
    fill = Fill(dsn, rate=1.0)  # ten pages: nine seconds of its clock, so one slice boundary
    try:
        with running_worker(fill.app, concurrency=2, leader_interval=0.1) as worker:
            ops.start(db, OPS, "fill", definition=fill.definition)
            wait_state(db, "completed")
            claims = worker.stats.claimed
        gaps = [b - a for a, b in zip(fill.page_times, fill.page_times[1:], strict=False)]
        assert gaps == pytest.approx([1.0] * 9)
        assert claims == 2  # one job, claimed again after its snooze; no attempt spent
        assert db.execute("SELECT attempt, state FROM forklift.jobs WHERE kind = 'forklift.backfill'"
                          ).fetchall() == [(1, "completed")]
        assert rows(db) == (ITEMS, ITEMS)
    finally:
        fill.app.close()


def test_rate_changes_live_from_the_next_page(db: psycopg.Connection[Any], fill: Fill) -> None:
    fill.on_page = lambda page: page == 3 and fill.act(ops.set_rate, 10.0)
    with running_worker(fill.app, concurrency=2, leader_interval=0.1):
        ops.start(db, OPS, "fill", definition=fill.definition)
        done = wait_state(db, "completed")
    gaps = [b - a for a, b in zip(fill.page_times, fill.page_times[1:], strict=False)]
    assert gaps == pytest.approx([0.25] * 3 + [0.1] * 6)
    assert done.rate == 10.0
    assert rows(db) == (ITEMS, ITEMS)
    audit = db.execute("SELECT action, target->>'rate' FROM forklift.audit ORDER BY id").fetchall()
    assert audit == [("backfill.start", None), ("backfill.rate", "10.0")]


def test_pause_holds_until_resume(db: psycopg.Connection[Any], fill: Fill) -> None:
    fill.on_page = lambda page: page == 3 and fill.act(ops.pause)
    with running_worker(fill.app, concurrency=2, leader_interval=0.1):
        ops.start(db, OPS, "fill", definition=fill.definition)
        paused = wait_state(db, "paused")
        wait_until(lambda: no_live_runner(db), timeout=30, message="the runner did not stop")
        settle_worker(db, fill.app)
        # The page in flight when the pause came landed; nothing after it.
        assert state(db).pages_done == 4 and rows(db) == (40, 40) and fill.calls == 4
        assert paused.paused_by == "tester" and paused.eta == "—"
        fill.on_page = lambda page: None
        resumed = ops.resume(db, OPS, "fill")
        assert resumed.state == "running"
        wait_state(db, "completed")
    assert rows(db) == (ITEMS, ITEMS) and fill.calls == 10


def test_cancel_rolls_back_the_page_in_flight(db: psycopg.Connection[Any], fill: Fill) -> None:
    fill.on_page = lambda page: page == 3 and fill.act(ops.cancel)
    with running_worker(fill.app, concurrency=2, leader_interval=0.1):
        ops.start(db, OPS, "fill", definition=fill.definition)
        wait_until(lambda: no_live_runner(db) and state(db).state == "cancelled", timeout=30,
                   message=lambda: f"not cancelled: {state(db)}")
    info = state(db)
    assert (info.pages_done, info.items_done, info.cursor) == (3, 30, 30)
    assert rows(db) == (30, 30)  # page 3's rows went with its refused checkpoint
    with pytest.raises(ops.BackfillNotLive):
        ops.pause(db, OPS, "fill")


def test_a_failing_page_retries_then_goes_on_with_a_fresh_budget(db: psycopg.Connection[Any], fill: Fill) -> None:
    failures = {"left": 2}

    def flaky(page: int) -> None:
        if page == 5 and failures["left"]:
            failures["left"] -= 1
            raise ConnectionError("upstream said 503 to https://user:hunter2@example.com/")

    fill.on_page = flaky
    with running_worker(fill.app, concurrency=2, leader_interval=0.1):
        ops.start(db, OPS, "fill", definition=fill.definition)
        done = wait_state(db, "completed")
    assert rows(db) == (ITEMS, ITEMS)
    assert done.error_count == 2 and done.last_error is not None
    assert done.last_error["type"] == "ConnectionError" and "hunter2" not in str(done.last_error)
    jobs = runner_jobs(db)
    # The first job spent two attempts on page 5, then handed the run to a fresh job.
    assert [s for _, s, _ in jobs] == ["completed", "completed"]
    assert "handed_over" in jobs[0][2] and jobs[0][2]["handed_over"] == jobs[1][0]


def test_exhausted_retries_fail_the_run_with_its_cursor_kept(db: psycopg.Connection[Any], dsn: str) -> None:
    fill = Fill(dsn, max_attempts=2)
    broken = threading.Event()
    broken.set()

    def bad_page(page: int) -> None:
        if page == 5 and broken.is_set():
            raise ValueError("row 57 does not parse")

    fill.on_page = bad_page
    try:
        with running_worker(fill.app, concurrency=2, leader_interval=0.1):
            ops.start(db, OPS, "fill", definition=fill.definition)
            failed = wait_state(db, "failed")
            wait_until(lambda: no_live_runner(db), timeout=30, message="the runner is still live")
            assert (failed.cursor, failed.items_done, failed.error_count) == (50, 50, 2)
            assert failed.last_error is not None and "row 57" in failed.last_error["message"]
            assert rows(db) == (50, 50)
            assert ops.start(db, OPS, "fill").outcome == "existing"  # a failed run holds the name
            broken.clear()
            ops.resume(db, OPS, "fill")
            wait_state(db, "completed")
        assert rows(db) == (ITEMS, ITEMS)
    finally:
        fill.app.close()


# -- starting: idempotence and `changed` ----------------------------------------------------------
def _finish(conn: psycopg.Connection[Any], name: str = "fill") -> None:
    conn.execute("UPDATE forklift.backfill_runs SET state = 'completed', finished_at = now()"
                 " WHERE name = %s AND state = 'running'", (name,))


def test_start_is_idempotent_and_a_completed_backfill_needs_force(db: psycopg.Connection[Any], fill: Fill) -> None:
    first = ops.start(db, OPS, "fill", definition=fill.definition, rate=2.0, from_cursor=30)
    again = ops.start(db, OPS, "fill", definition=fill.definition)
    assert (first.outcome, again.outcome) == ("started", "existing")
    assert first.backfill.run_id == again.backfill.run_id
    assert (first.backfill.rate, first.backfill.cursor, first.backfill.start_cursor) == (2.0, 30, 30)
    assert len(runner_jobs(db)) == 1
    _finish(db)
    refused = ops.start(db, OPS, "fill", definition=fill.definition)
    assert (refused.outcome, refused.changed) == ("completed", False)
    assert "--force" in refused.message
    forced = ops.start(db, OPS, "fill", force=True)  # the recorded definition serves without an app
    assert forced.outcome == "started" and forced.backfill.run_id != first.backfill.run_id
    outcomes = [r[0] for r in db.execute("SELECT outcome FROM forklift.audit ORDER BY id")]
    assert outcomes == ["done", "noop: existing", "refused: completed", "done"]


def test_changed_code_is_reported(db: psycopg.Connection[Any], dsn: str) -> None:
    def read(cursor: int | None, limit: int) -> tuple[list[int], int | None]:
        return [], None

    v1, v2 = Forklift(dsn), Forklift(dsn)

    @v1.backfill("copy", read=read)
    def copy_v1(items: list[int], conn: psycopg.Connection[Any]) -> None:
        conn.execute("SELECT 1")

    @v2.backfill("copy", read=read)
    def copy_v2(items: list[int], conn: psycopg.Connection[Any]) -> None:
        conn.execute("SELECT 2")  # the same backfill, its processing changed

    assert copy_v1.code_hash != copy_v2.code_hash
    ops.start(db, OPS, "copy", definition=copy_v1)
    _finish(db, "copy")
    assert ops.start(db, OPS, "copy", definition=copy_v1).changed is False
    refused = ops.start(db, OPS, "copy", definition=copy_v2)
    assert (refused.outcome, refused.changed) == ("completed", True)
    assert "changed" in refused.message
    assert ops.get_backfill(db, OPS, "copy").changed
    forced = ops.start(db, OPS, "copy", definition=copy_v2, force=True)
    assert forced.outcome == "started"
    _finish(db, "copy")
    assert not ops.get_backfill(db, OPS, "copy").changed


def test_refusals(db: psycopg.Connection[Any], fill: Fill) -> None:
    with pytest.raises(ops.BackfillNotFound, match="none recorded"):
        ops.start(db, OPS, "nope")
    with pytest.raises(ops.BackfillNotFound):
        ops.resume(db, OPS, "nope")
    ops.start(db, OPS, "fill", definition=fill.definition)
    for bad in (0, -1, float("nan"), 1e9):
        with pytest.raises(ops.InvalidRate):
            ops.set_rate(db, OPS, "fill", bad)
    ro = OpsContext(schema="forklift", actor="ro", read_only=True)
    from forklift import ReadOnly

    with pytest.raises(ReadOnly):
        ops.pause(db, ro, "fill")
    assert [b.name for b in ops.list_backfills(db, OPS)] == ["fill"]


# -- pieces without a database --------------------------------------------------------------------
def test_token_bucket_on_a_frozen_clock() -> None:
    clock = bf.FrozenClock()
    bucket = bf.TokenBucket(2.0, clock)
    assert bucket.wait_time() == 0
    bucket.take()
    assert bucket.wait_time() == pytest.approx(0.5)
    clock.advance(0.2)
    assert bucket.wait_time() == pytest.approx(0.3)
    bucket.set_rate(10.0)  # the 0.4 token earned so far is kept; the rest comes faster
    assert bucket.wait_time() == pytest.approx(0.06)
    clock.advance(100)
    assert bucket.wait_time() == 0
    bucket.take()
    assert bucket.wait_time() == pytest.approx(0.1)  # the burst is one page, however long idle


def test_pace_rates_series_and_eta() -> None:
    pace: list[list[float]] = []
    for second in range(1000, 1030):
        pace = bf.pace_add(pace, second + 0.5, 1, 50)
    pace = bf.pace_add(pace, 1029.9, 1, 50)
    assert pace[-1] == [1029.0, 2.0, 100.0]
    items_s, pages_s = bf.pace_rates(pace, now=1030.0, since=900.0)
    assert items_s == pytest.approx(1550 / 30) and pages_s == pytest.approx(31 / 30)
    # A run 5 s old is measured over its 5 s, not diluted over the window.
    assert bf.pace_rates([[1000.0, 5.0, 500.0]], now=1005.0, since=1000.0)[0] == pytest.approx(100)
    series = bf.pace_series(pace, now=1030.0, buckets=15, width=2.0)
    assert len(series) == 15 and series[0] == pytest.approx(50) and series[-1] == pytest.approx(75)
    assert bf.pace_add([[1.0, 1.0, 1.0]], 1000.0, 1, 1) == [[1000.0, 1.0, 1.0]]  # old samples go
    assert [ops.format_eta(s) for s in (None, 4.4, 61, 3 * 3600 + 120, 90000)] == [
        "—", "4s", "1m 01s", "3h 02m", "1d 01h"]


def test_declarations_are_checked() -> None:
    app = Forklift("postgresql://unused")

    def read(cursor: Any, limit: int) -> tuple[list[Any], Any]:
        return [], None

    with pytest.raises(ConfigError, match="read="):
        app.backfill("a")(lambda items, conn: None)
    with pytest.raises(ConfigError, match="rate"):
        app.backfill("b", read=read, rate=0)(lambda items, conn: None)
    with pytest.raises(ConfigError, match="plain functions"):
        async def process(items: list[Any], conn: Any) -> None:
            return None

        app.backfill("c", read=read)(process)

    @app.backfill("d", page_size=5)
    class Walk:
        def read(self, cursor: Any, limit: int) -> tuple[list[Any], Any]:
            return [], None

        def process(self, items: list[Any], conn: Any) -> None:
            return None

    assert isinstance(Walk, bf.Backfill) and Walk.page_size == 5
    with pytest.raises(ConfigError, match="already declared"):
        app.backfill("d", read=read)(lambda items, conn: None)
    assert "forklift.backfill" in app.kinds and app.kinds["forklift.backfill"].queue == "backfills"


# -- the demo -----------------------------------------------------------------------------------
def test_the_demo_schedule_starts_a_paced_backfill_an_operator_can_slow(dsn: str, conn: psycopg.Connection[Any]) -> None:
    from forklift_console import demo_app as demo

    demo.app.use(dsn)
    try:
        assert demo.tidy(None, {}) == {"reindex": "started"}  # type: ignore[arg-type]
        assert demo.tidy(None, {}) == {"reindex": "running"}  # type: ignore[arg-type]
        with running_worker(demo.app, concurrency=2, leader_interval=0.1, queues=["backfills"]):
            moving = wait_until(
                lambda: (b := state(conn, "demo.reindex")).items_per_s > 0 and b.eta != "—" and b,
                timeout=30, message=lambda: f"no pace yet: {state(conn, 'demo.reindex')}")
            assert moving.total == demo.ACCOUNTS and moving.rate == demo.REINDEX_RATE
            slowed = ops.set_rate(conn, OPS, "demo.reindex", 0.5)
            assert slowed.rate == 0.5 and slowed.state == "running"
            ops.pause(conn, OPS, "demo.reindex")
            wait_until(lambda: no_live_runner(conn), timeout=30, message="the demo backfill did not pause")
        assert demo.tidy(None, {}) == {"reindex": "paused"}  # type: ignore[arg-type]
    finally:
        demo.app.close()
        demo.app.use(None)  # type: ignore[arg-type]
