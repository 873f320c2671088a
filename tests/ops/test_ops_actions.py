"""Requeue, cancel, delete: one job and in bulk; dry runs, caps, audit rows, read-only."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from apps.ops import error, insert_job, job_state

from forklift import JobNotFound, NotRequeueable, ReadOnly
from forklift.ops import JobFilter, NotCancellable, NotDeletable, Operator


def row(conn: psycopg.Connection[Any], job_id: int) -> dict[str, Any]:
    cur = conn.execute("SELECT * FROM forklift.jobs WHERE id = %s", (job_id,))
    values = cur.fetchone()
    assert values is not None and cur.description is not None
    return {d.name: v for d, v in zip(cur.description, values, strict=True)}


def audit_rows(conn: psycopg.Connection[Any]) -> list[dict[str, Any]]:
    cur = conn.execute("SELECT actor, action, target, count, reason, outcome FROM forklift.audit"
                       " ORDER BY id")
    assert cur.description is not None
    names = [d.name for d in cur.description]
    return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]


@pytest.fixture
def op(dsn: str) -> Any:
    with Operator(dsn, actor="alice") as operator:
        yield operator


# -- requeue --------------------------------------------------------------------------------
def test_requeue_gives_a_fresh_budget_a_new_fence_and_keeps_history(
    op: Operator, conn: psycopg.Connection[Any]
) -> None:
    errs = [error(attempt=1), error(attempt=2, message="again")]
    job = insert_job(conn, state="dead", attempt=2, max_attempts=2, errors=errs, result={"x": 1})
    # Dead as worker_lost: its lease-expiry streak starts again too, or the requeued job would
    # go dead at its first lost worker.
    conn.execute("UPDATE forklift.jobs SET fence = 7, lost = 3 WHERE id = %s", (job,))
    r = op.requeue(job, reason="fixed the upstream")
    assert (r.outcome, r.previous_state, r.state) == ("requeued", "dead", "available")
    after = row(conn, job)
    assert after["state"] == "available" and after["attempt"] == 0 and after["lost"] == 0
    assert after["finished_at"] is None and after["result"] is None
    assert after["fence"] is not None and after["fence"] != 7
    assert [e["message"] for e in after["errors"]] == ["boom", "again"]
    assert audit_rows(conn)[-1] == {
        "actor": "alice", "action": "requeue", "target": {"job": job}, "count": 1,
        "reason": "fixed the upstream", "outcome": "requeued",
    }


@pytest.mark.parametrize("state", ["scheduled", "available", "running", "retryable"])
def test_live_jobs_are_not_requeueable(
    op: Operator, conn: psycopg.Connection[Any], state: str
) -> None:
    job = insert_job(conn, state=state)
    with pytest.raises(NotRequeueable, match=f"is {state}") as info:
        op.requeue(job)
    assert info.value.code == "not_requeueable"
    assert job_state(conn, job) == state
    assert audit_rows(conn)[-1]["outcome"] == "refused: not_requeueable"


def test_requeue_refused_while_a_live_job_holds_the_unique_key(
    op: Operator, conn: psycopg.Connection[Any]
) -> None:
    old = insert_job(conn, state="completed", unique_key="invoice-9")
    holder = insert_job(conn, state="available", unique_key="invoice-9")
    with pytest.raises(NotRequeueable, match=f"live job {holder}"):
        op.requeue(old)
    assert job_state(conn, old) == "completed"
    op.cancel(holder)
    assert op.requeue(old).state == "available"


def test_unknown_ids_are_refused_and_change_nothing(
    op: Operator, conn: psycopg.Connection[Any]
) -> None:
    for action in (op.requeue, op.cancel, op.delete):
        with pytest.raises(JobNotFound, match="no job with id 424242"):
            action(424242)
    row_count = conn.execute("SELECT count(*) FROM forklift.jobs").fetchone()
    assert row_count is not None and row_count[0] == 0


# -- cancel and delete ----------------------------------------------------------------------
@pytest.mark.parametrize("state", ["scheduled", "available", "retryable"])
def test_cancel_of_a_waiting_job_is_immediate(
    op: Operator, conn: psycopg.Connection[Any], state: str
) -> None:
    job = insert_job(conn, state=state)
    r = op.cancel(job, reason="customer asked")
    assert (r.outcome, r.state) == ("cancelled", "cancelled")
    after = row(conn, job)
    assert after["state"] == "cancelled" and after["finished_at"] is not None
    assert after["errors"][-1]["code"] == "cancelled"
    assert after["errors"][-1]["message"] == "cancelled by alice: customer asked"


def test_cancel_of_a_running_job_requests_it_and_notifies(
    op: Operator, dsn: str, conn: psycopg.Connection[Any]
) -> None:
    job = insert_job(conn, state="running")
    with psycopg.connect(dsn, autocommit=True) as listener:
        listener.execute("LISTEN forklift_control")
        r = op.cancel(job)
        notes = list(listener.notifies(timeout=5, stop_after=1))
    assert (r.outcome, r.state) == ("cancel_requested", "running")
    assert row(conn, job)["cancel_requested_at"] is not None
    assert job_state(conn, job) == "running"  # the worker writes the end
    import json

    assert json.loads(notes[0].payload) == {"op": "cancel", "job": job}


@pytest.mark.parametrize("state", ["completed", "cancelled", "dead"])
def test_finished_jobs_cannot_be_cancelled(
    op: Operator, conn: psycopg.Connection[Any], state: str
) -> None:
    job = insert_job(conn, state=state)
    with pytest.raises(NotCancellable, match=f"already {state}"):
        op.cancel(job)


def test_delete_only_finished_jobs(op: Operator, conn: psycopg.Connection[Any]) -> None:
    live = insert_job(conn, state="running")
    done = insert_job(conn, state="completed")
    with pytest.raises(NotDeletable, match="cancel it first"):
        op.delete(live)
    assert op.delete(done).outcome == "deleted"
    assert job_state(conn, done) is None and job_state(conn, live) == "running"


# -- bulk -----------------------------------------------------------------------------------
@pytest.mark.parametrize("action", ["requeue", "cancel", "delete"])
def test_dry_run_reports_what_the_real_run_does(
    op: Operator, conn: psycopg.Connection[Any], action: str
) -> None:
    for i in range(30):
        state = ["dead", "completed", "available", "retryable", "scheduled", "cancelled"][i % 6]
        insert_job(conn, state=state, queue="mail" if i % 2 else "sms")
    flt = JobFilter.build(queues="mail")
    dry = op.bulk(action, flt, dry_run=True)
    before = conn.execute("SELECT count(*) FROM forklift.audit").fetchone()
    assert before is not None and before[0] == 0  # a dry run writes nothing
    real = op.bulk(action, flt, batch_size=4)
    assert dry.matched == real.matched == real.done > 0
    assert dry.sample_ids == real.sample_ids
    assert dry.by_state == real.by_state
    assert real.batches == -(-real.done // 4)
    audited = audit_rows(conn)
    assert [a["action"] for a in audited] == [f"{action}_many"] * real.batches
    assert sum(a["count"] for a in audited) == real.done
    assert all(a["target"]["filter"]["queues"] == ["mail"] for a in audited)


def test_bulk_is_capped_and_says_more_remain(op: Operator, conn: psycopg.Connection[Any]) -> None:
    ids = [insert_job(conn, state="dead") for _ in range(7)]
    r = op.bulk("requeue", JobFilter.build(states="dead"), cap=5)
    assert (r.matched, r.done, r.more) == (5, 5, True)
    assert r.sample_ids == ids[:5]
    r2 = op.bulk("requeue", JobFilter.build(states="dead"), cap=5)
    assert (r2.done, r2.more) == (2, False)


def test_bulk_requeue_skips_held_keys_and_takes_one_of_each_key(
    op: Operator, conn: psycopg.Connection[Any]
) -> None:
    a1 = insert_job(conn, state="dead", unique_key="a")
    insert_job(conn, state="dead", unique_key="a")
    insert_job(conn, state="dead", unique_key="b")
    insert_job(conn, state="available", unique_key="b")
    plain = insert_job(conn, state="dead")
    dry = op.requeue_many(JobFilter.build(states="dead"), dry_run=True)
    real = op.requeue_many(JobFilter.build(states="dead"))
    assert dry.sample_ids == real.sample_ids == [a1, plain]
    assert real.done == 2 and real.skipped == 0


def test_bulk_states_outside_the_action_are_a_usage_error(op: Operator) -> None:
    from forklift.ops import InvalidFilter

    with pytest.raises(InvalidFilter, match="match none"):
        op.bulk("requeue", JobFilter.build(states="running"))


def test_bulk_skips_jobs_that_changed_meanwhile(op: Operator, conn: psycopg.Connection[Any]) -> None:
    from forklift.ops import actions

    ids = [insert_job(conn, state="available") for _ in range(3)]
    spec = actions.SPECS["cancel"]
    flt = JobFilter.build(states=["available"]).narrowed(spec.states, "cancel")
    conn.execute("UPDATE forklift.jobs SET state = 'completed', finished_at = now() WHERE id = %s",
                 (ids[1],))
    done = actions._run_batch(op.conn, op.ctx, spec, flt, ids, None, {"test": True})
    assert sorted(i for i, _, _ in done) == [ids[0], ids[2]]
    assert job_state(conn, ids[1]) == "completed"


# -- read-only and the audit trail ----------------------------------------------------------
def test_read_only_refuses_every_change(dsn: str, conn: psycopg.Connection[Any]) -> None:
    dead = insert_job(conn, state="dead")
    live = insert_job(conn, state="available", queue="mail")
    with Operator(dsn, read_only=True) as ro:
        calls = [
            lambda: ro.requeue(dead), lambda: ro.cancel(live), lambda: ro.delete(dead),
            lambda: ro.bulk("requeue", JobFilter.build(states="dead")),
            lambda: ro.pause("mail"), lambda: ro.resume("mail"),
            lambda: ro.set_concurrency("mail", 2), lambda: ro.prune(dead_older_than="0s"),
        ]
        for call in calls:
            with pytest.raises(ReadOnly, match="read-only"):
                call()
        # reading and dry runs still work
        assert ro.bulk("requeue", JobFilter.build(states="dead"), dry_run=True).matched == 1
        assert ro.stats().totals.counts["dead"] == 1
        # and the session itself refuses writes
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            ro.conn.execute("DELETE FROM forklift.jobs")
    assert job_state(conn, dead) == "dead" and job_state(conn, live) == "available"
    assert audit_rows(conn) == []


def test_read_only_from_the_environment(
    dsn: str, conn: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FORKLIFT_READ_ONLY", "1")
    monkeypatch.setenv("FORKLIFT_ACTOR", "bob")
    with Operator(dsn, read_only=False) as op:
        assert op.read_only and op.actor == "bob"
        with pytest.raises(ReadOnly):
            op.cancel(insert_job(conn))


def test_audit_is_append_only(op: Operator, conn: psycopg.Connection[Any]) -> None:
    op.cancel(insert_job(conn))
    for sql in ("UPDATE forklift.audit SET actor = 'mallory'", "DELETE FROM forklift.audit"):
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="append-only"):
            conn.execute(sql)
    entries = op.audit()
    assert [(e.actor, e.action) for e in entries] == [("alice", "cancel")]


def test_reasons_are_scrubbed_and_nul_refused(op: Operator, conn: psycopg.Connection[Any]) -> None:
    from forklift.ops import InvalidFilter

    job = insert_job(conn)
    with pytest.raises(InvalidFilter, match="NUL"):
        op.cancel(job, reason="a\x00b")
    op.cancel(job, reason="see postgres://bob:hunter2@db/x")
    assert "hunter2" not in str(audit_rows(conn)[-1]["reason"])


def test_a_read_only_session_keeps_its_timeouts(dsn: str) -> None:
    with Operator(dsn, read_only=True) as ro:
        row = ro.conn.execute("SELECT current_setting('statement_timeout'),"
                              " current_setting('default_transaction_read_only')").fetchone()
    assert row is not None and row[0] != "0" and row[1] == "on"


def test_bulk_selection_of_live_jobs_uses_the_partial_indexes(conn: psycopg.Connection[Any]) -> None:
    from forklift._db.sqltext import render
    from forklift.ops import actions
    from forklift.ops.context import OpsContext

    conn.execute("""INSERT INTO forklift.jobs (queue, kind, state, attempt, attempted_at, finished_at)
                    SELECT 'mail', 'k', 'completed', 1, now(), now() FROM generate_series(1, 50000)""")
    for _ in range(5):
        insert_job(conn, queue="mail")
    conn.execute("VACUUM ANALYZE forklift.jobs")
    spec = actions.SPECS["cancel"]
    flt = JobFilter.build(queues="mail").narrowed(spec.states, "cancel")
    where, params = flt.where()
    sql = render(f"EXPLAIN SELECT t.id, t.state FROM {{s}}.jobs t WHERE {where} ORDER BY t.id"
                 " LIMIT 10001", "forklift")
    plan = "\n".join(r[0] for r in conn.execute(sql, params).fetchall())
    assert "Seq Scan" not in plan and "jobs_claim_idx" in plan, plan
    assert [i for i, _ in actions.select_ids(conn, OpsContext(), spec, flt, 100)] == sorted(
        r[0] for r in conn.execute("SELECT id FROM forklift.jobs WHERE state = 'available'"))


def test_every_action_writes_one_audit_row(op: Operator, conn: psycopg.Connection[Any]) -> None:
    dead = insert_job(conn, state="dead", queue="mail")
    done = insert_job(conn, state="completed", queue="mail")
    live = insert_job(conn, state="available", queue="mail")
    old = conn.execute("SELECT now() - interval '30 days'").fetchone()
    assert old is not None
    insert_job(conn, state="dead", finished_at=old[0])
    steps = [
        (lambda: op.requeue(dead), "requeue", "requeued"),
        (lambda: op.cancel(live), "cancel", "cancelled"),
        (lambda: op.delete(done), "delete", "deleted"),
        (lambda: op.bulk("cancel", JobFilter.build(ids=[dead])), "cancel_many", "cancelled: 1"),
        (lambda: op.pause("mail", reason="r"), "pause", "done"),
        (lambda: op.set_concurrency("mail", 4), "limit", "done"),
        (lambda: op.resume("mail"), "resume", "done"),
        (lambda: op.prune(dead_older_than="7d"), "prune", "done"),
    ]
    for call, action, outcome in steps:
        before = len(audit_rows(conn))
        call()
        rows = audit_rows(conn)
        assert len(rows) == before + 1, action
        assert (rows[-1]["actor"], rows[-1]["action"], rows[-1]["outcome"]) == (
            "alice", action, outcome)
