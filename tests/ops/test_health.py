"""forklift health: the xmin-horizon holder, table and connection health, thresholds, the CLI."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from apps.ops import insert_job
from helpers import wait_until
from typer.testing import CliRunner

from forklift.cli.main import app as cli
from forklift.ops import OpsContext, horizon
from forklift.ops import health as h
from forklift.ops.settings import InvalidSetting

CTX = OpsContext(actor="tester")


def run(dsn: str, *args: str) -> Any:
    return CliRunner().invoke(cli, list(args), env={"FORKLIFT_DSN": dsn})


@pytest.fixture
def snapshot_holder(dsn: str) -> Iterator[psycopg.Connection[Any]]:
    """A side session holding a REPEATABLE READ snapshot open (as a report or a stuck client
    would), with transactions committed after it so the horizon really lags."""
    side = psycopg.connect(dsn, application_name="nightly-report")
    side.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
    side.execute("SELECT count(*) FROM forklift.jobs").fetchone()  # the snapshot is taken here
    with psycopg.connect(dsn, autocommit=True) as other:
        for _ in range(5):
            other.execute("SELECT txid_current()")
    try:
        yield side
    finally:
        side.rollback()
        side.close()


def test_a_repeatable_read_snapshot_is_named_as_the_horizon_holder(
    dsn: str, conn: psycopg.Connection[Any], snapshot_holder: psycopg.Connection[Any]
) -> None:
    pid = snapshot_holder.info.backend_pid
    (first, *_) = horizon.holders(conn, CTX)
    assert (first.kind, first.pid, first.application) == ("transaction", pid, "nightly-report")
    assert first.state == "idle in transaction" and first.xid_age is not None
    assert first.xid_age >= 5 and first.age_seconds is not None and first.since is not None
    assert f"pg_terminate_backend({pid})" in first.action
    assert "count(*)" in (first.query or "")

    # With a zero threshold the holder is an alert, and the alert says what to do.
    report = h.health(conn, CTX, overrides={"horizon_seconds": 0})
    (alert,) = [a for a in report.alerts if a.code == "horizon_held"][:1]
    assert alert.subject == f"transaction pid {pid}" and "pg_terminate_backend" in alert.action

    out = run(dsn, "health", "horizon", "--json")
    assert out.exit_code == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["holders"][0]["pid"] == pid and data["holders"][0]["application"] == "nightly-report"
    text = run(dsn, "health", "horizon")
    assert text.exit_code == 0 and "nightly-report" in text.stdout
    assert f"pg_terminate_backend({pid})" in text.stdout


def test_no_holder_once_the_snapshot_is_released(dsn: str, conn: psycopg.Connection[Any]) -> None:
    side = psycopg.connect(dsn, application_name="short-report")
    side.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
    side.execute("SELECT 1").fetchone()
    pid = side.info.backend_pid
    assert pid in [x.pid for x in horizon.holders(conn, CTX)]
    side.rollback()
    assert pid not in [x.pid for x in horizon.holders(conn, CTX)]
    side.close()


def test_prepared_transaction_advice_quotes_the_gid() -> None:
    text = horizon.advice("prepared_transaction", None, "it's-mine", "prepared")
    assert "ROLLBACK PREPARED 'it''s-mine';" in text
    slot = horizon.advice("replication_slot", None, "standby_1", "inactive")
    assert "pg_drop_replication_slot('standby_1')" in slot


def test_tables_indexes_connections_and_dead_rows(dsn: str, conn: psycopg.Connection[Any]) -> None:
    for _ in range(30):
        insert_job(conn, state="completed")
    conn.execute("ANALYZE forklift.jobs")
    conn.execute("DELETE FROM forklift.jobs")
    conn.execute("SELECT pg_stat_force_next_flush()")  # counters reach the statistics now
    conn.execute("SELECT 1")
    claim = psycopg.connect(dsn, application_name="myapp forklift:host:1:ab:claim")
    try:
        report = h.health(conn, CTX, overrides={"dead_tuple_min": 1, "dead_tuple_ratio": 0.1})
        jobs = report.table("jobs")
        assert jobs is not None and jobs.dead_rows >= 30 and jobs.dead_ratio >= 0.5
        assert jobs.last_analyze is not None and jobs.size_bytes > 0
        assert {"jobs", "queues", "workers", "audit", "settings", "retention"} <= {
            t.table for t in report.tables}
        assert "jobs_claim_idx" in {i.index for i in report.indexes}
        assert report.connections.forklift.get("claim") == 1
        assert report.connections.max_connections > 0 and 0.0 <= report.notify_queue_usage < 1
        dead = [a for a in report.alerts if a.code == "dead_tuples"]
        assert dead and dead[0].subject == "jobs" and "VACUUM" in dead[0].action
        # The default thresholds see nothing wrong with 30 dead rows.
        assert not [a for a in h.health(conn, CTX).alerts if a.code == "dead_tuples"]
    finally:
        claim.close()


def test_a_lock_wait_on_a_forklift_table_is_reported(dsn: str, conn: psycopg.Connection[Any]) -> None:
    job = insert_job(conn)
    holder = psycopg.connect(dsn, application_name="holder")
    waiter = psycopg.connect(dsn, application_name="waiter", autocommit=True)
    try:
        holder.execute("SELECT 1 FROM forklift.jobs WHERE id = %s FOR UPDATE", (job,))
        import threading

        t = threading.Thread(target=lambda: waiter.execute(
            "UPDATE forklift.jobs SET priority = 1 WHERE id = %s", (job,)))
        t.start()
        wait = wait_until(lambda: h.health(conn, CTX).lock_waits, message="no lock wait seen")
        assert wait[0].pid == waiter.info.backend_pid
        assert wait[0].blocked_by == [holder.info.backend_pid] and "jobs" in wait[0].tables
        report = h.health(conn, CTX, overrides={"lock_wait_seconds": 0})
        assert [a for a in report.alerts if a.code == "lock_wait"]
        holder.rollback()
        t.join(10)
    finally:
        holder.close()
        waiter.close()


def test_thresholds_are_stored_audited_and_refused_when_absurd(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    assert h.thresholds(conn, CTX)["horizon_seconds"] == 300
    h.set_threshold(conn, CTX, "horizon_seconds", 60, reason="tighter")
    assert h.thresholds(conn, CTX)["horizon_seconds"] == 60
    row = conn.execute("SELECT actor, action, target->>'name', reason FROM forklift.audit"
                       " ORDER BY id DESC LIMIT 1").fetchone()
    assert row == ("tester", "setting", "health.horizon_seconds", "tighter")
    with pytest.raises(InvalidSetting, match="-1"):
        h.set_threshold(conn, CTX, "horizon_seconds", -1)
    with pytest.raises(InvalidSetting, match="'bogus'"):
        h.set_threshold(conn, CTX, "bogus", 1)
    h.set_threshold(conn, CTX, "horizon_seconds", None)
    assert h.thresholds(conn, CTX)["horizon_seconds"] == 300

    got = run(dsn, "health", "set", "dead_tuple_ratio", "1.5")
    assert got.exit_code == 2 and "1.5" in got.stderr
    assert run(dsn, "health", "set", "dead_tuple_ratio", "0.3").exit_code == 0
    data = json.loads(run(dsn, "health", "--json").stdout)
    assert data["thresholds"]["dead_tuple_ratio"] == 0.3
    assert {"tables", "indexes", "connections", "lock_waits", "horizon", "alerts"} <= set(data)


def test_health_cli_exit_code_follows_the_alerts(dsn: str, snapshot_holder: Any) -> None:
    calm = run(dsn, "health")
    assert calm.exit_code == 0, calm.stderr
    assert "no alerts" in calm.stdout
    alarmed = run(dsn, "health", "--threshold", "horizon_seconds=0", "--fail-on-alert")
    assert alarmed.exit_code == 1
    assert "horizon_held" in alarmed.stdout and "pg_terminate_backend" in alarmed.stdout
    bad = run(dsn, "health", "--threshold", "nonsense")
    assert bad.exit_code == 2 and "nonsense" in bad.stderr
