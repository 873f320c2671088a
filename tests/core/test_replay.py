"""Replaying a finished workflow from a named step: a new job reuses the earlier steps' stored
results (their code does not run again) and runs the named step and every later one; the
original is left as it was; refusals name what is wrong and are audited."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
import wf_common
from apps.basic import running_worker
from apps.workflows import gate_open
from helpers import wait_until
from wf_common import FAST, job

from forklift import Forklift
from forklift.ops import NotAWorkflow, NotReplayable, Operator, UnknownStep

app = wf_common.app


def runs(conn: psycopg.Connection[Any], step: str) -> int:
    row = conn.execute("SELECT count(*) FROM public.wf_seen WHERE what = 'step'"
                       " AND detail ->> 'step' = %s", (step,)).fetchone()
    return int(row[0]) if row else 0


def counts(conn: psycopg.Connection[Any]) -> dict[str, int]:
    return {s: runs(conn, s) for s in "abc"}


def settled(conn: psycopg.Connection[Any], job_id: int) -> bool:
    return job(conn, job_id)["state"] in ("completed", "dead", "cancelled")


def open_gate(conn: psycopg.Connection[Any], name: str) -> None:
    conn.execute("INSERT INTO public.wf_gates VALUES (%s) ON CONFLICT DO NOTHING", (name,))
    assert gate_open(name)


def test_a_completed_workflow_replays_from_a_step_reusing_the_earlier_ones(
    app: Forklift, conn: psycopg.Connection[Any], dsn: str
) -> None:
    original = app.kind("wf.pipeline").enqueue({})
    with running_worker(app, **FAST):
        wait_until(lambda: settled(conn, original.id), timeout=30)
        assert counts(conn) == {"a": 1, "b": 1, "c": 1}
        with Operator(dsn, actor="alice") as op:
            rehearsal = op.dry_run(lambda o: o.workflows.replay(original.id, from_step="b"))
            assert (rehearsal.kept, rehearsal.rerun) == (["a"], ["b", "c"])
            assert conn.execute("SELECT 1 FROM forklift.jobs WHERE id = %s",
                                (rehearsal.new_job_id,)).fetchone() is None
            r = op.workflows.replay(original.id, from_step="b", reason="bad shipment")
        assert (r.kept, r.rerun, r.new_state) == (["a"], ["b", "c"], "available")
        wait_until(lambda: settled(conn, r.new_job_id), timeout=30)
    fork = job(conn, r.new_job_id)
    assert fork["state"] == "completed" and fork["kind"] == "wf.pipeline"
    assert fork["meta"]["replay"] == {"of": original.id, "from_step": "b"}
    assert [x["done"] for x in fork["result"]["results"]] == ["a", "b", "c"]
    assert counts(conn) == {"a": 1, "b": 2, "c": 2}  # a's code did not run again
    assert job(conn, original.id)["state"] == "completed"  # the original is evidence
    assert conn.execute("SELECT count(*) FROM forklift.job_steps WHERE job_id = %s",
                        (original.id,)).fetchone() == (3,)
    audit = conn.execute("SELECT actor, outcome, target, reason FROM forklift.audit"
                         " WHERE action = 'workflows.replay'").fetchall()
    assert len(audit) == 1 and audit[0][0] == "alice" and audit[0][1] == "replayed"
    assert audit[0][2]["new_job"] == r.new_job_id and audit[0][3] == "bad shipment"


def test_a_dead_workflow_replays_from_its_failed_step(
    app: Forklift, conn: psycopg.Connection[Any], dsn: str
) -> None:
    original = app.kind("wf.pipeline").enqueue({"fail": "c"})
    with running_worker(app, **FAST):
        wait_until(lambda: settled(conn, original.id), timeout=30)
        assert job(conn, original.id)["state"] == "dead"
        open_gate(conn, "fixed-c")
        with Operator(dsn) as op:
            r = op.workflows.replay(original.id, from_step="c")
        assert (r.kept, r.rerun) == (["a", "b"], ["c"])
        wait_until(lambda: settled(conn, r.new_job_id), timeout=30)
    assert job(conn, r.new_job_id)["state"] == "completed"
    assert counts(conn) == {"a": 1, "b": 1, "c": 2}


def test_replay_refuses_live_plain_and_unknown_steps(
    app: Forklift, conn: psycopg.Connection[Any], dsn: str
) -> None:
    plain = app.kind("wf.plain").enqueue({})
    done = app.kind("wf.pipeline").enqueue({})
    with running_worker(app, **FAST):
        wait_until(lambda: settled(conn, plain.id) and settled(conn, done.id), timeout=30)
    live = app.kind("wf.pipeline").enqueue({}, delay=3600)
    before = conn.execute("SELECT count(*) FROM forklift.jobs").fetchone()
    with Operator(dsn) as op:
        with pytest.raises(NotReplayable, match="is scheduled"):
            op.workflows.replay(live.id, from_step="a")
        with pytest.raises(NotAWorkflow, match="recorded no steps"):
            op.workflows.replay(plain.id, from_step="a")
        with pytest.raises(UnknownStep) as unknown:
            op.workflows.replay(done.id, from_step="ship")
    assert "'a', 'b', 'c'" in unknown.value.message
    assert unknown.value.detail["steps"] == ["a", "b", "c"]
    assert conn.execute("SELECT count(*) FROM forklift.jobs").fetchone() == before
    codes = [r[0] for r in conn.execute("SELECT outcome FROM forklift.audit WHERE action ="
                                        " 'workflows.replay' ORDER BY id").fetchall()]
    assert len(codes) == 3 and all(c != "replayed" for c in codes)


def test_the_cli_replays_and_its_dry_run_says_what_is_kept(
    app: Forklift, conn: psycopg.Connection[Any], dsn: str
) -> None:
    import json

    from typer.testing import CliRunner

    from forklift.cli.main import app as cli

    def forklift(*args: str) -> Any:
        return CliRunner().invoke(cli, list(args), env={"FORKLIFT_DSN": dsn})

    original = app.kind("wf.pipeline").enqueue({})
    with running_worker(app, **FAST):
        wait_until(lambda: settled(conn, original.id), timeout=30)
    jobs_before = conn.execute("SELECT count(*) FROM forklift.jobs").fetchone()
    dry = forklift("workflows", "replay", str(original.id), "--from-step", "c", "--dry-run")
    assert dry.exit_code == 0, dry.stderr
    assert "reuses a, b; runs again c" in dry.stdout and "nothing changed" in dry.stdout
    assert conn.execute("SELECT count(*) FROM forklift.jobs").fetchone() == jobs_before
    done = forklift("workflows", "replay", str(original.id), "--from-step", "c", "--json")
    assert done.exit_code == 0, done.stderr
    shown = json.loads(done.stdout)
    assert shown["kept"] == ["a", "b"] and shown["rerun"] == ["c"]
    assert job(conn, shown["new_job_id"])["state"] == "available"
    refused = forklift("workflows", "replay", str(original.id), "--from-step", "zzz", "--json")
    assert refused.exit_code == 1
    assert json.loads(refused.stdout)["error"]["code"] == "unknown_step"


def test_a_fork_keeps_the_payload_version_and_weight_of_its_original(
    app: Forklift, conn: psycopg.Connection[Any], dsn: str
) -> None:
    original = app.kind("wf.pipeline").enqueue({})
    with running_worker(app, **FAST):
        wait_until(lambda: settled(conn, original.id), timeout=30)
    # as a producer declaring version 3 and a weight of 2 would have stored it: the fork's
    # args are in that version, and it takes as many slots
    conn.execute("UPDATE forklift.jobs SET payload_version = 3, weight = 2 WHERE id = %s",
                 (original.id,))
    with Operator(dsn, actor="alice") as op:
        r = op.workflows.replay(original.id, from_step="b")
    assert conn.execute("SELECT payload_version, weight FROM forklift.jobs WHERE id = %s",
                        (r.new_job_id,)).fetchone() == (3, 2)
