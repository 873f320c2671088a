"""Batches: serial order, max_parallel, failure isolation, idempotent and concurrent submits, the
caps, cancel, callbacks, retry of failed targets, requeue accounting, the operator API and CLI.

Workers run in-process (``apps.basic.running_worker``) against the test's own database; handlers
record what they saw in a ledger table (``apps.batches``). Crash tests are in
test_batches_crash.py.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from apps import batches as bapp
from apps.basic import running_worker
from helpers import wait_until
from typer.testing import CliRunner

from forklift import Forklift, InvalidPayload
from forklift._base.errors import (
    BatchKeyConflict,
    BatchNotFound,
    Busy,
    CallerBusy,
    InvalidOption,
    NotRequeueable,
    TooManyTargets,
)
from forklift._db.sqltext import render
from forklift._features.batches import Batch, BatchLimits, Callback
from forklift._worker.claim import CLAIM_SQL
from forklift.ops import actions
from forklift.ops import batches as ops
from forklift.ops.context import OpsContext

CTX = OpsContext(schema="forklift", actor="tester")
FAST = {"concurrency": 4, "lease": 5.0, "poll_interval": 0.2, "leader_interval": 0.1}


@pytest.fixture
def app(dsn: str, conn: psycopg.Connection[Any]) -> Iterator[Forklift]:
    with bapp.bound(dsn, conn) as bound_app:
        yield bound_app


def wait_finished(conn: psycopg.Connection[Any], batch_id: int, timeout: float = 30) -> str:
    return wait_until(
        lambda: bapp.finished(conn, batch_id), timeout=timeout,
        message=lambda: f"batch {batch_id} did not finish: {bapp.batch_row(conn, batch_id)}"
        f" targets {bapp.target_states(conn, batch_id)}",
    )


def count(conn: psycopg.Connection[Any], query: str, *params: Any) -> int:
    row = conn.execute(query, params).fetchone()
    assert row is not None
    return int(row[0])


def started(conn: psycopg.Connection[Any], batch_id: int) -> list[int]:
    return [r["idx"] for r in bapp.ledger(conn, batch_id, "start")]


def peak(conn: psycopg.Connection[Any], batch_id: int) -> int:
    """The most targets of the batch that were running at once, as the handlers saw it."""
    return max(r["running"] for r in bapp.ledger(conn, batch_id) if r["running"] is not None)


def callbacks(conn: psycopg.Connection[Any], batch_id: int) -> list[dict[str, Any]]:
    return [r["detail"] for r in bapp.ledger(conn, batch_id, "callback")]


# -- running ----------------------------------------------------------------------------------
def test_serial_batch_runs_targets_in_order_one_at_a_time(
    app: Forklift, conn: psycopg.Connection[Any]
) -> None:
    targets = [{"n": i, "work": 0.02} for i in range(6)]
    batch, reused = app.batch(
        "batch.step", targets, caller="alice", mode="serial",
        on_complete="batch.notify", on_success=Callback("batch.note", {"text": "all good"}),
        meta={"ticket": "T-1"},
    )
    assert not reused and batch.state == "running" and batch.total == 6 and batch.in_flight == 1
    # Before any worker runs, only target 0 is claimable; the rest wait their turn.
    assert bapp.target_states(conn, batch.id) == ["available"] + ["waiting"] * 5

    with running_worker(app, **FAST):
        assert wait_finished(conn, batch.id) == "done"
        wait_until(lambda: len(bapp.ledger(conn, batch.id, "note")) == 1, timeout=30)

    assert started(conn, batch.id) == [0, 1, 2, 3, 4, 5]
    assert peak(conn, batch.id) == 1  # never two at once
    ends = [r for r in bapp.ledger(conn, batch.id) if r["what"] == "end"]
    starts = bapp.ledger(conn, batch.id, "start")
    for before, after in zip(ends, starts[1:], strict=False):
        assert before["at"] <= after["at"], "target i+1 started before target i ended"
    row = bapp.batch_row(conn, batch.id)
    assert (row["completed"], row["failed"], row["cancelled"], row["in_flight"]) == (6, 0, 0, 0)
    assert row["expires_at"] > batch.expires_at  # every settle renews the TTL
    assert row["settlements"] == 1
    [summary] = callbacks(conn, batch.id)
    assert summary["summary"] == {
        "batch_id": batch.id, "state": "done", "kind": "batch.step", "caller": "alice",
        "key": batch.key, "total": 6, "completed": 6, "failed": 0, "cancelled": 0,
        "settlement": 1, "meta": {"ticket": "T-1"},
    }
    [note] = bapp.ledger(conn, batch.id, "note")
    assert note["detail"]["text"] == "all good" and note["detail"]["batch"]["state"] == "done"
    assert row["complete_job_id"] and row["success_job_id"]
    results = conn.execute(
        "SELECT batch_index, result, meta FROM forklift.jobs WHERE batch_id = %s"
        " ORDER BY batch_index", (batch.id,)).fetchall()
    assert [r[1] for r in results] == [{"n": i, "square": i * i} for i in range(6)]
    assert results[3][2] == {"batch_id": batch.id, "batch_index": 3}


def test_parallel_batch_keeps_at_most_max_parallel_in_flight(
    app: Forklift, conn: psycopg.Connection[Any]
) -> None:
    batch, _ = app.batch(
        "batch.step", [{"n": i, "work": 0.03} for i in range(12)], caller="bob",
        max_parallel=3,
    )
    assert bapp.target_states(conn, batch.id) == ["available"] * 3 + ["waiting"] * 9
    with running_worker(app, **{**FAST, "concurrency": 8}):
        assert wait_finished(conn, batch.id) == "done"
    assert sorted(started(conn, batch.id)) == list(range(12))
    assert peak(conn, batch.id) <= 3


def test_unlimited_parallel_batch_releases_every_target_at_once(
    app: Forklift, conn: psycopg.Connection[Any]
) -> None:
    batch, _ = app.batch("batch.step", [{"n": i} for i in range(5)], caller="bob")
    assert bapp.target_states(conn, batch.id) == ["available"] * 5
    with running_worker(app, **FAST):
        assert wait_finished(conn, batch.id) == "done"


def test_a_failed_target_does_not_stop_the_batch(app: Forklift, conn: psycopg.Connection[Any]) -> None:
    targets = [{"n": 0}, {"n": 1, "fail": True}, {"n": 2, "flaky": 1}, {"n": 3}]
    batch, _ = app.batch("batch.step", targets, caller="carol", mode="serial",
                         on_complete="batch.notify", on_success="batch.notify")
    with running_worker(app, **FAST):
        assert wait_finished(conn, batch.id) == "partial"
        wait_until(lambda: callbacks(conn, batch.id), timeout=30)
    row = bapp.batch_row(conn, batch.id)
    assert (row["completed"], row["failed"]) == (3, 1)
    detail = ops.show(conn, CTX, batch.id)
    by_index = {t.index: t for t in detail.targets}
    assert by_index[1].state == "dead" and by_index[1].error is not None
    assert by_index[1].error["code"] == "boom"
    assert by_index[2].state == "completed" and by_index[2].attempt == 2  # retried, then done
    assert by_index[2].result == {"n": 2, "square": 4}
    # on_success is for `done` only; on_complete always, once.
    assert [c["summary"]["state"] for c in callbacks(conn, batch.id)] == ["partial"]


def test_a_batch_whose_targets_all_fail_is_failed(app: Forklift, conn: psycopg.Connection[Any]) -> None:
    batch, _ = app.batch("batch.step", [{"n": i, "fail": True} for i in range(3)], caller="dan")
    with running_worker(app, **FAST):
        assert wait_finished(conn, batch.id) == "failed"


# -- submit: validation, idempotency, caps ------------------------------------------------------
def test_a_bad_target_refuses_the_batch_and_stores_nothing(
    app: Forklift, conn: psycopg.Connection[Any]
) -> None:
    with pytest.raises(InvalidPayload) as info:
        app.batch("batch.step", [{"n": 1}, {"n": "two"}], caller="eve")
    assert "target 1" in info.value.message and info.value.detail["target"] == 1
    for bad in ([], "abc", {"n": 1}):
        with pytest.raises(InvalidOption):
            app.batch("batch.step", bad, caller="eve")
    with pytest.raises(InvalidOption):
        app.batch("batch.step", [{"n": 1}], caller="eve", mode="serial", max_parallel=2)
    with pytest.raises(InvalidOption):
        app.batch("batch.step", [{"n": 1}], caller="")
    with pytest.raises(InvalidOption):  # the summary cannot be a Note's payload
        app.batch("batch.step", [{"n": 1}], caller="eve", on_complete="batch.note")
    assert count(conn, "SELECT count(*) FROM forklift.batches") == 0
    assert count(conn, "SELECT count(*) FROM forklift.jobs") == 0


def test_resubmitting_returns_the_same_batch_and_runs_nothing_twice(
    app: Forklift, conn: psycopg.Connection[Any]
) -> None:
    first, reused = app.batch("batch.step", [{"n": 1, "work": 0.01}, {"n": 2}], caller="fay")
    assert not reused
    # Field order and object identity do not matter: the targets' canonical JSON does.
    again, reused = app.batch("batch.step", [{"work": 0.01, "n": 1}, {"n": 2}], caller="fay")
    assert reused and again.id == first.id and again.reused
    other_caller, reused = app.batch("batch.step", [{"n": 1, "work": 0.01}, {"n": 2}],
                                     caller="gus")
    assert not reused and other_caller.id != first.id
    assert count(conn, "SELECT count(*) FROM forklift.jobs WHERE batch_id = %s", first.id) == 2

    with running_worker(app, **FAST):
        assert wait_finished(conn, first.id) == "done"
        wait_finished(conn, other_caller.id)
        # Finished but within its TTL: still the same batch, in any state, nothing re-run.
        done, reused = app.batch("batch.step", [{"n": 1, "work": 0.01}, {"n": 2}], caller="fay")
        assert reused and done.id == first.id and done.state == "done"
    assert sorted(started(conn, first.id)) == [0, 1]
    assert count(conn, "SELECT count(*) FROM forklift.jobs WHERE batch_id = %s", first.id) == 2

    # Past the TTL, the same submit is a fresh batch.
    conn.execute("UPDATE forklift.batches SET expires_at = now() - interval '1 second'"
                 " WHERE id = %s", (first.id,))
    fresh, reused = app.batch("batch.step", [{"n": 1, "work": 0.01}, {"n": 2}], caller="fay")
    assert not reused and fresh.id != first.id and fresh.key == first.key


def test_an_explicit_key_names_the_batch_whatever_its_targets(
    app: Forklift, conn: psycopg.Connection[Any]
) -> None:
    one, _ = app.batch("batch.step", [{"n": 1}], caller="hal", key="nightly-2024-05-01")
    two, reused = app.batch("batch.step", [{"n": 9}], caller="hal", key="nightly-2024-05-01")
    assert reused and two.id == one.id and one.key == "nightly-2024-05-01"
    with pytest.raises(BatchKeyConflict):
        app.batch("batch.notify", [bapp_summary()], caller="hal", key="nightly-2024-05-01")


def bapp_summary() -> dict[str, Any]:
    return {"batch_id": 1, "state": "done", "kind": "k", "caller": "c", "key": "k", "total": 1,
            "completed": 1, "failed": 0, "cancelled": 0, "settlement": 1, "meta": {}}


def test_concurrent_identical_submits_make_one_batch(
    app: Forklift, conn: psycopg.Connection[Any]
) -> None:
    targets = [{"n": i} for i in range(50)]
    start = threading.Barrier(8)
    results: list[tuple[Batch, bool]] = []
    errors: list[BaseException] = []

    def submit() -> None:
        own = Forklift(app.dsn)
        own.kinds = app.kinds  # same kinds, own pool: eight real sessions racing
        try:
            start.wait(10)
            results.append(own.batch("batch.step", targets, caller="ivy"))
        except BaseException as exc:
            errors.append(exc)
        finally:
            own.close()

    threads = [threading.Thread(target=submit) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    assert len({b.id for b, _ in results}) == 1
    assert sorted(r for _, r in results) == [False] + [True] * 7
    assert count(conn, "SELECT count(*) FROM forklift.batches") == 1
    assert count(conn, "SELECT count(*) FROM forklift.jobs") == 50


def test_caps_refuse_with_stable_codes_and_reuse_beats_them(
    app: Forklift, conn: psycopg.Connection[Any]
) -> None:
    app.batch_limits = BatchLimits(max_targets=3, per_caller=1, max_live=2)
    with pytest.raises(TooManyTargets) as too_many:
        app.batch("batch.step", [{"n": i} for i in range(4)], caller="jo")
    assert too_many.value.code == "too_many_targets" and too_many.value.detail["limit"] == 3

    a, _ = app.batch("batch.step", [{"n": 1}], caller="jo")
    with pytest.raises(CallerBusy) as busy_caller:
        app.batch("batch.step", [{"n": 2}], caller="jo")
    assert busy_caller.value.code == "caller_busy"
    same, reused = app.batch("batch.step", [{"n": 1}], caller="jo")  # idempotency first
    assert reused and same.id == a.id

    app.batch("batch.step", [{"n": 1}], caller="kim")
    with pytest.raises(Busy) as busy:
        app.batch("batch.step", [{"n": 1}], caller="lee")
    assert busy.value.code == "busy" and busy.value.detail == {"live": 2, "limit": 2}
    assert count(conn, "SELECT count(*) FROM forklift.batches") == 2
    assert count(conn, "SELECT count(*) FROM forklift.jobs") == 2

    # "Live" is by state: once jo's batch is over, jo and lee may submit again.
    assert ops.cancel(conn, CTX, a.id)
    app.batch("batch.step", [{"n": 2}], caller="jo")
    with pytest.raises(Busy):
        app.batch("batch.step", [{"n": 3}], caller="lee")


def test_submit_joins_the_callers_transaction(app: Forklift, dsn: str,
                                              conn: psycopg.Connection[Any]) -> None:
    with psycopg.connect(dsn) as mine:
        batch, _ = app.batch("batch.step", [{"n": 1}], caller="max", conn=mine)
        assert count(conn, "SELECT count(*) FROM forklift.batches") == 0  # not committed yet
        mine.rollback()
    assert count(conn, "SELECT count(*) FROM forklift.batches") == 0
    assert count(conn, "SELECT count(*) FROM forklift.jobs") == 0
    with psycopg.connect(dsn) as mine:
        batch, _ = app.batch("batch.step", [{"n": 1}], caller="max", conn=mine)
        mine.commit()
    assert bapp.batch_row(conn, batch.id)["total"] == 1


def test_batch_async(app: Forklift, conn: psycopg.Connection[Any]) -> None:
    async def main() -> tuple[tuple[Batch, bool], tuple[Batch, bool]]:
        try:
            one = await app.batch_async("batch.step", [{"n": 1}, {"n": 2}], caller="ned",
                                        mode="serial")
            two = await app.batch_async("batch.step", [{"n": 1}, {"n": 2}], caller="ned")
            return one, two
        finally:
            await app.aclose()

    (first, r1), (second, r2) = asyncio.run(main())
    assert not r1 and r2 and first.id == second.id and first.mode == "serial"
    assert bapp.target_states(conn, first.id) == ["available", "waiting"]


# -- cancel ------------------------------------------------------------------------------------
def test_cancel_stops_waiting_targets_and_keeps_the_in_flight_result(
    app: Forklift, conn: psycopg.Connection[Any]
) -> None:
    targets = [{"n": 0, "hold": "c0"}, {"n": 1}, {"n": 2}, {"n": 3}]
    batch, _ = app.batch("batch.step", targets, caller="olga", mode="serial",
                         on_complete="batch.notify", on_success="batch.notify")
    with running_worker(app, **FAST):
        wait_until(lambda: started(conn, batch.id) == [0], timeout=30)
        assert ops.cancel(conn, CTX, batch.id, reason="wrong input")
        # At once: the waiting targets are cancelled; the running one goes on.
        assert bapp.target_states(conn, batch.id) == ["running"] + ["cancelled"] * 3
        row = bapp.batch_row(conn, batch.id)
        assert row["state"] == "running" and row["cancel_requested_at"] is not None
        assert ops.cancel(conn, CTX, batch.id)  # still running: nothing new, no error
        bapp.open_gate(conn, "c0")
        assert wait_finished(conn, batch.id) == "cancelled"
        wait_until(lambda: callbacks(conn, batch.id), timeout=30)
    assert started(conn, batch.id) == [0]  # serial stopped before the next target
    detail = ops.show(conn, CTX, batch.id)
    assert [t.state for t in detail.targets] == ["completed"] + ["cancelled"] * 3
    assert detail.targets[0].result == {"n": 0, "square": 0}  # stored, readable
    assert detail.targets[1].error is not None and "wrong input" in detail.targets[1].error["message"]
    row = bapp.batch_row(conn, batch.id)
    assert (row["completed"], row["cancelled"]) == (1, 3)
    assert [c["summary"]["state"] for c in callbacks(conn, batch.id)] == ["cancelled"]
    assert not ops.cancel(conn, CTX, batch.id)  # terminal
    assert not ops.cancel(conn, CTX, 999_999)  # unknown
    outcomes = [r[0] for r in conn.execute(
        "SELECT outcome FROM forklift.audit WHERE action = 'cancel batch' ORDER BY id")]
    assert outcomes == ["done", "done", "noop: already cancelled", "noop: unknown batch"]


def test_a_failing_in_flight_target_of_a_cancelled_batch_is_not_retried(
    app: Forklift, conn: psycopg.Connection[Any]
) -> None:
    batch, _ = app.batch("batch.step", [{"n": 0, "hold": "f0", "flaky": 5}, {"n": 1}],
                         caller="pam", mode="serial")
    with running_worker(app, **FAST):
        wait_until(lambda: started(conn, batch.id) == [0], timeout=30)
        assert ops.cancel(conn, CTX, batch.id)
        bapp.open_gate(conn, "f0")
        assert wait_finished(conn, batch.id) == "cancelled"
    assert bapp.target_states(conn, batch.id) == ["cancelled", "cancelled"]
    assert started(conn, batch.id) == [0]
    errors = conn.execute("SELECT errors FROM forklift.jobs WHERE batch_id = %s"
                          " AND batch_index = 0", (batch.id,)).fetchone()[0]
    assert [e["code"] for e in errors] == ["error"]  # the failed attempt is on record


def test_cancelling_a_batch_with_nothing_in_flight_settles_it_at_once(
    app: Forklift, conn: psycopg.Connection[Any]
) -> None:
    batch, _ = app.batch("batch.step", [{"n": i} for i in range(3)], caller="quinn",
                         on_complete="batch.notify")
    assert ops.cancel(conn, CTX, batch.id)
    row = bapp.batch_row(conn, batch.id)
    assert row["state"] == "cancelled" and row["cancelled"] == 3 and row["complete_job_id"]
    assert count(conn, "SELECT count(*) FROM forklift.jobs WHERE kind = 'batch.notify'") == 1


# -- retry, requeue ----------------------------------------------------------------------------
def test_retry_failed_runs_the_failed_targets_again_in_order(
    app: Forklift, conn: psycopg.Connection[Any]
) -> None:
    targets = [{"n": 0, "fail_unless": "fixed"}, {"n": 1}, {"n": 2, "fail_unless": "fixed"},
               {"n": 3}]
    batch, _ = app.batch("batch.step", targets, caller="rob", mode="serial",
                         on_complete="batch.notify", on_success="batch.notify")
    with running_worker(app, **FAST):
        assert wait_finished(conn, batch.id) == "partial"
        with pytest.raises(NotRequeueable):
            ops.retry_failed(conn, CTX, cancelled_batch(app, conn))
        with pytest.raises(BatchNotFound):
            ops.retry_failed(conn, CTX, 999_999)
        bapp.open_gate(conn, "fixed")
        assert ops.retry_failed(conn, CTX, batch.id, reason="input fixed") == 2
        row = bapp.batch_row(conn, batch.id)
        assert row["state"] == "running" and row["failed"] == 0 and row["finished_at"] is None
        assert wait_finished(conn, batch.id) == "done"
        wait_until(lambda: len(callbacks(conn, batch.id)) == 3, timeout=30)
    assert started(conn, batch.id) == [0, 1, 2, 3, 0, 2]  # the retried ones, in index order
    assert peak(conn, batch.id) == 1
    assert bapp.batch_row(conn, batch.id)["settlements"] == 2
    states = sorted((c["summary"]["settlement"], c["summary"]["state"])
                    for c in callbacks(conn, batch.id))
    assert states == [(1, "partial"), (2, "done"), (2, "done")]  # on_complete x2, on_success x1
    assert ops.retry_failed(conn, CTX, batch.id) == 0
    audit = conn.execute("SELECT count, reason, outcome FROM forklift.audit"
                         " WHERE action = 'retry batch' ORDER BY id").fetchall()
    assert audit == [(0, None, "refused: not_requeueable"), (0, None, "refused: batch_not_found"),
                     (2, "input fixed", "done"), (0, None, "noop: no failed targets")]


def cancelled_batch(app: Forklift, conn: psycopg.Connection[Any]) -> int:
    batch, _ = app.batch("batch.step", [{"n": 7}], caller="someone-else",
                         mode="serial", key="to-cancel")
    ops.cancel(conn, CTX, batch.id)
    return batch.id


def test_requeueing_a_target_counts_it_back_and_waits_for_the_serial_window(
    app: Forklift, conn: psycopg.Connection[Any]
) -> None:
    targets = [{"n": 0}, {"n": 1, "hold": "h1"}, {"n": 2}]
    batch, _ = app.batch("batch.step", targets, caller="sue", mode="serial")
    with running_worker(app, **FAST):
        wait_until(lambda: started(conn, batch.id) == [0, 1], timeout=30)
        first = conn.execute("SELECT id FROM forklift.jobs WHERE batch_id = %s"
                             " AND batch_index = 0", (batch.id,)).fetchone()[0]
        actions.act(conn, CTX, "requeue", first)  # the operator's generic requeue
        # Target 1 is running: the requeued target 0 waits for its turn instead of running now.
        assert bapp.target_states(conn, batch.id) == ["waiting", "running", "waiting"]
        assert bapp.batch_row(conn, batch.id)["completed"] == 0
        bapp.open_gate(conn, "h1")
        assert wait_finished(conn, batch.id) == "done"
    assert started(conn, batch.id) == [0, 1, 0, 2]
    assert peak(conn, batch.id) == 1
    row = bapp.batch_row(conn, batch.id)
    assert (row["completed"], row["settlements"]) == (3, 1)


def test_requeueing_a_target_of_a_finished_batch_reopens_it(
    app: Forklift, conn: psycopg.Connection[Any]
) -> None:
    batch, _ = app.batch("batch.step", [{"n": 0}, {"n": 1}], caller="tom",
                         on_complete="batch.notify")
    with running_worker(app, **FAST):
        assert wait_finished(conn, batch.id) == "done"
        wait_until(lambda: len(callbacks(conn, batch.id)) == 1, timeout=30)
    target = conn.execute("SELECT id FROM forklift.jobs WHERE batch_id = %s"
                          " AND batch_index = 1", (batch.id,)).fetchone()[0]
    actions.act(conn, CTX, "requeue", target)
    row = bapp.batch_row(conn, batch.id)
    assert (row["state"], row["completed"], row["finished_at"]) == ("running", 1, None)
    with running_worker(app, **FAST):
        assert wait_finished(conn, batch.id) == "done"
        wait_until(lambda: len(callbacks(conn, batch.id)) == 2, timeout=30)
    assert bapp.batch_row(conn, batch.id)["settlements"] == 2
    assert sorted(c["summary"]["settlement"] for c in callbacks(conn, batch.id)) == [1, 2]


def test_deleting_a_waiting_target_counts_as_cancelling_it(
    app: Forklift, conn: psycopg.Connection[Any]
) -> None:
    batch, _ = app.batch("batch.step", [{"n": 0}, {"n": 1}], caller="uma", mode="serial")
    conn.execute("DELETE FROM forklift.jobs WHERE batch_id = %s AND batch_index = 1", (batch.id,))
    assert bapp.batch_row(conn, batch.id)["cancelled"] == 1
    with running_worker(app, **FAST):
        assert wait_finished(conn, batch.id) == "partial"


# -- the claim is untouched ---------------------------------------------------------------------
def test_the_claim_uses_only_its_index_with_batches_waiting(
    app: Forklift, conn: psycopg.Connection[Any]
) -> None:
    app.batch_limits = BatchLimits(max_targets=5000)
    app.batch("batch.step", [{"n": i} for i in range(3000)], caller="vic", mode="serial")
    app.batch("batch.step", [{"n": i} for i in range(2000)], caller="wes", max_parallel=10)
    app.kind("batch.step").enqueue_many([{"n": i} for i in range(2000)])
    conn.execute("UPDATE forklift.jobs SET state = 'completed', finished_at = now()"
                 " WHERE batch_id IS NULL AND id % 2 = 0")
    conn.execute("ANALYZE forklift.jobs")
    plan = conn.execute(
        "EXPLAIN (FORMAT JSON) " + render(CLAIM_SQL, "forklift"),
        {"n": 10, "start": 10, "queues": ["default"], "kinds": ["batch.step"], "w": "w-1",
         "lease": 30.0},
    ).fetchone()[0]
    text = json.dumps(plan)
    nodes = _nodes(plan[0]["Plan"])
    scans = [n for n in nodes if n.get("Relation Name") == "jobs" and "Scan" in n["Node Type"]]
    assert not [n for n in scans if n["Node Type"] == "Seq Scan"], text
    # The claim reads jobs_claim_idx; the update finds rows by id; a queue's concurrency count
    # (not used here) reads the running index. No batch index, no sort of the backlog.
    assert {n["Index Name"] for n in scans} <= {"jobs_claim_idx", "jobs_pkey",
                                               "jobs_running_idx"}, text
    assert [n for n in scans if n["Index Name"] == "jobs_claim_idx"], text


def _nodes(plan: dict[str, Any]) -> list[dict[str, Any]]:
    out = [plan]
    for child in plan.get("Plans", []):
        out += _nodes(child)
    return out


# -- operating ---------------------------------------------------------------------------------
def test_show_reports_progress_rate_eta_and_each_target(
    app: Forklift, conn: psycopg.Connection[Any]
) -> None:
    targets = [{"n": 0}, {"n": 1, "fail": True}, {"n": 2, "hold": "s2"}, {"n": 3}, {"n": 4}]
    batch, _ = app.batch("batch.step", targets, caller="xia", mode="serial")
    with running_worker(app, **FAST):
        wait_until(lambda: started(conn, batch.id) == [0, 1, 2], timeout=30)
        detail = ops.show(conn, CTX, batch.id)
        assert detail.progress == pytest.approx(2 / 5)
        assert detail.rate is not None and detail.rate > 0
        assert detail.eta_seconds is not None and detail.eta_seconds > 0
        assert [t.state for t in detail.targets] == ["completed", "dead", "running", "waiting",
                                                     "waiting"]
        waiting = ops.show(conn, CTX, batch.id, states=["waiting"]).targets
        assert [t.index for t in waiting] == [3, 4]
        page = ops.show(conn, CTX, batch.id, after_index=0, limit=2)
        assert [t.index for t in page.targets] == [1, 2] and page.more_targets
        assert ops.count_live(conn, CTX) == 1
        listed = ops.list_batches(conn, CTX, state="running")
        assert [b.id for b in listed] == [batch.id]
        bapp.open_gate(conn, "s2")
        wait_finished(conn, batch.id)
    detail = ops.show(conn, CTX, batch.id)
    assert detail.progress == 1.0 and detail.eta_seconds == 0.0
    shape = detail.to_json()
    assert shape["batch"]["state"] == "partial" and shape["targets"][1]["error"]["code"] == "boom"
    assert ops.list_batches(conn, CTX, caller="nobody") == []
    assert [b.id for b in ops.list_batches(conn, CTX, caller="xia", state="partial")] == [batch.id]
    with pytest.raises(BatchNotFound):
        ops.show(conn, CTX, 999_999)


def test_cli_lists_shows_cancels_and_retries(app: Forklift, dsn: str,
                                             conn: psycopg.Connection[Any]) -> None:
    from forklift.cli.main import app as cli

    runner = CliRunner()
    env = {"FORKLIFT_DSN": dsn, "FORKLIFT_ACTOR": "cli-tester"}
    batch, _ = app.batch("batch.step", [{"n": 0}, {"n": 1}, {"n": 2}], caller="yan",
                         mode="serial")

    listed = runner.invoke(cli, ["batches", "list", "--json"], env=env)
    assert listed.exit_code == 0, listed.output
    assert [b["id"] for b in json.loads(listed.output)] == [batch.id]
    shown = runner.invoke(cli, ["batches", "show", str(batch.id)], env=env)
    assert shown.exit_code == 0 and f"batch {batch.id}" in shown.output and "waiting" in shown.output
    as_json = json.loads(runner.invoke(cli, ["batches", "show", str(batch.id), "--json"],
                                       env=env).output)
    assert as_json["batch"]["total"] == 3 and len(as_json["targets"]) == 3

    cancelled = runner.invoke(cli, ["batches", "cancel", str(batch.id), "--yes",
                                    "--reason", "test"], env=env)
    assert cancelled.exit_code == 0, cancelled.output
    again = runner.invoke(cli, ["batches", "cancel", str(batch.id), "--yes"], env=env)
    assert again.exit_code == 1 and "nothing to cancel" in again.output
    retried = runner.invoke(cli, ["batches", "retry-failed", str(batch.id), "--yes"], env=env)
    assert retried.exit_code == 1 and "cancelled" in retried.output
    missing = runner.invoke(cli, ["batches", "show", "999999"], env=env)
    assert missing.exit_code == 1 and "no batch" in missing.output
    bad = runner.invoke(cli, ["batches", "list", "--state", "nope"], env=env)
    assert bad.exit_code in (1, 2) and "unknown batch state" in bad.output
    actor = conn.execute("SELECT actor FROM forklift.audit WHERE action = 'cancel batch'"
                         " ORDER BY id LIMIT 1").fetchone()
    assert actor == ("cli-tester",)


def test_batch_limits_are_checked(app: Forklift) -> None:
    for bad in ({"max_targets": 0}, {"per_caller": 0}, {"max_live": 0}, {"ttl": timedelta(0)}):
        with pytest.raises(InvalidOption):
            BatchLimits(**bad)  # type: ignore[arg-type]


def test_retention_keeps_targets_until_the_batch_ttl_lapses(
    app: Forklift, dsn: str, conn: psycopg.Connection[Any]
) -> None:
    from forklift._worker.maintenance import retention as leader

    batch, _ = app.batch("batch.step", [{"n": 0}, {"n": 1}], caller="zed")
    plain = app.kind("batch.step").enqueue({"n": 9}).id
    conn.execute("UPDATE forklift.jobs SET state = 'completed', finished_at = now() - interval '3 days'")
    assert bapp.finished(conn, batch.id) == "done"

    async def retention() -> int:
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as a:
            return await leader.retention(a, "forklift", {"completed": 86400.0})

    assert asyncio.run(retention()) == 1  # the plain job only: the batch is within its TTL
    assert count(conn, "SELECT count(*) FROM forklift.jobs WHERE batch_id = %s", batch.id) == 2
    assert count(conn, "SELECT count(*) FROM forklift.jobs WHERE id = %s", plain) == 0
    conn.execute("UPDATE forklift.batches SET expires_at = now() - interval '1 second'")
    assert asyncio.run(retention()) == 2
    assert count(conn, "SELECT count(*) FROM forklift.batches") == 0


def test_cancel_and_retry_account_for_the_whole_batch_at_once(
    app: Forklift, dsn: str, conn: psycopg.Connection[Any]
) -> None:
    # A row update of the batch per target, in one transaction, costs O(n^2): whole-batch
    # actions must touch the batch row a constant number of times.
    batch, _ = app.batch("batch.step", [{"n": i} for i in range(300)], caller="amy",
                         max_parallel=10, on_complete="batch.notify")

    def batch_row_updates(action: Any) -> int:
        with psycopg.connect(dsn) as mine:
            mine.execute("SELECT 1")  # the transaction the action's savepoint runs in
            action(mine)
            row = mine.execute("SELECT n_tup_upd FROM pg_stat_xact_user_tables"
                               " WHERE schemaname = 'forklift' AND relname = 'batches'").fetchone()
            mine.commit()
        return int(row[0]) if row else 0

    assert batch_row_updates(lambda c: ops.cancel(c, CTX, batch.id)) <= 4
    row = bapp.batch_row(conn, batch.id)
    assert (row["state"], row["cancelled"], row["in_flight"]) == ("cancelled", 300, 0)
    assert row["complete_job_id"] is not None

    failed, _ = app.batch("batch.step", [{"n": i} for i in range(300)], caller="ben",
                          max_parallel=10)
    conn.execute("UPDATE forklift.jobs SET state = 'dead', finished_at = now()"
                 " WHERE batch_id = %s", (failed.id,))
    assert bapp.batch_row(conn, failed.id)["state"] == "failed"
    assert batch_row_updates(lambda c: ops.retry_failed(c, CTX, failed.id)) <= 4
    row = bapp.batch_row(conn, failed.id)
    assert (row["state"], row["failed"], row["in_flight"]) == ("running", 0, 10)
    assert bapp.target_states(conn, failed.id) == ["available"] * 10 + ["waiting"] * 290
