"""Hooks: app.on(...) for sync and async callables, run off the job's path with a bound."""

from __future__ import annotations

import threading
from typing import Any

import psycopg
import pytest
from apps.basic import running_worker
from helpers import wait_until

from forklift import Backoff, ConfigError, Fail, Forklift, JobContext, hooks
from forklift.testing import drain

FIXED = Backoff(kind="fixed", base=0.05, jitter="none")


def _app() -> Forklift:
    app = Forklift()

    @app.job(name="h.ok")
    def ok(ctx: JobContext, payload: dict[str, Any]) -> int:
        return 1

    @app.job(name="h.retry", max_attempts=2, retry=FIXED)
    async def retry(ctx: JobContext, payload: dict[str, Any]) -> None:
        raise RuntimeError("again")

    @app.job(name="h.fatal", failure_codes=["gone"])
    def fatal(ctx: JobContext, payload: dict[str, Any]) -> None:
        raise Fail("gone", "the account is gone")

    return app


def test_hooks_see_start_settle_and_dead_and_their_failures_touch_no_job(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    app = _app()
    app.use(dsn)
    seen: list[tuple[str, str, str | None, int]] = []
    release = threading.Event()

    def record(event: hooks.HookEvent) -> None:
        seen.append((event.event, event.kind, event.state, event.attempt))

    async def record_async(event: hooks.HookEvent) -> None:
        seen.append(("async:" + event.event, event.kind, event.code, event.attempt))

    def raises(event: hooks.HookEvent) -> None:
        raise KeyError("a hook's own bug")

    def blocks(event: hooks.HookEvent) -> None:
        release.wait(30)  # held until the test has seen the job finished without it

    app.on("start", record)
    app.on("settle", record)
    app.on("dead", record_async)
    app.on("settle", raises)
    app.on("dead", blocks)
    hooks.configure(app, timeout=60)
    ids = [app.enqueue(k, {}).id for k in ("h.ok", "h.retry", "h.fatal")]
    report = drain(app, retries=True)
    assert report.completed == 1
    # Every job reached its end while the "dead" hook was still blocked.
    states = dict(conn.execute("SELECT kind, state FROM forklift.jobs").fetchall())
    assert states == {"h.ok": "completed", "h.retry": "dead", "h.fatal": "dead"}
    release.set()
    h = hooks.of(app)
    assert h is not None and h.wait_idle(30)
    assert sorted(s for s in seen if s[0] == "start") == [
        ("start", "h.fatal", None, 1), ("start", "h.ok", None, 1),
        ("start", "h.retry", None, 1), ("start", "h.retry", None, 2)]
    assert sorted(s for s in seen if s[0] == "settle") == [
        ("settle", "h.fatal", "dead", 1), ("settle", "h.ok", "completed", 1),
        ("settle", "h.retry", "dead", 2), ("settle", "h.retry", "retryable", 1)]
    assert sorted(s for s in seen if s[0] == "async:dead") == [
        ("async:dead", "h.fatal", "gone", 1), ("async:dead", "h.retry", "error", 2)]
    assert h.stats.failures == 4 and h.stats.timeouts == 0 and h.stats.dropped == 0
    assert len(ids) == 3
    app.close()


def test_a_hook_past_its_bound_is_left_behind_and_counted(dsn: str) -> None:
    app = _app()
    app.use(dsn)
    gate = threading.Event()
    app.on("settle", lambda event: gate.wait(30))
    hooks.configure(app, timeout=0.2)
    app.enqueue("h.ok", {})
    drain(app)
    h = hooks.of(app)
    assert h is not None
    wait_until(lambda: h.stats.timeouts == 1, message="the slow hook was not cut off")
    gate.set()
    app.close()


def test_a_full_queue_drops_events_and_counts_them() -> None:
    h = hooks.Hooks(maxsize=2)
    gate = threading.Event()
    h.add("settle", lambda event: gate.wait(30))
    for i in range(5):
        h.emit(hooks.HookEvent("settle", i, "k", "q"))
    # One is being run (taken off the queue), two wait, the rest were dropped.
    assert h.stats.dropped in (2, 3)
    gate.set()
    assert h.wait_idle(30)
    assert h.stats.calls + h.stats.dropped == 5


def test_a_bad_hook_is_refused_at_registration() -> None:
    app = Forklift()
    with pytest.raises(ConfigError, match="'finish'"):
        app.on("finish", print)
    with pytest.raises(ConfigError, match="callable"):
        app.on("settle", "print")  # type: ignore[arg-type]


def test_the_enqueue_hook_sees_the_job_and_an_app_without_hooks_pays_nothing(dsn: str) -> None:
    app = _app()
    app.use(dsn)
    bare = _app()
    bare.use(dsn)
    seen: list[hooks.HookEvent] = []
    app.on("enqueue", seen.append)
    job = app.enqueue("h.ok", {})
    with psycopg.connect(dsn) as tx:
        inside = app.kind("h.ok").enqueue({}, conn=tx)
    bare.enqueue("h.ok", {})
    h = hooks.of(app)
    assert h is not None and h.wait_idle(10)
    assert [(e.event, e.job_id, e.kind, e.state) for e in seen] == [
        ("enqueue", job.id, "h.ok", "available"), ("enqueue", inside.id, "h.ok", "available")]
    assert seen[0].job == job
    assert hooks.of(bare) is None  # nothing registered: no queue, no thread, no event
    app.close()
    bare.close()


LOST_SQL = """
INSERT INTO forklift.jobs (queue, kind, state, attempt, max_attempts, lost, worker_id, fence,
                           lease_expires_at, attempted_at)
VALUES ('h.lost', %s, 'running', 1, %s, %s, 'ghost:1:dead', nextval('forklift.fence_seq'),
        now() - interval '1 second', now() - interval '1 minute')
RETURNING id
"""


def test_jobs_the_leaders_rescue_ends_fire_settle_and_dead(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    # A worker died holding two jobs: one goes back to the queue, one (its third lease expiry in
    # a row) goes dead with worker_lost. Only the leader's rescue sees either end.
    app = _app()
    app.use(dsn)
    seen: list[tuple[str, int, str | None, str | None]] = []
    app.on("settle", lambda e: seen.append((e.event, e.job_id, e.state, e.code)))
    app.on("dead", lambda e: seen.append((e.event, e.job_id, e.state, e.code)))
    again = conn.execute(LOST_SQL, ("h.ok", 5, 0)).fetchone()[0]  # type: ignore[index]
    lost = conn.execute(LOST_SQL, ("h.ok", 5, 2)).fetchone()[0]  # type: ignore[index]
    with running_worker(app, lease=2.0, queues=["elsewhere"]):
        h = hooks.of(app)
        assert h is not None
        wait_until(lambda: len(seen) == 3 and h.wait_idle(1), timeout=30,
                   message=lambda: f"hook events: {seen}")
    assert sorted(seen) == sorted([
        ("settle", again, "retryable", "lease_expired"),
        ("settle", lost, "dead", "worker_lost"),
        ("dead", lost, "dead", "worker_lost")])
    app.close()


def test_a_bulk_enqueue_fires_one_enqueue_event_a_job(dsn: str) -> None:
    app = _app()
    app.use(dsn)
    seen: list[tuple[int, str, str, Any]] = []
    app.on("enqueue", lambda e: seen.append((e.job_id, e.kind, e.queue, e.job)))
    ids = app.kind("h.ok").enqueue_many([{}, {}, {}])
    mixed = app.enqueue_many([("h.ok", {}), ("h.fatal", {}, {"queue": "other"})])
    h = hooks.of(app)
    assert h is not None and h.wait_idle(10)
    assert seen == [(i, "h.ok", "default", None) for i in ids] + [
        (mixed[0], "h.ok", "default", None), (mixed[1], "h.fatal", "other", None)]
    app.close()
