"""Operator reads on a streaming replica: reads go there, every change and its audit row to the
primary; a lagging, stopped or misnamed replica sends reads back to the primary (and says why),
and a replica that comes back is used again without a restart.

Against a real standby of the test server (tests/replica.py). The test that stops the
replica starts it again, and runs last."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from apps.ops import insert_job
from helpers import wait_until
from psycopg.conninfo import conninfo_to_dict
from replica import Replica, replica  # noqa: F401 (the fixture)

from forklift import ConfigError
from forklift._db.embedded import server
from forklift.ops import JobFilter, Operator
from forklift.ops.context import OpsContext


def dbname_of(dsn: str) -> str:
    return str(conninfo_to_dict(dsn)["dbname"])


def replayed(replica: Replica, dbname: str, sql: str, expect: Any) -> None:  # noqa: F811
    """Wait until ``sql`` on the replica answers ``expect`` (the row has been replayed)."""

    def seen() -> Any:
        try:
            with replica.connect(dbname) as r:
                row = r.execute(sql).fetchone()
                return row[0] if row else None
        except psycopg.Error:
            return None  # the database or the table is not there yet

    wait_until(lambda: seen() == expect, timeout=60,
               message=lambda: f"the replica shows {seen()!r} for {sql}, not {expect!r}")


@pytest.fixture
def op(dsn: str, replica: Replica) -> Iterator[Operator]:  # noqa: F811
    o = Operator(dsn, actor="alice", replica_dsn=replica.dsn(dbname_of(dsn)),
                 replica_max_lag=3600, replica_retry=0.2)
    try:
        yield o
    finally:
        o.close()


def session_facts(conn: psycopg.Connection[Any], ctx: OpsContext) -> tuple[Any, ...]:
    row = conn.execute("SELECT pg_is_in_recovery(), current_setting('default_transaction_read_only'),"
                       " current_setting('application_name')").fetchone()
    assert row is not None
    return tuple(row)


def test_reads_go_to_the_replica_and_changes_with_their_audit_rows_to_the_primary(
    dsn: str, conn: psycopg.Connection[Any], replica: Replica, op: Operator  # noqa: F811
) -> None:
    dead = insert_job(conn, state="dead", queue="mail")
    replayed(replica, dbname_of(dsn), "SELECT count(*) FROM forklift.jobs", 1)

    page = op.jobs.list(JobFilter.build(states="dead"))
    assert [j.id for j in page.jobs] == [dead]
    status = op.session.replica
    assert status is not None and status.used and status.state == "used"
    assert status.lag_seconds is not None and status.lag_seconds <= 3600
    assert status.target == f"socket {replica.info.socket_dir}:{replica.info.port}/{dbname_of(dsn)}"
    # The read path's session is the replica's, read-only however it was reached.
    assert op.session.read(session_facts) == (True, "on", "forklift:ops-replica")

    # Proof that lists come from the replica: with its replay paused, a job committed on the
    # primary is not in them (the limit is an hour: a paused replica is still used).
    replica.pause()
    try:
        fresh = insert_job(conn, state="dead", queue="mail")
        assert [j.id for j in op.jobs.list(JobFilter.build(states="dead")).jobs] == [dead]
        assert op.session.replica is not None and op.session.replica.used

        # A change goes to the primary, with its audit row; the operator then reads its own
        # change at once (on the primary, until the replica has replayed it).
        result = op.jobs.requeue(dead, reason="provider back")
        assert result.outcome == "requeued", result
        assert conn.execute("SELECT state FROM forklift.jobs WHERE id = %s",
                            (dead,)).fetchone() == ("available",)
        assert conn.execute("SELECT actor, action, reason FROM forklift.audit").fetchall() == [
            ("alice", "requeue", "provider back")]
        assert op.jobs.show(dead).job.state == "available"
        assert op.session.replica is not None and op.session.replica.state == "catching_up"
        assert {j.id for j in op.jobs.list(JobFilter.build(states="dead")).jobs} == {fresh}
    finally:
        replica.resume()
    wait_until(lambda: op.jobs.show(dead) and op.session.replica is not None and op.session.replica.used,
               timeout=60, message=lambda: f"the replica was not used again: {op.session.replica}")
    assert op.jobs.show(dead).job.state == "available"

    # Nothing was ever written on the replica: its sessions from the operator are the read
    # path's only, and the standby is still one.
    with replica.connect(dbname_of(dsn)) as r:
        names = {row[0] for row in r.execute(
            "SELECT application_name FROM pg_stat_activity WHERE datname = current_database()"
            " AND application_name LIKE 'forklift:%'")}
        assert names == {"forklift:ops-replica"}
        assert r.execute("SELECT pg_is_in_recovery()").fetchone() == (True,)


def test_every_read_the_console_makes_runs_on_the_replica(
    dsn: str, conn: psycopg.Connection[Any], replica: Replica, op: Operator  # noqa: F811
) -> None:
    """Each read call runs on the standby without an error (a read that wrote would fail
    there), and the replica answered each one."""
    job = insert_job(conn, state="dead", queue="mail")
    replayed(replica, dbname_of(dsn), "SELECT count(*) FROM forklift.jobs", 1)
    calls = {
        "stats": lambda: op.stats.get(),
        "kinds": lambda: op.stats.kinds(),
        "charts": lambda: op.stats.charts(),
        "jobs": lambda: op.jobs.list(),
        "job": lambda: op.jobs.show(job),
        "explain job": lambda: op.jobs.explain(job),
        "queues": lambda: op.queues.list(),
        "explain queue": lambda: op.queues.explain("mail"),
        "flows": lambda: op.queues.flows(),
        "dead": lambda: op.dead.groups(),
        "batches": lambda: op.batches.list(),
        "live batches": lambda: op.batches.live(),
        "backfills": lambda: op.backfills.list(),
        "schedules": lambda: op.schedules.list(),
        "workers": lambda: op.workers.list(),
        "audit": lambda: op.audit.list(),
        "keys": lambda: op.keys.list(),
        "locks": lambda: op.locks.list(),
        "outbox": lambda: op.outbox.messages(),
        "topics": lambda: op.outbox.topics(),
        "events": lambda: op.events.list(),
        "waits": lambda: op.events.waits(),
        "retention": lambda: op.retention.show(),
    }
    for name, call in calls.items():
        call()
        assert op.session.replica is not None and op.session.replica.used, (name, op.session.replica)
    with op.snapshot():
        op.stats.get()
        op.jobs.list()
        assert op.session.read(session_facts)[0] is True  # the snapshot is the replica's
    # Health describes the primary server (its vacuum, sessions, locks): read there.
    op.health.get()
    assert op.session.read_primary(session_facts)[0] is False


def test_a_lagging_replica_sends_reads_to_the_primary_and_is_used_again_when_it_catches_up(
    dsn: str, conn: psycopg.Connection[Any], replica: Replica  # noqa: F811
) -> None:
    insert_job(conn, queue="mail")
    replayed(replica, dbname_of(dsn), "SELECT count(*) FROM forklift.jobs", 1)
    with Operator(dsn, replica_dsn=replica.dsn(dbname_of(dsn)), replica_max_lag=0.5) as op:
        # Caught up, the primary idle: the lag is 0, however long ago the last change was.
        wait_until(lambda: op.queues.list() and op.session.replica is not None and op.session.replica.used,
                   timeout=30, message=lambda: f"not used: {op.session.replica}")
        assert op.session.replica is not None and op.session.replica.lag_seconds is not None
        replica.pause()
        try:
            insert_job(conn, queue="mail")
            wait_until(lambda: op.stats.get() and op.session.replica is not None
                       and op.session.replica.state == "lagging",
                       timeout=30, message=lambda: f"not lagging: {op.session.replica}")
            status = op.session.replica
            assert status is not None and not status.used
            assert status.lag_seconds is not None and status.lag_seconds > 0.5
            assert "over the 0.5s limit" in status.reason
            assert status.to_json()["used"] is False
            # The reads are the primary's: both jobs are there.
            counts = op.stats.get().totals.counts
            assert counts["available"] == 2, counts
        finally:
            replica.resume()
        wait_until(lambda: op.queues.list() and op.session.replica is not None and op.session.replica.used,
                   timeout=60, message=lambda: f"not used again: {op.session.replica}")
        assert op.stats.get().totals.counts["available"] == 2


def test_a_primary_given_as_the_replica_is_refused_at_start(dsn: str) -> None:
    with Operator(dsn, replica_dsn=dsn) as op:
        with pytest.raises(ConfigError, match="not a standby"):
            op.session.check_replica()
        # Reads never fail on its account: they go to the primary, and say why.
        op.queues.list()
        assert op.session.replica is not None and op.session.replica.state == "not_standby"


def test_a_stopped_replica_sends_reads_to_the_primary_and_is_used_again_when_back(
    dsn: str, conn: psycopg.Connection[Any], replica: Replica, op: Operator  # noqa: F811
) -> None:
    insert_job(conn, queue="mail")
    replayed(replica, dbname_of(dsn), "SELECT count(*) FROM forklift.jobs", 1)
    wait_until(lambda: op.queues.list() and op.session.replica is not None and op.session.replica.used,
               timeout=30, message=lambda: f"not used: {op.session.replica}")
    before = replica.dsn(dbname_of(dsn))
    try:
        with op.snapshot():
            assert op.session.read(session_facts)[0] is True  # the snapshot is the replica's
            replica.stop()
            # Gone midway: the snapshot's remaining reads are the primary's, and do not fail.
            assert [q.name for q in op.queues.list()] == ["mail"]
            assert op.session.read(session_facts)[0] is False
        assert [q.name for q in op.queues.list()] == ["mail"]  # from the primary
        status = op.session.replica
        assert status is not None and status.state == "unreachable", status
        assert "\n" not in status.reason and "Traceback" not in status.reason
        assert status.reason.startswith("unreachable (")
        insert_job(conn, queue="later")
        assert {q.name for q in op.queues.list()} == {"mail", "later"}
        with op.snapshot():  # a snapshot too falls back
            assert op.stats.get().totals.counts["available"] == 2
    finally:
        replica.info = server.start(replica.data, replica.bin_dir, replica.user)
    assert replica.dsn(dbname_of(dsn)) == before
    wait_until(lambda: op.queues.list() and op.session.replica is not None and op.session.replica.used,
               timeout=60, message=lambda: f"not used again: {op.session.replica}")
    assert {q.name for q in op.queues.list()} == {"mail", "later"}
