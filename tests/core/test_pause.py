"""Pausing a workflow or a kind: its waiting jobs are held out of the claim, new jobs of a
paused kind wait too, a running workflow parks at its next step boundary (the step in flight
kept), an event does not wake a held wait; the resume lets them all go on at once."""

from __future__ import annotations

import json
from typing import Any

import psycopg
import pytest
import wf_common
from apps.basic import running_worker
from helpers import wait_until
from typer.testing import CliRunner
from wf_common import FAST, job

from forklift import Forklift
from forklift._features.durable.holds import PAUSED_UNTIL
from forklift.cli.main import app as cli
from forklift.ops import NotPausable, Operator, PauseBlocked

app = wf_common.app


def runs(conn: psycopg.Connection[Any], step: str) -> int:
    row = conn.execute("SELECT count(*) FROM public.wf_seen WHERE what = 'step'"
                       " AND detail ->> 'step' = %s", (step,)).fetchone()
    return int(row[0]) if row else 0


def plain_runs(conn: psycopg.Connection[Any], job_id: int) -> int:
    row = conn.execute("SELECT count(*) FROM public.wf_seen WHERE what = 'run' AND job_id = %s",
                       (job_id,)).fetchone()
    return int(row[0]) if row else 0


def state(conn: psycopg.Connection[Any], job_id: int) -> str:
    return str(job(conn, job_id)["state"])


def held(conn: psycopg.Connection[Any], job_id: int) -> bool:
    row = job(conn, job_id)
    return row["state"] == "scheduled" and row["run_at"] == PAUSED_UNTIL


def open_gate(conn: psycopg.Connection[Any], name: str) -> None:
    conn.execute("INSERT INTO public.wf_gates VALUES (%s) ON CONFLICT DO NOTHING", (name,))


def test_a_paused_kind_is_not_started_new_jobs_wait_too_and_resume_lets_them_go(
    app: Forklift, conn: psycopg.Connection[Any], dsn: str
) -> None:
    plain = app.kind("wf.plain")
    before = plain.enqueue({})
    later = plain.enqueue({}, delay=3600)
    with Operator(dsn, actor="alice") as op:
        rehearsal = op.dry_run(lambda o: o.kinds.pause("wf.plain"))
        assert rehearsal.jobs == 2 and state(conn, before.id) == "available"
        paused = op.kinds.pause("wf.plain", reason="bad deploy")
        assert (paused.jobs, paused.running) == (2, 0)
        after = plain.enqueue({})  # held by the insert itself
        assert held(conn, before.id) and held(conn, later.id) and held(conn, after.id)
        assert [p.text for p in op.workflows.pauses()] == [
            "kind wf.plain paused by alice: bad deploy (3 held)"]
        with running_worker(app, **FAST):
            # another kind's job runs: the worker claims, and passes the held ones by
            other = app.kind("wf.pipeline").enqueue({})
            wait_until(lambda: state(conn, other.id) == "completed", timeout=30)
            assert plain_runs(conn, before.id) == plain_runs(conn, after.id) == 0
            assert held(conn, before.id) and held(conn, after.id)
            resumed = op.kinds.resume("wf.plain")
            assert (resumed.jobs, resumed.available) == (3, 2)
            wait_until(lambda: state(conn, before.id) == state(conn, after.id) == "completed",
                       timeout=30)
        assert state(conn, later.id) == "scheduled"  # back to its own time
        assert job(conn, later.id)["run_at"] == later.run_at
        assert op.kinds.paused() == []
    actions = [r[0] for r in conn.execute("SELECT action FROM forklift.audit ORDER BY id")]
    assert actions == ["kinds.pause", "kinds.resume"]


def test_a_running_workflow_parks_at_its_next_step_and_resumes_where_it_stopped(
    app: Forklift, conn: psycopg.Connection[Any], dsn: str
) -> None:
    wf = app.kind("wf.pipeline").enqueue({"hold": "a"})
    with running_worker(app, **FAST), Operator(dsn) as op:
        wait_until(lambda: runs(conn, "a") == 1, timeout=30)  # step a is in flight
        paused = op.workflows.pause(wf.id)
        assert (paused.jobs, paused.running) == (0, 1)
        open_gate(conn, "hold-a")
        wait_until(lambda: held(conn, wf.id), timeout=30)  # parked after storing a
        steps = conn.execute("SELECT name, state FROM forklift.job_steps WHERE job_id = %s",
                             (wf.id,)).fetchall()
        assert steps == [("a", "completed")] and runs(conn, "b") == 0
        assert job(conn, wf.id)["attempt"] == 0  # parking is not a failed attempt
        other = app.kind("wf.plain").enqueue({})
        wait_until(lambda: state(conn, other.id) == "completed", timeout=30)
        assert held(conn, wf.id) and runs(conn, "b") == 0
        op.workflows.resume(wf.id)
        wait_until(lambda: state(conn, wf.id) == "completed", timeout=30)
    assert (runs(conn, "a"), runs(conn, "b"), runs(conn, "c")) == (1, 1, 1)


def test_an_event_does_not_wake_a_paused_wait_the_resume_does(
    app: Forklift, conn: psycopg.Connection[Any], dsn: str
) -> None:
    waiter = app.kind("wf.waiter").enqueue({"event": "pause.go"})
    with running_worker(app, **FAST), Operator(dsn) as op:
        wait_until(lambda: conn.execute(
            "SELECT 1 FROM forklift.job_steps WHERE job_id = %s AND state = 'waiting'",
            (waiter.id,)).fetchone() is not None and state(conn, waiter.id) == "scheduled",
            timeout=30)
        op.workflows.pause(waiter.id)
        app.publish_event("pause.go", {"n": 1})
        assert conn.execute("SELECT state FROM forklift.job_steps WHERE job_id = %s",
                            (waiter.id,)).fetchone() == ("completed",)  # the wait has its event
        other = app.kind("wf.plain").enqueue({})
        wait_until(lambda: state(conn, other.id) == "completed", timeout=30)
        assert held(conn, waiter.id)
        assert op.workflows.resume(waiter.id).available == 1
        wait_until(lambda: state(conn, waiter.id) == "completed", timeout=30)
    assert job(conn, waiter.id)["result"] == {"data": {"n": 1}}


def test_pause_refusals_and_a_resume_of_nothing(
    app: Forklift, conn: psycopg.Connection[Any], dsn: str
) -> None:
    done = app.kind("wf.plain").enqueue({})
    with running_worker(app, **FAST):
        wait_until(lambda: state(conn, done.id) == "completed", timeout=30)
    with Operator(dsn) as op:
        with pytest.raises(NotPausable, match="completed"):
            op.workflows.pause(done.id)
        with pytest.raises(Exception, match="kind") as bad:
            op.kinds.pause("bad\u202ename")
        assert getattr(bad.value, "code", None) == "invalid_name"
        nothing = op.kinds.resume("never.paused")
        assert not nothing.changed and "was not paused" in nothing.text
    assert conn.execute("SELECT count(*) FROM forklift.pauses").fetchone() == (0,)


def test_the_cli_pauses_and_resumes_a_kind_with_dry_run_and_json(
    app: Forklift, conn: psycopg.Connection[Any], dsn: str
) -> None:
    def forklift(*args: str) -> Any:
        result = CliRunner().invoke(cli, list(args), env={"FORKLIFT_DSN": dsn})
        assert result.exit_code == 0, (result.stdout, result.stderr)
        return result

    waiting = app.kind("wf.plain").enqueue({})
    dry = forklift("kinds", "pause", "wf.plain", "--dry-run")
    assert "kind wf.plain paused: 1 waiting held" in dry.stdout and "nothing changed" in dry.stdout
    assert state(conn, waiting.id) == "available"
    shown = json.loads(forklift("kinds", "pause", "wf.plain", "--reason", "r", "--json").stdout)
    assert shown["jobs"] == 1 and shown["action"] == "paused" and held(conn, waiting.id)
    listed = json.loads(forklift("workflows", "pauses", "--json").stdout)
    assert [(p["target"], p["name"], p["held"]) for p in listed] == [("kind", "wf.plain", 1)]
    assert "kind wf.plain resumed: 1 put back, 1 available now" in forklift(
        "kinds", "resume", "wf.plain").stdout
    assert state(conn, waiting.id) == "available"
    forklift("workflows", "pause", str(waiting.id))
    assert held(conn, waiting.id)
    forklift("workflows", "resume", str(waiting.id), "--json")
    assert state(conn, waiting.id) == "available"


def test_explain_says_a_held_job_is_paused(
    app: Forklift, conn: psycopg.Connection[Any], dsn: str
) -> None:
    waiting = app.kind("wf.plain").enqueue({})
    with Operator(dsn) as op:
        op.workflows.pause(waiting.id)
        ex = op.jobs.explain(waiting.id)
        assert ex.codes == ["paused"] and "held by a pause" in ex.reasons[0].text
        assert "paused: held until" in str(op.jobs.show(waiting.id).parked)


def test_a_job_that_fails_its_attempt_under_a_pause_is_not_retried_until_the_resume(
    app: Forklift, conn: psycopg.Connection[Any], dsn: str
) -> None:
    from wf_common import stage_once

    task = app.kind("wf.task").enqueue({"hold": "task-held", "fail": True})
    with running_worker(app, **FAST), Operator(dsn) as op:
        wait_until(lambda: plain_runs(conn, task.id) == 1, timeout=30)  # attempt 1 in flight
        assert op.kinds.pause("wf.task").running == 1
        open_gate(conn, "task-held")
        wait_until(lambda: state(conn, task.id) == "retryable", timeout=30)
        wait_until(lambda: job(conn, task.id)["run_at"] <= conn.execute(
            "SELECT now()").fetchone()[0], timeout=30)  # type: ignore[index]
        assert stage_once(dsn) == 0  # due, but held: the stager leaves it
        assert state(conn, task.id) == "retryable" and plain_runs(conn, task.id) == 1
        op.kinds.resume("wf.task")
        wait_until(lambda: state(conn, task.id) == "dead", timeout=30)
    assert plain_runs(conn, task.id) == 3


def pauses_read(c: psycopg.Connection[Any]) -> int:
    """How often this transaction has read the pauses table (scans of any kind)."""
    row = c.execute("SELECT coalesce(seq_scan, 0) + coalesce(idx_scan, 0)"
                    " FROM pg_stat_xact_user_tables"
                    " WHERE schemaname = 'forklift' AND relname = 'pauses'").fetchone()
    return int(row[0]) if row else 0


def flag(conn: psycopg.Connection[Any]) -> bool:
    row = conn.execute("SELECT pg_sequence_last_value('forklift.kind_pauses_flag')"
                       " IS NOT NULL").fetchone()
    return bool(row and row[0])


def test_an_insert_reads_the_pauses_only_while_a_kind_is_paused(
    app: Forklift, conn: psycopg.Connection[Any], dsn: str
) -> None:
    plain = app.kind("wf.plain")

    def reads_for(inserts: int) -> int:
        with psycopg.connect(dsn) as c:  # one transaction: its own scan counts
            for _ in range(inserts):
                plain.enqueue({}, conn=c)
            return pauses_read(c)

    assert not flag(conn)
    assert reads_for(5) == 0
    with Operator(dsn, actor="alice") as op:
        op.kinds.pause("wf.other")
        assert flag(conn)
        assert reads_for(5) >= 5
        op.workflows.pause(plain.enqueue({}).id)  # a workflow's pause needs no flag
        op.kinds.resume("wf.other")
        assert not flag(conn)
        assert reads_for(5) == 0


def test_a_kind_s_pause_gives_way_to_an_open_insert_and_holds_it_once_it_commits(
    app: Forklift, conn: psycopg.Connection[Any], dsn: str
) -> None:
    plain = app.kind("wf.plain")
    with psycopg.connect(dsn) as producer, Operator(dsn, actor="alice") as op:
        pending = plain.enqueue({}, conn=producer)  # its transaction stays open
        with pytest.raises(PauseBlocked) as refused:
            op.kinds.pause("wf.plain", reason="bad deploy")
        assert refused.value.code == "pause_blocked"
        assert op.kinds.paused() == [] and not flag(conn)
        producer.commit()  # enqueues go on: the refused pause left nothing behind
        assert state(conn, pending.id) == "available"
        assert plain.enqueue({}).id > pending.id
        assert op.kinds.pause("wf.plain").jobs == 2
        assert held(conn, pending.id)
    refusal = conn.execute("SELECT action, outcome FROM forklift.audit ORDER BY id LIMIT 1"
                           ).fetchone()
    assert refusal is not None and refusal[0] == "kinds.pause" and refusal[1] != "done"


def test_run_now_leaves_a_held_job_held_and_names_the_pause_to_resume(
    app: Forklift, conn: psycopg.Connection[Any], dsn: str
) -> None:
    from forklift.ops import JobFilter, NotRunnable

    by_kind = app.kind("wf.plain").enqueue({}, delay=3600)
    by_workflow = app.kind("wf.task").enqueue({}, delay=3600)
    free = app.kind("wf.task").enqueue({}, delay=3600)
    with Operator(dsn) as op:
        op.kinds.pause("wf.plain")
        op.workflows.pause(by_workflow.id)
        with pytest.raises(NotRunnable) as err:
            op.jobs.run_now(by_kind.id)
        assert err.value.detail["paused"] == "kind" and err.value.detail["name"] == "wf.plain"
        assert "forklift kinds resume wf.plain" in err.value.message
        with pytest.raises(NotRunnable) as err:
            op.jobs.run_now(by_workflow.id)
        assert f"forklift workflows resume {by_workflow.id}" in err.value.message
        assert held(conn, by_kind.id) and held(conn, by_workflow.id)
        # in bulk, a held job is skipped and the others go
        report = op.jobs.run_now_many(JobFilter(ids=(by_kind.id, by_workflow.id, free.id)))
        assert (report.done, report.skipped) == (1, 2)
        assert held(conn, by_kind.id) and held(conn, by_workflow.id)
        assert state(conn, free.id) == "available"
        op.kinds.resume("wf.plain")
        assert op.jobs.run_now(by_kind.id).outcome == "made_available"
