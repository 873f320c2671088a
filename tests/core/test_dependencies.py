"""Dependencies: a job enqueued with after=[...] is held until every dependency completed; a
dependency that ends dead or cancelled cancels it (policy cancel, cascading to its own
dependents) or lets it run (policy run). Released in the settle's transaction, also when the
dependent's own transaction races the settle, and across a worker SIGKILLed mid-dependency."""

from __future__ import annotations

import signal
import threading
from typing import Any

import psycopg
import pytest
import wf_common
from apps import faults
from apps.basic import running_worker
from helpers import wait_until
from wf_common import FAST

from forklift import Forklift, ForkliftError
from forklift._features.durable.deps import HELD_UNTIL

app = wf_common.app
procs = wf_common.procs


def state(conn: psycopg.Connection[Any], job_id: int) -> str:
    row = conn.execute("SELECT state FROM forklift.jobs WHERE id = %s", (job_id,)).fetchone()
    return str(row[0]) if row else "gone"


def held(conn: psycopg.Connection[Any], job_id: int) -> bool:
    row = conn.execute("SELECT state, run_at FROM forklift.jobs WHERE id = %s",
                       (job_id,)).fetchone()
    return row == ("scheduled", HELD_UNTIL)


def settle(conn: psycopg.Connection[Any], job_id: int, to: str) -> None:
    conn.execute("UPDATE forklift.jobs SET state = %s, finished_at = now() WHERE id = %s",
                 (to, job_id))


def test_a_dependent_waits_for_every_dependency_then_runs(
    app: Forklift, conn: psycopg.Connection[Any]
) -> None:
    task = app.kind("wf.task")
    a, b = task.enqueue({"n": 1}), task.enqueue({"n": 2})
    d = task.enqueue({"n": 3}, after=[a, b.id])
    assert d.state == "scheduled" and held(conn, d.id)
    settle(conn, a.id, "completed")
    assert held(conn, d.id)  # one left
    settle(conn, b.id, "completed")
    assert state(conn, d.id) == "available"
    deps = conn.execute("SELECT depends_on, policy FROM forklift.job_deps WHERE job_id = %s"
                        " ORDER BY 1", (d.id,)).fetchall()
    assert deps == [(a.id, "cancel"), (b.id, "cancel")]
    # Jobs nobody waits for are never marked.
    assert conn.execute("SELECT count(*) FROM forklift.jobs WHERE has_dependents").fetchone() == (2,)


def test_a_failed_dependency_cancels_the_chain_under_the_cancel_policy(
    app: Forklift, conn: psycopg.Connection[Any]
) -> None:
    task = app.kind("wf.task")
    a, b = task.enqueue({"n": 1}), task.enqueue({"n": 2})
    d = task.enqueue({"n": 3}, after=[a, b])
    e = task.enqueue({"n": 4}, after=[d])
    settle(conn, a.id, "dead")  # b still pending: d is cancelled at once anyway
    assert (state(conn, d.id), state(conn, e.id)) == ("cancelled", "cancelled")
    errors = conn.execute("SELECT errors FROM forklift.jobs WHERE id = %s", (d.id,)).fetchone()
    assert errors is not None and errors[0][-1]["code"] == "dependency_failed"
    assert errors[0][-1]["dependency"] == a.id and f"{a.id} ended dead" in errors[0][-1]["message"]


def test_the_run_policy_runs_once_everything_settled_whatever_it_became(
    app: Forklift, conn: psycopg.Connection[Any]
) -> None:
    task = app.kind("wf.task")
    a, b = task.enqueue({"n": 1}), task.enqueue({"n": 2})
    d = task.enqueue({"n": 3}, after=[a, b], if_dependency_fails="run")
    settle(conn, a.id, "cancelled")
    assert held(conn, d.id)
    settle(conn, b.id, "dead")
    assert state(conn, d.id) == "available"


def test_dependencies_already_settled_release_at_commit(
    app: Forklift, dsn: str, conn: psycopg.Connection[Any]
) -> None:
    task = app.kind("wf.task")
    a = task.enqueue({"n": 1})
    settle(conn, a.id, "completed")
    with psycopg.connect(dsn) as mine:
        d = task.enqueue({"n": 2}, after=[a], conn=mine)
        assert state(conn, d.id) == "gone"  # not committed yet
        mine.rollback()
        d = task.enqueue({"n": 3}, after=[a], conn=mine)
        mine.commit()
    assert state(conn, d.id) == "available"
    assert conn.execute("SELECT count(*) FROM forklift.jobs WHERE kind = 'wf.task'"
                        ).fetchone() == (2,)


def test_a_dependent_committing_while_its_dependency_settles_is_released(
    app: Forklift, dsn: str, conn: psycopg.Connection[Any]
) -> None:
    task = app.kind("wf.task")
    a = task.enqueue({"n": 1})
    with psycopg.connect(dsn) as settler, psycopg.connect(dsn) as mine:
        settler.execute("UPDATE forklift.jobs SET state = 'completed', finished_at = now()"
                        " WHERE id = %s", (a.id,))  # not committed: holds a's row
        d = task.enqueue({"n": 2}, after=[a], conn=mine)  # sees a live
        committing = threading.Thread(target=mine.commit)
        committing.start()  # its deferred trigger waits for a's row
        wait_until(lambda: conn.execute(
            "SELECT count(*) FROM pg_locks WHERE NOT granted AND locktype = 'transactionid'"
        ).fetchone() == (1,), timeout=10)
        settler.commit()
        committing.join(10)
        assert not committing.is_alive()
    assert state(conn, d.id) == "available"


def test_deleting_a_live_dependency_counts_as_cancelling_it(
    app: Forklift, conn: psycopg.Connection[Any]
) -> None:
    task = app.kind("wf.task")
    a = task.enqueue({"n": 1})
    d = task.enqueue({"n": 2}, after=[a])
    conn.execute("DELETE FROM forklift.jobs WHERE id = %s", (a.id,))
    assert state(conn, d.id) == "cancelled"


@pytest.mark.parametrize(("after", "options", "code"), [
    ([10**9], {}, "unknown_dependency"),
    (["12"], {}, "invalid_option"),
    ([True], {}, "invalid_option"),
    (5, {}, "invalid_option"),
    ([1], {"if_dependency_fails": "ignore"}, "invalid_option"),
    ([1], {"delay": 5}, "invalid_option"),
    ([1], {"unique_key": "k"}, "invalid_option"),
])
def test_bad_dependencies_are_refused_and_nothing_is_stored(
    app: Forklift, conn: psycopg.Connection[Any], after: Any, options: dict[str, Any], code: str
) -> None:
    first = app.kind("wf.task").enqueue({"n": 0})
    assert first.id == 1
    with pytest.raises(ForkliftError) as caught:
        app.kind("wf.task").enqueue({"n": 1}, after=after, **options)
    assert caught.value.code == code
    assert conn.execute("SELECT count(*) FROM forklift.jobs").fetchone() == (1,)
    assert conn.execute("SELECT count(*) FROM forklift.job_deps").fetchone() == (0,)


def test_a_dependent_runs_after_its_dependency_survives_a_sigkill(
    app: Forklift, conn: psycopg.Connection[Any], procs: faults.Procs
) -> None:
    task = app.kind("wf.task")
    a = task.enqueue({"n": 1, "hold": "g"})
    d = task.enqueue({"n": 2}, after=[a])
    w = procs.start(concurrency=2, lease=2.0, poll_interval=0.2,
                    extra=["--app", "apps.workflows:app"])
    faults.registered(conn, w)
    wait_until(lambda: conn.execute("SELECT count(*) FROM public.wf_seen WHERE job_id = %s",
                                    (a.id,)).fetchone() == (1,), timeout=30,
               message=lambda: procs.logs())
    w.signal(signal.SIGKILL)
    assert w.popen.wait(10) == -signal.SIGKILL
    assert held(conn, d.id)  # its dependency is running (on a dead worker)

    with running_worker(app, **FAST):
        wait_until(lambda: state(conn, d.id) == "completed", timeout=60)
    runs = conn.execute("SELECT job_id, what, attempt FROM public.wf_seen ORDER BY id").fetchall()
    assert runs == [(a.id, "run", 1), (a.id, "run", 2), (a.id, "end", 2), (d.id, "run", 1),
                    (d.id, "end", 1)]
    codes = conn.execute("SELECT errors -> 0 ->> 'code' FROM forklift.jobs WHERE id = %s",
                         (a.id,)).fetchone()
    assert codes == ("lease_expired",)


def test_jobs_show_names_what_a_held_job_waits_for(app: Forklift, dsn: str) -> None:
    import json

    from typer.testing import CliRunner

    from forklift.cli.main import app as cli

    task = app.kind("wf.task")
    a = task.enqueue({"n": 1})
    d = task.enqueue({"n": 2}, after=[a])
    got = CliRunner().invoke(cli, ["jobs", "show", str(d.id), "--json"],
                             env={"FORKLIFT_DSN": dsn})
    assert got.exit_code == 0, got.output
    shown = json.loads(got.stdout)
    assert shown["parked"] == f"waiting for jobs {a.id}"
    assert shown["waits_for"] == [{"job_id": a.id, "state": "available", "policy": "cancel"}]


# -- waking: only idle workers, as plain enqueues (tests/core/test_wake.py) ------------------------
def test_a_release_notifies_only_when_a_worker_is_idle_on_its_queue(
    app: Forklift, dsn: str, conn: psycopg.Connection[Any]
) -> None:
    from test_wake import _listener, _mark, _marks, _notes

    task = app.kind("wf.task")
    a, b = task.enqueue({"n": 1}), task.enqueue({"n": 2}, queue="other")
    first = task.enqueue({"n": 3}, after=[a])
    second = task.enqueue({"n": 4}, after=[b], queue="other")
    conn.execute("DELETE FROM forklift.idle_workers")
    with _listener(dsn) as listen:
        settle(conn, a.id, "completed")  # nobody idle: released without a NOTIFY
        assert state(conn, first.id) == "available"
        assert _mark(conn, "w1", ["default", "other"])
        settle(conn, b.id, "completed")  # consumes the mark on 'other', one NOTIFY
        assert state(conn, second.id) == "available" and _marks(conn) == [("default", "w1")]
        conn.execute("INSERT INTO forklift.jobs (queue, kind) VALUES ('default', 'wf.task')")
        # In commit order: had the first release notified, 'default' would come first.
        assert _notes(listen, 2) == ["other", "default"]


def test_a_settle_in_flight_holds_off_a_workers_idle_mark(
    app: Forklift, dsn: str, conn: psycopg.Connection[Any]
) -> None:
    """The release takes the queue's barrier: a worker marking itself idle while the settle's
    transaction is open fails its try (the dependent is not visible to it yet) and claims
    again after the commit, so the released job is never stranded."""
    from test_wake import _mark

    task = app.kind("wf.task")
    a = task.enqueue({"n": 1})
    d = task.enqueue({"n": 2}, after=[a])
    with psycopg.connect(dsn) as settler:
        settle(settler, a.id, "completed")  # released in this open transaction
        assert not _mark(conn, "w1", ["default"])
        settler.commit()
    assert _mark(conn, "w1", ["default"]) and state(conn, d.id) == "available"


def test_an_idle_worker_is_woken_by_a_release_long_before_its_poll(
    app: Forklift, dsn: str, conn: psycopg.Connection[Any]
) -> None:
    from test_wake import _marks

    from forklift.ops import Operator

    task = app.kind("wf.task")
    a = task.enqueue({"n": 1}, queue="elsewhere")  # no worker serves it
    d = task.enqueue({"n": 2}, after=[a], if_dependency_fails="run")
    with running_worker(app, **{**FAST, "poll_interval": 120.0, "queues": ["default"]}) as w:
        wait_until(lambda: ("default", w.id) in _marks(conn), timeout=30,
                   message="the idle worker left its mark")
        with Operator(dsn, actor="test") as op:
            op.cancel(a.id)  # the run policy releases the dependent in the cancel's commit
        wait_until(lambda: state(conn, d.id) == "completed", timeout=30,
                   message="the released job was picked up by the NOTIFY")
