"""Partitioned history: enabled per installation, read transparently, kept by a leader service
that drops partitions for retention, and that loses nothing when its worker is killed mid-pass."""

from __future__ import annotations

import asyncio
import signal
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from apps import faults
from apps.faults import registered
from apps.ops import error, insert_job
from helpers import wait_until
from typer.testing import CliRunner

from forklift._features import history
from forklift._worker.maintenance import history as upkeep
from forklift.cli.main import app as cli
from forklift.ops import JobFilter, Operator, OpsContext
from forklift.ops import retention as ops_retention

db, procs = faults.db, faults.procs  # fixtures
CTX = OpsContext(actor="tester")


def enable(conn: psycopg.Connection[Any], move_after: float = 0.0) -> None:
    history.enable(conn, "forklift")
    conn.execute("INSERT INTO forklift.settings (name, value) VALUES ('history.move_after', %s),"
                 " ('history.partitioned_since', 0) ON CONFLICT (name) DO UPDATE"
                 " SET value = excluded.value", (move_after,))


def run_upkeep(dsn: str) -> int:
    async def go() -> int:
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as a:
            return await upkeep.upkeep(a, "forklift")
    return asyncio.run(go())


def where(conn: psycopg.Connection[Any], ids: list[int]) -> dict[int, str]:
    rows = conn.execute(
        "SELECT id, 'jobs' FROM forklift.jobs WHERE id = ANY(%(i)s) UNION ALL"
        " SELECT id, 'history' FROM forklift.jobs_history WHERE id = ANY(%(i)s)", {"i": ids})
    found: dict[int, str] = {}
    for i, table in rows.fetchall():
        assert i not in found, f"job {i} is in both tables"
        found[int(i)] = str(table)
    return found


def partitions(conn: psycopg.Connection[Any]) -> set[str]:
    return {str(r[0]) for r in conn.execute(
        "SELECT relname FROM pg_class WHERE relname LIKE 'jobs\\_history\\_%\\_%' AND relkind = 'r'")}


def test_migrate_flag_enables_it_once(dsn: str, conn: psycopg.Connection[Any]) -> None:
    first = CliRunner().invoke(cli, ["migrate", "--partitioned-history"], env={"FORKLIFT_DSN": dsn})
    assert first.exit_code == 0 and "partitioned history enabled" in first.stdout
    again = CliRunner().invoke(cli, ["migrate", "--partitioned-history"], env={"FORKLIFT_DSN": dsn})
    assert again.exit_code == 0 and "already enabled" in again.stdout
    today = datetime.now(UTC).date()
    expected = {history.partition_name(s, today + timedelta(days=d))
                for s in history.STATES for d in range(history.AHEAD_DAYS + 1)}
    assert expected <= partitions(conn)


def test_without_it_reads_are_the_jobs_table(conn: psycopg.Connection[Any]) -> None:
    assert history.render_read("SELECT 1 FROM {s}.jobs t", conn, "forklift") == (
        'SELECT 1 FROM "forklift".jobs t')
    assert run_upkeep(conn.info.dsn) == 0  # the chore finds nothing to do


def test_finished_jobs_move_and_reads_and_actions_see_them(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    enable(conn)
    done = insert_job(conn, state="completed", queue="mail")
    dead = insert_job(conn, state="dead", queue="mail", errors=[error(code="smtp_refused")])
    live = insert_job(conn, queue="mail")
    assert run_upkeep(dsn) == 2
    assert where(conn, [done, dead, live]) == {done: "history", dead: "history", live: "jobs"}
    with Operator(dsn, actor="tester") as op:
        assert op.job(dead).job.state == "dead"
        listed = op.jobs()
        assert {j.id for j in listed.jobs} == {done, dead, live}
        assert op.stats().totals.counts["dead"] == 1
        result = op.requeue(dead)
        assert result.state == "available"
        op.delete(done)
    assert where(conn, [done, dead, live]) == {dead: "jobs", live: "jobs"}
    assert conn.execute("SELECT state FROM forklift.jobs WHERE id = %s", (dead,)).fetchone() == (
        "available",)


def test_retention_drops_whole_partitions(dsn: str, conn: psycopg.Connection[Any]) -> None:
    enable(conn)
    today = datetime.now(UTC).date()
    old = today - timedelta(days=10)
    for state in ("completed", "dead"):
        conn.execute(history.render(history.CREATE_SQL.format(
            s="{s}", name=history.partition_name(state, old), state=state, day=old.isoformat(),
            next=(old + timedelta(days=1)).isoformat()), "forklift"))
    at = datetime(old.year, old.month, old.day, 12, tzinfo=UTC)
    gone = insert_job(conn, state="completed", finished_at=at)
    kept = insert_job(conn, state="dead", finished_at=at, errors=[error()])
    conn.execute("WITH m AS (DELETE FROM forklift.jobs RETURNING *)"
                 " INSERT INTO forklift.jobs_history SELECT * FROM m")
    run_upkeep(dsn)
    names = partitions(conn)
    assert history.partition_name("completed", old) not in names  # 1 day: dropped whole
    assert history.partition_name("dead", old) in names  # 30 days: kept
    assert where(conn, [gone, kept]) == {kept: "history"}
    # A queue that keeps completed jobs for ever keeps every completed partition.
    ops_retention.set_window(conn, CTX, "completed", "forever", queue="audit", create=True)
    assert history.keep_days({("completed", ""): 86400.0, ("completed", "audit"): None})[
        "completed"] is None


def test_shorter_queue_windows_delete_rows_in_history(dsn: str, conn: psycopg.Connection[Any]) -> None:
    enable(conn)
    conn.execute("INSERT INTO forklift.queues (name) VALUES ('thumbs')")
    ops_retention.set_window(conn, CTX, "completed", "1s", queue="thumbs")
    now = datetime.now(UTC)
    short = insert_job(conn, state="completed", queue="thumbs", finished_at=now - timedelta(seconds=5))
    other = insert_job(conn, state="completed", queue="mail", finished_at=now - timedelta(seconds=5))
    run_upkeep(dsn)  # moves both, then deletes the thumbs row (its window is shorter)
    assert where(conn, [short, other]) == {other: "history"}


@pytest.mark.slow
def test_history_survives_a_worker_killed_mid_maintenance(
    dsn: str, db: psycopg.Connection[Any], procs: faults.Procs
) -> None:
    enable(db)
    db.execute("""
        INSERT INTO forklift.jobs (kind, state, attempt, attempted_at, finished_at)
        SELECT 'faults.quick', 'completed', 1, now(), now() - interval '1 second'
        FROM generate_series(1, 3000)""")
    ids = [int(r[0]) for r in db.execute("SELECT id FROM forklift.jobs ORDER BY id")]
    # Hold the history table so the first leader's move waits on its lock, mid-pass.
    blocker = psycopg.connect(dsn)
    blocker.execute("LOCK TABLE forklift.jobs_history IN SHARE MODE")
    try:
        a = procs.start(lease=2.0)
        a_id = registered(db, a)

        def waiting() -> int | None:
            row = db.execute(
                "SELECT pid FROM pg_stat_activity WHERE application_name = %s"
                " AND wait_event_type = 'Lock'", (f"forklift:{a_id}:history",)).fetchone()
            return int(row[0]) if row else None

        backend = wait_until(waiting, timeout=30, message="the leader's move never started")
        a.signal(signal.SIGKILL)  # the worker dies mid-pass...
        db.execute("SELECT pg_terminate_backend(%s)", (backend,))  # ...and its statement with it
        wait_until(lambda: not db.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s",
                                          (backend,)).fetchone(), message="backend lingers")
    finally:
        blocker.rollback()
        blocker.close()
    assert set(where(db, ids).values()) == {"jobs"}  # the cut-off move left everything in place

    b = procs.start(lease=2.0)
    registered(db, b)
    wait_until(lambda: set(where(db, ids).values()) == {"history"}, timeout=60,
               message=lambda: f"moved so far: {sorted(set(where(db, ids).values()))}")
    assert len(where(db, ids)) == len(ids)  # nothing lost, nothing twice
    assert b.stop() == 0


def test_the_worker_role_keeps_partitioned_history(dsn: str, conn: psycopg.Connection[Any]) -> None:
    import secrets

    from psycopg.conninfo import make_conninfo

    from forklift.ops import roles

    enable(conn)
    report = roles.create(conn, CTX, f"t{secrets.token_hex(4)}")
    names = ", ".join(report.roles.values())
    try:
        job = insert_job(conn, state="completed")
        as_worker = make_conninfo(dsn, user=report.roles["worker"])
        conn.execute(history.render(history.DROP_SQL.format(
            s="{s}", name=history.partition_name("dead", datetime.now(UTC).date()
                                                 + timedelta(days=history.AHEAD_DAYS))),
            "forklift"))
        assert run_upkeep(as_worker) == 1  # creates the missing partition, moves the job
        assert where(conn, [job]) == {job: "history"}
    finally:
        conn.execute(f"REASSIGN OWNED BY {names} TO CURRENT_USER")
        conn.execute(f"DROP OWNED BY {names}")
        conn.execute(f"DROP ROLE {names}")


def test_a_column_added_to_jobs_later_reaches_history(dsn: str, conn: psycopg.Connection[Any]) -> None:
    enable(conn)
    conn.execute("ALTER TABLE forklift.jobs ADD COLUMN shard integer")  # a later migration
    job = insert_job(conn, state="completed")
    run_upkeep(dsn)
    assert where(conn, [job]) == {job: "history"}
    with Operator(dsn, actor="tester") as op:
        assert op.job(job).job.state == "completed"  # both tables still read as one


def test_a_tenant_is_found_by_index_in_history_too(dsn: str, conn: psycopg.Connection[Any]) -> None:
    """Every day partition, those the upkeep makes later included, indexes the tenant, so
    `jobs list --tenant` reads a tenant's finished jobs without a pass over each partition."""
    enable(conn)
    job = insert_job(conn, state="completed", queue="mail")
    conn.execute("UPDATE forklift.jobs SET tenant = 'acme' WHERE id = %s", (job,))
    run_upkeep(dsn)
    leaves = {str(r[0]) for r in conn.execute(
        "SELECT c.relname FROM pg_partition_tree('forklift.jobs_history') t"
        " JOIN pg_class c ON c.oid = t.relid WHERE t.isleaf")}
    indexed = {str(r[0]) for r in conn.execute(
        "SELECT tablename FROM pg_indexes WHERE schemaname = 'forklift'"
        " AND indexdef LIKE '%(tenant, id) WHERE (tenant IS NOT NULL)'")}
    assert leaves and leaves <= indexed, leaves - indexed
    with Operator(dsn, actor="tester") as op:
        assert [j.id for j in op.jobs.list(JobFilter.build(tenants="acme")).jobs] == [job]
    assert where(conn, [job]) == {job: "history"}
