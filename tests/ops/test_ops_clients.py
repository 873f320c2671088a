"""The Operator's feature clients (``op.jobs``, ``op.queues``, ``op.dead`` ...): they answer
what the flat names answered against the same database, their actions write the same audit
rows, every call of the flat facade is reachable through exactly one client, and the operator
package carries no ``type: ignore`` and no ``__getattr__`` proxy."""

from __future__ import annotations

import ast
import inspect
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from apps.ops import error, insert_job, job_state

from forklift.ops import Explanation, JobFilter, Operator
from forklift.ops import operator as operator_module
from forklift.ops._clients.client import FeatureClient
from forklift.ops._operator_session import OperatorSession

#: Every public call of the flat facade, and the client call that now answers it. A flat name
#: that is also a client's name (``op.jobs(...)``) is answered by calling the client.
FLAT: dict[str, str] = {
    # jobs
    "jobs": "jobs.list", "job": "jobs.show", "explain": "jobs.explain",
    "requeue": "jobs.requeue", "cancel": "jobs.cancel", "delete": "jobs.delete",
    "run_now": "jobs.run_now", "bulk": "jobs.bulk", "requeue_many": "jobs.requeue_many",
    "cancel_many": "jobs.cancel_many", "delete_many": "jobs.delete_many",
    "run_now_many": "jobs.run_now_many",
    # queues
    "queues": "queues.list", "explain_queue": "queues.explain", "pause": "queues.pause",
    "resume": "queues.resume", "set_concurrency": "queues.set_concurrency",
    "set_queue_rate": "queues.set_rate", "set_fair": "queues.set_fair",
    "flow_queues": "queues.flows", "queue_flow": "queues.flow",
    # dead letters
    "dead_groups": "dead.groups", "dead_group": "dead.group",
    "requeue_dead_group": "dead.requeue_group", "delete_dead_group": "dead.delete_group",
    # batches
    "batches": "batches.list", "batch": "batches.show", "live_batches": "batches.live",
    "cancel_batch": "batches.cancel", "retry_batch": "batches.retry",
    # backfills
    "backfills": "backfills.list", "backfill": "backfills.show",
    "backfill_runs": "backfills.runs", "start_backfill": "backfills.start",
    "pause_backfill": "backfills.pause", "resume_backfill": "backfills.resume",
    "cancel_backfill": "backfills.cancel", "set_backfill_rate": "backfills.set_rate",
    "scale_backfill_rate": "backfills.scale_rate",
    # schedules
    "schedules": "schedules.list", "schedule": "schedules.show",
    "pause_schedule": "schedules.pause", "resume_schedule": "schedules.resume",
    "run_schedule_now": "schedules.run_now",
    # workers, stats, audit
    "workers": "workers.list",
    "stats": "stats.get", "kind_stats": "stats.kinds", "charts": "stats.charts",
    "audit": "audit.list",
    # flow-control keys, locks
    "keys": "keys.list", "key": "keys.show", "set_key_limit": "keys.set_limit",
    "set_key_rate": "keys.set_rate", "reset_key": "keys.reset",
    "locks": "locks.list",
    # durable workflows: the outbox and events
    "outbox_messages": "outbox.messages", "outbox_topics": "outbox.topics",
    "retry_outbox": "outbox.retry",
    "events": "events.list", "event_waits": "events.waits", "publish_event": "events.publish",
    # health, retention
    "health": "health.get", "horizon": "health.horizon",
    "set_health_threshold": "health.set_threshold",
    "retention": "retention.show", "set_retention": "retention.set_window",
    "reset_retention": "retention.reset_window", "prune": "retention.prune",
}

#: What the Operator has besides its clients and the flat names: its session.
SESSION = {"session", "ctx", "schema", "actor", "read_only", "conn", "abort", "check_role",
           "close", "dry_run", "snapshot"}

#: Clients that came after the flat facade, so no flat name answers through them.
NEWER_CLIENTS = {"consumers", "kinds", "webhooks", "workflows"}

CLIENTS = sorted({target.partition(".")[0] for target in FLAT.values()} | NEWER_CLIENTS)

OPS = Path(operator_module.__file__).parent


@pytest.fixture
def op(dsn: str) -> Iterator[Operator]:
    with Operator(dsn, actor="alice") as operator:
        yield operator


def audit_rows(conn: psycopg.Connection[Any]) -> list[tuple[Any, ...]]:
    return conn.execute("SELECT actor, action, target, reason, outcome FROM forklift.audit"
                        " ORDER BY id").fetchall()


# -- the clients answer what the flat names did --------------------------------------------------
#: A duration as the explanations print it ("3s", "2m 5s", "1.5h").
DURATION = re.compile(r"\d[\d.,]*\s?(?:ms|s|m|h|d)\b")


def same_reasons(a: Explanation, b: Explanation) -> bool:
    """Two explanations say the same, but for the clock: a wait read a second later reads
    a second longer."""
    return ([(r.code, DURATION.sub("N", r.text)) for r in a.reasons]
            == [(r.code, DURATION.sub("N", r.text)) for r in b.reasons]
            and (a.subject, a.queue, a.job_id) == (b.subject, b.queue, b.job_id))


def test_reads_through_a_client_equal_the_flat_reads(
    op: Operator, conn: psycopg.Connection[Any]
) -> None:
    dead = insert_job(conn, state="dead", queue="mail", errors=[error(message="user 7 gone")])
    live = insert_job(conn, state="available", queue="mail")
    flt = JobFilter.build(queues="mail")

    page = op.jobs.list(flt)
    assert {j.id for j in page.jobs} == {dead, live} and page.count == 2
    assert page == op.jobs(flt)
    assert op.jobs.show(dead) == op.job(dead) and op.jobs.show(dead).job.id == dead
    assert same_reasons(op.jobs.explain(live), op.explain(live))

    queues = op.queues.list()
    assert "mail" in {q.name for q in queues}
    assert queues == op.queues()
    assert same_reasons(op.queues.explain("mail"), op.explain_queue("mail"))

    groups = op.dead.groups()
    assert groups.dead == 1 and groups.groups[0].sample_job_id == dead
    assert groups == op.dead_groups()
    assert op.dead.group(groups.groups[0].id) == op.dead_group(groups.groups[0].id)

    assert op.stats.get().totals.counts == op.stats().totals.counts
    assert op.stats.get().totals.counts["dead"] == 1
    assert op.batches.list() == op.batches() == []
    assert op.batches.live() == op.live_batches() == 0
    assert op.backfills.list() == op.backfills()
    assert op.schedules.list() == op.schedules()
    assert op.workers.list() == op.workers()
    assert op.keys.list() == op.keys()
    assert op.locks.list() == op.locks()
    assert op.outbox.topics() == op.outbox_topics()
    assert op.outbox.messages(limit=5) == op.outbox_messages(limit=5)
    assert op.events.list() == op.events() and op.events.waits() == op.event_waits()
    assert op.retention.show() == op.retention()
    assert op.audit.list() == op.audit() == []


def test_actions_through_a_client_act_and_write_their_audit_row(
    op: Operator, conn: psycopg.Connection[Any]
) -> None:
    dead = insert_job(conn, state="dead", queue="mail", errors=[error()])

    result = op.jobs.requeue(dead, reason="fixed upstream")
    assert (result.previous_state, result.state) == ("dead", "available")
    assert job_state(conn, dead) == "available"
    assert audit_rows(conn)[-1] == (
        "alice", "requeue", {"job": dead}, "fixed upstream", "requeued")

    paused = op.queues.pause("mail", reason="provider outage")
    assert paused.paused and paused.paused_by == "alice"
    assert audit_rows(conn)[-1][:2] == ("alice", "pause")
    assert next(q for q in op.queues() if q.name == "mail").paused  # the flat read sees it
    assert not op.queues.resume("mail").paused
    assert audit_rows(conn)[-1][:2] == ("alice", "resume")

    kept = op.retention.set_window("dead", "7d", queue="mail", reason="short")
    assert kept.for_queue("mail")["dead"] == 7 * 86400
    assert kept == op.retention()
    assert audit_rows(conn)[-1][:2] == ("alice", "retention set")
    assert len(audit_rows(conn)) == 4

    # The audit client reads what the actions wrote, like the flat name.
    assert op.audit.list(actor="alice") == op.audit(actor="alice")
    assert [e.action for e in op.audit.list(limit=3)][-1] == "pause"


def test_a_dry_run_rehearses_client_calls_and_changes_nothing(
    op: Operator, conn: psycopg.Connection[Any]
) -> None:
    insert_job(conn, state="available", queue="mail")
    after = op.dry_run(lambda o: o.queues.pause("mail", reason="rehearsal"))
    assert after.paused and after.pause_reason == "rehearsal"
    assert not next(q for q in op.queues.list() if q.name == "mail").paused
    assert audit_rows(conn) == []


# -- every flat name reaches exactly one client -----------------------------------------------
def test_every_call_of_the_flat_facade_reaches_one_client_call(op: Operator) -> None:
    targets = list(FLAT.values())
    assert len(set(targets)) == len(targets), "two flat names on one client call"
    for flat, target in FLAT.items():
        client_name, _, method = target.partition(".")
        client = getattr(op, client_name)
        assert isinstance(client, FeatureClient), client_name
        assert callable(getattr(client, method)), target
        if flat == client_name:  # op.jobs(...): the client answers the old call
            source = inspect.getsource(type(client).__call__)
            assert f"return self.{method}(" in source, (flat, source)
            assert "Deprecated" in (type(client).__call__.__doc__ or ""), flat
        else:
            alias = getattr(Operator, flat)
            source = inspect.getsource(alias)
            assert f"return self.{client_name}.{method}(" in source, (flat, source)
            assert (alias.__doc__ or "").startswith(
                f"Deprecated: use ``op.{client_name}.{method}()``"), flat


def test_the_operator_is_its_clients_its_session_and_the_flat_names(op: Operator) -> None:
    public = {n for n in dir(Operator) if not n.startswith("_")}
    assert public - SESSION == set(FLAT) | set(CLIENTS) | set(NEWER_CLIENTS)
    assert CLIENTS == ["audit", "backfills", "batches", "consumers", "dead", "events", "health", "jobs",
                       "keys", "kinds", "locks", "outbox", "queues", "retention", "schedules", "stats",
                       "webhooks", "workers", "workflows"]
    for name in CLIENTS:
        client = getattr(op, name)
        # Each client holds the session, not the Operator, and one client serves every call.
        assert client._session is op.session and isinstance(op.session, OperatorSession)
        assert getattr(op, name) is client
        assert not hasattr(client, "__dict__")  # its session is all it holds


# -- the source -------------------------------------------------------------------------------
def test_the_operator_package_has_no_type_ignore_and_no_getattr_proxy() -> None:
    files = sorted(OPS.rglob("*.py"))
    assert len(files) > 50 and (OPS / "_clients" / "jobs.py") in files
    for path in files:
        text = path.read_text()
        assert "type: ignore" not in text, path
        tree = ast.parse(text)
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                names = {f.name for f in node.body if isinstance(f, ast.FunctionDef)}
                assert "__getattr__" not in names, (path, node.name)
        module_level = {f.name for f in tree.body if isinstance(f, ast.FunctionDef)}
        if path == OPS / "__init__.py":
            # The package's own names load on first use (PEP 562), as the objects themselves;
            # no module of the package proxies another.
            continue
        assert "__getattr__" not in module_level, path
    assert not (OPS / "_lazy.py").exists()


def test_the_package_names_are_the_objects_themselves() -> None:
    import forklift.ops
    from forklift.ops import actions, jobs

    assert forklift.ops.Operator is operator_module.Operator
    assert forklift.ops.JobPage is jobs.JobPage and forklift.ops.BulkReport is actions.BulkReport
