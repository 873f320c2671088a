"""Waiting for an event: the wait parks the job and the publisher's commit wakes it (a trigger
in its transaction, not a poll); a rolled-back publish matches nothing; an event committed after
the wait began is that wait's even when its row was stamped before; an event committed before
it is not; timeouts return None or raise; a worker restarted while its job waits loses nothing.
"""

from __future__ import annotations

import signal
from datetime import timedelta
from typing import Any

import psycopg
import pytest
import wf_common
from apps import faults
from apps.basic import running_worker
from helpers import wait_until
from wf_common import FAST, job, parked_until_past, stage_once

from forklift import Forklift
from forklift._features.durable.deps import HELD_UNTIL

app = wf_common.app
procs = wf_common.procs


def waiting(conn: psycopg.Connection[Any], job_id: int) -> bool:
    row = conn.execute("SELECT state FROM forklift.job_steps WHERE job_id = %s", (job_id,)
                       ).fetchone()
    return job(conn, job_id)["state"] == "scheduled" and row == ("waiting",)


def done(conn: psycopg.Connection[Any], job_id: int) -> bool:
    return job(conn, job_id)["state"] in ("completed", "dead", "cancelled")


def waiter(app: Forklift, **p: Any) -> int:
    return app.kind("wf.waiter").enqueue({"event": "order.paid", **p}).id


def test_the_publishers_commit_wakes_the_wait_with_the_events_data(
    app: Forklift, dsn: str, conn: psycopg.Connection[Any]
) -> None:
    w = waiter(app, match={"order": 42})
    with running_worker(app, **FAST):
        wait_until(lambda: waiting(conn, w), timeout=30)
        row = job(conn, w)
        assert row["run_at"] == HELD_UNTIL and row["attempt"] == 0  # no deadline; refunded
        app.publish_event("order.paid", {"order": 7})  # does not match
        with psycopg.connect(dsn) as pub:
            app.publish_event("order.paid", {"order": 42, "amount": 10}, conn=pub)
            assert waiting(conn, w)  # not before the commit
            pub.commit()
        # Awake in the commit itself: available (or already picked up), never still parked.
        assert job(conn, w)["state"] != "scheduled"
        wait_until(lambda: done(conn, w), timeout=30)
    row = job(conn, w)
    assert row["state"] == "completed" and row["result"] == {"data": {"order": 42, "amount": 10}}
    assert row["attempt"] == 1 and row["errors"] == []


def test_a_rolled_back_publish_matches_nothing(app: Forklift, dsn: str,
                                               conn: psycopg.Connection[Any]) -> None:
    w = waiter(app)
    with running_worker(app, **FAST):
        wait_until(lambda: waiting(conn, w), timeout=30)
        with psycopg.connect(dsn) as pub:
            app.publish_event("order.paid", {"n": 1}, conn=pub)
            pub.rollback()
        assert waiting(conn, w)
        app.publish_event("order.paid", {"n": 2})
        wait_until(lambda: done(conn, w), timeout=30)
    assert job(conn, w)["result"] == {"data": {"n": 2}}


def test_an_event_stamped_before_the_wait_but_committed_after_it_is_the_waits(
    app: Forklift, dsn: str, conn: psycopg.Connection[Any]
) -> None:
    with psycopg.connect(dsn) as pub:
        early = app.publish_event("order.paid", {"order": 1}, conn=pub)  # stamped, not committed
        w = waiter(app, match={"order": 1})
        with running_worker(app, **FAST):
            wait_until(lambda: waiting(conn, w), timeout=30)
            started = conn.execute("SELECT started_at FROM forklift.job_steps WHERE job_id = %s",
                                   (w,)).fetchone()
            assert started is not None and early.published_at < started[0]
            pub.commit()
            wait_until(lambda: done(conn, w), timeout=30)
    row = job(conn, w)
    assert row["result"] == {"data": {"order": 1}}
    woke = conn.execute("SELECT event_id FROM forklift.job_steps WHERE job_id = %s", (w,)
                        ).fetchone()
    assert woke == (early.id,)


def test_an_event_committed_before_the_wait_began_is_not_the_waits(
    app: Forklift, conn: psycopg.Connection[Any]
) -> None:
    app.publish_event("order.paid", {"order": 1})
    w = waiter(app, match={"order": 1}, timeout=0.5)
    with running_worker(app, **FAST):
        wait_until(lambda: done(conn, w), timeout=30)
    assert job(conn, w)["result"] == {"data": None}  # timed out: the old event is not taken


def test_a_wait_that_times_out_raises_when_asked(app: Forklift, conn: psycopg.Connection[Any]
                                                 ) -> None:
    w = waiter(app, timeout=0.3, on_timeout="raise")
    with running_worker(app, **FAST):
        wait_until(lambda: done(conn, w), timeout=30)
    row = job(conn, w)
    assert row["state"] == "dead" and [e["code"] for e in row["errors"]] == ["wait_timeout"]


def test_a_deadline_is_the_databases_clock(app: Forklift, conn: psycopg.Connection[Any]) -> None:
    w = waiter(app, timeout=3600)
    with running_worker(app, **FAST):
        wait_until(lambda: waiting(conn, w), timeout=30)
    row = conn.execute("SELECT s.wake_at - s.started_at, j.run_at = s.wake_at FROM"
                       " forklift.job_steps s JOIN forklift.jobs j ON j.id = s.job_id"
                       " WHERE s.job_id = %s", (w,)).fetchone()
    assert row == (timedelta(hours=1), True)


def test_a_job_waiting_while_its_worker_is_killed_is_woken_and_resumed_elsewhere(
    app: Forklift, conn: psycopg.Connection[Any], procs: faults.Procs
) -> None:
    a = procs.start(concurrency=2, lease=2.0, poll_interval=0.2,
                    extra=["--app", "apps.workflows:app"])
    faults.registered(conn, a)
    w = waiter(app, match={"order": 5})
    wait_until(lambda: waiting(conn, w), timeout=30, message=lambda: procs.logs())
    a.signal(signal.SIGKILL)
    assert a.popen.wait(10) == -signal.SIGKILL
    app.publish_event("order.paid", {"order": 5})  # nobody runs: the commit makes it available
    assert job(conn, w)["state"] == "available"
    b = procs.start(concurrency=2, lease=2.0, poll_interval=0.2,
                    extra=["--app", "apps.workflows:app"])
    faults.registered(conn, b)
    wait_until(lambda: done(conn, w), timeout=30, message=lambda: procs.logs())
    row = job(conn, w)
    assert row["result"] == {"data": {"order": 5}} and row["errors"] == []


def test_many_jobs_of_one_worker_park_and_wake_at_once_without_a_failed_attempt(
    app: Forklift, conn: psycopg.Connection[Any], procs: faults.Procs
) -> None:
    """The worker's one steps session serves every handler: concurrent parks must take turns
    on it (interleaved transactions on one connection break it and fail attempts)."""
    w = procs.start(concurrency=40, lease=5.0, poll_interval=0.2,
                    extra=["--app", "apps.workflows:app"])
    faults.registered(conn, w)
    ids = app.kind("wf.waiter").enqueue_many(
        [{"event": "order.paid", "match": {"order": i}} for i in range(40)])
    wait_until(lambda: conn.execute(
        "SELECT count(*) FROM forklift.job_steps WHERE state = 'waiting' AND job_id = ANY(%s)",
        (ids,)).fetchone() == (40,), timeout=60, message=lambda: procs.logs())
    with conn.transaction():
        for i in range(40):
            app.publish_event("order.paid", {"order": i}, conn=conn)
    wait_until(lambda: all(done(conn, j) for j in ids), timeout=60, message=lambda: procs.logs())
    rows = [job(conn, j) for j in ids]
    assert [r["errors"] for r in rows] == [[]] * 40
    assert {r["state"] for r in rows} == {"completed"} and {r["attempt"] for r in rows} == {1}


def test_jobs_woken_together_read_their_stored_steps_in_batches(
    app: Forklift, conn: psycopg.Connection[Any]
) -> None:
    """A resumed attempt reads its job's steps once; attempts resuming at once share the read
    (one statement per batch, not one per job)."""
    from forklift._features.durable.runtime import _RUNTIMES

    ids = app.kind("wf.waiter").enqueue_many(
        [{"event": "order.paid", "match": {"order": i}} for i in range(30)])
    with running_worker(app, **{**FAST, "concurrency": 30}) as w:
        wait_until(lambda: all(waiting(conn, j) for j in ids), timeout=60)
        runtime = _RUNTIMES[w.id]
        before = runtime.load_statements
        with conn.transaction():
            for i in range(30):
                app.publish_event("order.paid", {"order": i}, conn=conn)
        wait_until(lambda: all(done(conn, j) for j in ids), timeout=60)
        reads = runtime.load_statements - before
    assert [job(conn, j)["result"] for j in ids] == [{"data": {"order": i}} for i in range(30)]
    assert 1 <= reads < len(ids)


def test_a_drained_worker_leaves_its_waiting_job_parked(
    app: Forklift, conn: psycopg.Connection[Any], procs: faults.Procs
) -> None:
    a = procs.start(concurrency=2, lease=2.0, poll_interval=0.2,
                    extra=["--app", "apps.workflows:app"])
    faults.registered(conn, a)
    w = waiter(app)
    wait_until(lambda: waiting(conn, w), timeout=30, message=lambda: procs.logs())
    assert a.stop() == 0
    assert waiting(conn, w) and job(conn, w)["errors"] == []
    with running_worker(app, **FAST):
        app.publish_event("order.paid", {"x": 1})
        wait_until(lambda: done(conn, w), timeout=30)
    assert job(conn, w)["result"] == {"data": {"x": 1}}


def test_the_sync_form_waits_too(app: Forklift, conn: psycopg.Connection[Any]) -> None:
    w = app.kind("wf.waiter_sync").enqueue({"event": "e.sync"}).id
    with running_worker(app, **FAST):
        wait_until(lambda: waiting(conn, w), timeout=30)
        app.publish_event("e.sync", [1, 2])
        wait_until(lambda: done(conn, w), timeout=30)
    assert job(conn, w)["result"] == {"data": [1, 2]}


@pytest.mark.parametrize(("p", "code"), [
    ({"event": "x\x1b"}, "invalid_name"),
    ({"event": "x" * 201}, "invalid_name"),
    ({"event": "ok", "on_timeout": "explode"}, "invalid_option"),
    ({"event": "ok", "timeout": -5}, "invalid_option"),
])
def test_a_bad_wait_fails_the_job_for_good_and_stores_nothing(
    app: Forklift, conn: psycopg.Connection[Any], p: dict[str, Any], code: str
) -> None:
    w = app.kind("wf.waiter").enqueue(p).id
    with running_worker(app, **FAST):
        wait_until(lambda: done(conn, w), timeout=30)
    row = job(conn, w)
    assert row["state"] == "dead" and [e["code"] for e in row["errors"]] == [code]
    assert conn.execute("SELECT count(*) FROM forklift.job_steps").fetchone() == (0,)


@pytest.mark.parametrize("how", ["set", "nan"])
def test_a_match_that_is_not_json_fails_the_job_for_good(
    app: Forklift, conn: psycopg.Connection[Any], how: str
) -> None:
    w = app.kind("wf.bad_wait").enqueue({"how": how}).id
    with running_worker(app, **FAST):
        wait_until(lambda: done(conn, w), timeout=30)
    row = job(conn, w)
    assert row["state"] == "dead" and [e["code"] for e in row["errors"]] == ["not_json"]
    assert conn.execute("SELECT count(*) FROM forklift.job_steps").fetchone() == (0,)


def test_an_event_committing_while_the_wait_registers_is_found_by_the_wait(
    app: Forklift, dsn: str, conn: psycopg.Connection[Any]
) -> None:
    # The publisher is caught in its commit (it holds the event name's lock shared, as its
    # deferred trigger does there); the wait has taken its snapshot and waits for that lock.
    # When the publisher commits, its own trigger cannot see the wait yet: the wait must find
    # the event itself, and take it without parking.
    with psycopg.connect(dsn) as pub:
        pub.execute("SELECT pg_advisory_xact_lock_shared("
                    "hashtextextended('forklift.event:order.paid', 0))")
        early = app.publish_event("order.paid", {"order": 9}, conn=pub)
        w = waiter(app, match={"order": 9})
        with running_worker(app, **FAST):
            wait_until(lambda: conn.execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
            ).fetchone() == (1,), timeout=30)
            pub.commit()
            wait_until(lambda: done(conn, w), timeout=30)
    row = job(conn, w)
    assert row["result"] == {"data": {"order": 9}} and row["attempt"] == 1
    step = conn.execute("SELECT state, event_id FROM forklift.job_steps WHERE job_id = %s",
                        (w,)).fetchone()
    assert step == ("completed", early.id)
    assert conn.execute("SELECT count(*) FROM public.wf_seen WHERE what = 'run' AND job_id = %s",
                        (w,)).fetchone() == (1,)  # it never parked


def test_the_stager_ends_timed_out_waits_in_its_pass_and_the_resume_writes_nothing(
    app: Forklift, dsn: str, conn: psycopg.Connection[Any]
) -> None:
    from forklift._features.durable.runtime import _RUNTIMES

    ids = [waiter(app, match={"order": i}, timeout=0.5) for i in range(20)]
    with running_worker(app, **{**FAST, "concurrency": 20, "lead": False}):
        wait_until(lambda: all(waiting(conn, j) for j in ids), timeout=60)
    wait_until(lambda: parked_until_past(conn, ids), timeout=30)
    assert stage_once(dsn) == len(ids)
    assert conn.execute("SELECT count(*) FROM forklift.job_steps WHERE job_id = ANY(%s)"
                        " AND state = 'completed' AND event_id IS NULL", (ids,)
                        ).fetchone() == (len(ids),)
    app.publish_event("order.paid", {"order": 1})  # too late: the wait timed out
    with running_worker(app, **{**FAST, "concurrency": 20}) as w:
        runtime = _RUNTIMES[w.id]
        wait_until(lambda: all(done(conn, j) for j in ids), timeout=60)
        writes = runtime.statements - runtime.load_statements
    assert writes == 0
    assert [job(conn, j)["result"] for j in ids] == [{"data": None}] * len(ids)


# -- waking: only idle workers, as plain enqueues (tests/core/test_wake.py) ------------------------
def parked_waiters(app: Forklift, conn: psycopg.Connection[Any], n: int) -> list[int]:
    """``n`` jobs parked waiting for order.paid {order: i}, no worker running, no idle mark."""
    ids = [waiter(app, match={"order": i}) for i in range(n)]
    with running_worker(app, **{**FAST, "concurrency": n, "lead": False}):
        wait_until(lambda: all(waiting(conn, j) for j in ids), timeout=60)
    conn.execute("DELETE FROM forklift.idle_workers")
    return ids


def test_an_event_wake_notifies_only_when_a_worker_is_idle_on_the_queue(
    app: Forklift, dsn: str, conn: psycopg.Connection[Any]
) -> None:
    from test_wake import _listener, _mark, _marks, _notes

    first, second = parked_waiters(app, conn, 2)
    with _listener(dsn) as listen:
        app.publish_event("order.paid", {"order": 0})  # nobody idle: woken without a NOTIFY
        assert job(conn, first)["state"] == "available"
        assert _mark(conn, "w1", ["default", "other"])
        app.publish_event("order.paid", {"order": 1})  # consumes the mark, one NOTIFY
        assert job(conn, second)["state"] == "available" and _marks(conn) == [("other", "w1")]
        conn.execute("INSERT INTO forklift.jobs (queue, kind) VALUES ('other', 'wf.task')")
        # In commit order: had the first wake notified, there would be two 'default's first.
        assert _notes(listen, 2) == ["default", "other"]


def test_an_event_commit_in_flight_holds_off_a_workers_idle_mark(
    app: Forklift, dsn: str, conn: psycopg.Connection[Any]
) -> None:
    """The wake takes the queue's barrier in the publisher's commit: a worker marking itself
    idle meanwhile fails its try and claims again, so the woken job is never stranded. (SET
    CONSTRAINTS runs the deferred wake now, holding the transaction open as a commit would.)"""
    from test_wake import _mark

    (w,) = parked_waiters(app, conn, 1)
    with psycopg.connect(dsn) as pub:
        app.publish_event("order.paid", {"order": 0}, conn=pub)
        pub.execute("SET CONSTRAINTS ALL IMMEDIATE")
        assert not _mark(conn, "w1", ["default"])
        pub.commit()
    assert _mark(conn, "w1", ["default"]) and job(conn, w)["state"] == "available"


def test_an_idle_worker_is_woken_by_an_event_long_before_its_poll(
    app: Forklift, conn: psycopg.Connection[Any]
) -> None:
    from test_wake import _marks

    w = waiter(app, match={"order": 9})
    with running_worker(app, **{**FAST, "poll_interval": 120.0, "queues": ["default"]}) as wk:
        wait_until(lambda: waiting(conn, w), timeout=30)
        wait_until(lambda: ("default", wk.id) in _marks(conn), timeout=30,
                   message="the idle worker left its mark")
        app.publish_event("order.paid", {"order": 9})
        wait_until(lambda: done(conn, w), timeout=30,
                   message="the woken job was picked up by the NOTIFY")
    assert job(conn, w)["result"] == {"data": {"order": 9}}
