"""Dead letters grouped on the server (forklift.ops.dead, migration 0008) and `forklift dead`.

The grouping covers every dead job: the table the triggers keep is checked against the jobs
after every kind of move into and out of `dead` (a worker's failure, requeue, delete, prune,
truncate), and the group actions against the audit trail and their batches.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from apps.ops import error, insert_job, job_state
from typer.testing import CliRunner

from forklift.cli.main import app as cli
from forklift.ops import Operator
from forklift.ops.dead import DeadGroupNotFound
from forklift.ops.errors import InvalidFilter


def dead(conn: psycopg.Connection[Any], message: str, *, kind: str = "ops.noop",
         code: str = "error", queue: str = "default", ago: float = 0.0) -> int:
    at = datetime.now(UTC) - timedelta(seconds=ago)
    return insert_job(conn, state="dead", kind=kind, queue=queue, finished_at=at,
                      errors=[error("error", "first try"), error(code, message, attempt=2)])


def in_sync(conn: psycopg.Connection[Any]) -> bool:
    """The side table holds exactly the dead jobs."""
    row = conn.execute(
        "SELECT (SELECT array_agg(id ORDER BY id) FROM forklift.jobs WHERE state = 'dead'),"
        " (SELECT array_agg(job_id ORDER BY job_id) FROM forklift.dead_letters)"
    ).fetchone()
    assert row is not None
    return bool(row[0] == row[1])


def test_groups_cover_every_dead_job_by_kind_code_and_message_shape(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    for n in range(12):
        dead(conn, f"user {n} not found", ago=n * 600)
    dead(conn, "order 'A-17' failed: 0xdeadbeef", code="card_declined", queue="pay")
    dead(conn, "order 'B-2' failed: 0xcafe", code="card_declined", queue="shop")
    dead(conn, "user 7 not found", kind="mail.send")
    insert_job(conn, state="completed")
    insert_job(conn, state="retryable", errors=[error("error", "user 3 not found")])
    with Operator(dsn) as op:
        found = op.dead_groups()
    assert (found.dead, found.group_count, found.more) == (15, 3, False)
    by = {(g.kind, g.code): g for g in found.groups}
    users = by[("ops.noop", "error")]
    assert (users.fingerprint, users.count) == ("user <n> not found", 12)
    assert (users.last_hour, users.last_day, users.last_week) == (6, 12, 12)
    assert users.sample_message == "user 0 not found" and users.queues == ["default"]
    cards = by[("ops.noop", "card_declined")]
    assert (cards.fingerprint, cards.count, cards.queues) == ("order <str> failed: <hex>", 2,
                                                              ["pay", "shop"])
    assert by[("mail.send", "error")].count == 1
    assert found.groups[0] == users  # most died in the last hour first
    assert len({g.id for g in found.groups}) == 3 and all(len(g.id) == 16 for g in found.groups)

    with Operator(dsn) as op:
        assert op.dead_groups(queue="pay").dead == 1
        assert [g.kind for g in op.dead_groups(kind="mail.send").groups] == ["mail.send"]
        top = op.dead_groups(limit=1)
        assert (len(top.groups), top.group_count, top.more, top.dead) == (1, 3, True, 15)
        assert op.dead_group(cards.id) == cards
        with pytest.raises(DeadGroupNotFound):
            op.dead_group("0" * 16)
        with pytest.raises(InvalidFilter):
            op.dead_group("not-a-group")


def test_the_side_table_follows_every_move_into_and_out_of_dead(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    ids = [dead(conn, f"gone {n}") for n in range(4)]
    live = insert_job(conn, state="running", errors=[error("error", "x")])
    assert in_sync(conn)
    # a worker's last failure: the row moves running -> dead
    conn.execute("UPDATE forklift.jobs SET state = 'dead', finished_at = now(), worker_id = NULL,"
                 " lease_expires_at = NULL WHERE id = %s", (live,))
    assert in_sync(conn)
    # heartbeats and progress writes leave it alone (and are not even considered)
    conn.execute("UPDATE forklift.jobs SET progress = '{}'::jsonb WHERE id = %s", (ids[0],))
    with Operator(dsn) as op:
        op.requeue(ids[0])
        op.delete(ids[1])
        op.prune(dead_older_than="0s")
    assert job_state(conn, ids[0]) == "available" and in_sync(conn)
    assert conn.execute("SELECT count(*) FROM forklift.dead_letters").fetchone() == (0,)
    dead(conn, "again")
    conn.execute("TRUNCATE forklift.jobs")
    assert in_sync(conn)


def test_requeue_a_group_in_bounded_audited_batches(dsn: str, conn: psycopg.Connection[Any]) -> None:
    group_ids = [dead(conn, f"timeout after {n}s") for n in range(25)]
    other = dead(conn, "disk full")
    with Operator(dsn, actor="alice") as op:
        g = next(x for x in op.dead_groups().groups if x.count == 25)
        dry = op.requeue_dead_group(g.id, dry_run=True)
        assert (dry.matched, dry.dry_run, dry.filter["dead_group"]) == (25, True, g.id)
        assert dry.filter["fingerprint"] == "timeout after <n>s"
        assert job_state(conn, group_ids[0]) == "dead"
        report = op.requeue_dead_group(g.id, batch_size=10, cap=20, reason="fixed")
    assert (report.done, report.batches, report.more) == (20, 2, True)
    assert report.outcomes == {"requeued": 20}
    states = [job_state(conn, i) for i in group_ids]
    assert states.count("available") == 20 and states.count("dead") == 5
    assert job_state(conn, other) == "dead" and in_sync(conn)
    rows = conn.execute("SELECT actor, action, count, target, reason FROM forklift.audit"
                        " ORDER BY id").fetchall()
    assert [(r[0], r[1], r[2], r[4]) for r in rows] == [("alice", "requeue_many", 10, "fixed")] * 2
    assert rows[0][3]["filter"]["dead_group"] == g.id
    with Operator(dsn) as op:
        assert op.dead_group(g.id).count == 5


def run(dsn: str, *args: str, input: str | None = None) -> Any:
    return CliRunner().invoke(cli, list(args), env={"FORKLIFT_DSN": dsn}, input=input)


def test_the_dead_commands(dsn: str, conn: psycopg.Connection[Any]) -> None:
    ids = [dead(conn, f"user {n} not found", kind="mail\x1b[31m.send") for n in range(3)]
    dead(conn, "other")
    listed = run(dsn, "dead", "groups", "--json")
    assert listed.exit_code == 0, listed.output
    doc = json.loads(listed.stdout)
    assert doc["dead"] == 4 and doc["group_count"] == 2
    g = next(x for x in doc["groups"] if x["count"] == 3)
    assert g["kind"] == "mail\x1b[31m.send" and g["fingerprint"] == "user <n> not found"

    human = run(dsn, "dead", "groups")
    assert human.exit_code == 0 and g["id"] in human.stdout
    assert "mail\\x1b[31m.send" in human.stdout and "\x1b" not in human.stdout
    assert "4 dead jobs in 2 groups" in human.stdout

    dry = run(dsn, "dead", "requeue", g["id"], "--dry-run")
    assert dry.exit_code == 0 and "would act on 3 jobs" in dry.stdout
    refused = run(dsn, "dead", "requeue", g["id"])  # no terminal, no --yes
    assert refused.exit_code == 1 and "--yes" in refused.stderr
    assert all(job_state(conn, i) == "dead" for i in ids)

    done = run(dsn, "dead", "requeue", g["id"], "--yes", "--json", "--reason", "smtp back")
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["outcomes"] == {"requeued": 3}
    assert all(job_state(conn, i) == "available" for i in ids)

    gone = run(dsn, "dead", "delete", g["id"], "--yes", "--json")
    assert gone.exit_code == 1
    assert json.loads(gone.stdout)["error"]["code"] == "dead_group_not_found"
    assert len(gone.stderr.strip().splitlines()) == 1
    bad = run(dsn, "dead", "delete", "xyz", "--yes", "--json")
    assert bad.exit_code == 2 and json.loads(bad.stdout)["error"]["code"] == "invalid_filter"
    other = next(x for x in doc["groups"] if x["count"] == 1)
    deleted = run(dsn, "dead", "delete", other["id"], "--yes")
    assert deleted.exit_code == 0 and "1 deleted" in deleted.stdout
    assert conn.execute("SELECT count(*) FROM forklift.jobs WHERE state = 'dead'").fetchone() == (0,)


def test_grouping_reads_the_narrow_table_and_a_group_by_index(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    conn.execute("""
        INSERT INTO forklift.jobs (kind, state, finished_at, attempt, errors)
        SELECT 'k' || (i % 7), 'dead', now() - make_interval(secs => i), 1,
               jsonb_build_array(jsonb_build_object('code', 'error', 'message',
                                                    'item ' || i || ' failed'))
        FROM generate_series(1, 5000) i""")
    conn.execute("""
        INSERT INTO forklift.jobs (kind, state, finished_at, attempt)
        SELECT 'k', 'completed', now(), 1 FROM generate_series(1, 50000)""")
    conn.execute("ANALYZE forklift.jobs")
    conn.execute("ANALYZE forklift.dead_letters")
    with Operator(dsn) as op:
        found = op.dead_groups()
        g = found.groups[0]
    assert (found.dead, found.group_count) == (5000, 7)
    from forklift.ops.dead import GROUPS_SQL, DeadGroupFilter

    def plan(sql: str, params: Any) -> str:
        return "\n".join(r[0] for r in conn.execute("EXPLAIN " + sql, params))

    # Listing every group never reads the jobs table but by primary key.
    listing = plan(GROUPS_SQL.replace("{s}", "forklift"),
                   {"queue": None, "kind": None, "group": None, "limit": 100})
    assert "Seq Scan on jobs" not in listing and "jobs_pkey" in listing, listing
    # A group's jobs are found through the group index, not by scanning jobs.
    where, params = DeadGroupFilter(g.id).where()
    selecting = plan("SELECT t.id FROM forklift.jobs t WHERE " + where.replace("{s}", "forklift")
                     + " ORDER BY t.id LIMIT 10001", params)
    assert "dead_letters_group_idx" in selecting and "Seq Scan on jobs" not in selecting, selecting


def test_dead_jobs_in_partitioned_history_stay_in_their_groups(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    import asyncio

    from forklift._features import history
    from forklift._worker.maintenance import history as upkeep

    def run_upkeep() -> int:
        async def go() -> int:
            async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as a:
                return await upkeep.upkeep(a, "forklift")
        return asyncio.run(go())

    def all_dead_in_sync() -> bool:
        row = conn.execute(
            "SELECT (SELECT array_agg(id ORDER BY id) FROM (SELECT id FROM forklift.jobs"
            "  WHERE state = 'dead' UNION ALL SELECT id FROM forklift.jobs_history"
            "  WHERE state = 'dead') d),"
            " (SELECT array_agg(job_id ORDER BY job_id) FROM forklift.dead_letters)").fetchone()
        assert row is not None
        return bool(row[0] == row[1])

    history.enable(conn, "forklift")
    conn.execute("INSERT INTO forklift.settings (name, value) VALUES ('history.move_after', 0),"
                 " ('history.partitioned_since', 0) ON CONFLICT (name) DO UPDATE"
                 " SET value = excluded.value")
    today = datetime.now(UTC).date()
    old = today - timedelta(days=40)
    conn.execute(history.render(history.CREATE_SQL.format(
        s="{s}", name=history.partition_name("dead", old), state="dead", day=old.isoformat(),
        next=(old + timedelta(days=1)).isoformat()), "forklift"))
    recent = [dead(conn, f"user {n} not found") for n in range(3)]
    ancient = insert_job(conn, state="dead", errors=[error("error", "user 9 not found")],
                         finished_at=datetime(old.year, old.month, old.day, 12, tzinfo=UTC))
    conn.execute("WITH m AS (DELETE FROM forklift.jobs WHERE id = %s RETURNING *)"
                 " INSERT INTO forklift.jobs_history SELECT * FROM m", (ancient,))
    assert all_dead_in_sync()
    run_upkeep()  # moves the recent ones into history, drops the 40-day-old partition
    assert conn.execute("SELECT count(*) FROM forklift.jobs_history WHERE id = ANY(%s)",
                        (recent,)).fetchone() == (3,)
    assert history.partition_name("dead", old) not in {
        r[0] for r in conn.execute("SELECT relname FROM pg_class WHERE relkind = 'r'")}
    assert all_dead_in_sync()
    with Operator(dsn) as op:
        g = op.dead_groups().groups[0]
        assert (g.count, g.fingerprint) == (3, "user <n> not found")
        report = op.requeue_dead_group(g.id)
    assert report.done == 3 and all_dead_in_sync()
    assert conn.execute("SELECT count(*) FROM forklift.dead_letters").fetchone() == (0,)


def test_migration_0008_takes_in_history_enabled_before_it(empty_dsn: str) -> None:
    from forklift._db import migrate as _migrate
    from forklift._features import history

    with psycopg.connect(empty_dsn, autocommit=True) as c:
        _migrate.apply(c, "forklift", fresh_from_schema_file=False)
        # As a version-7 schema with partitioned history had it: no dead letters at all.
        c.execute("DROP TABLE forklift.dead_letters; DROP FUNCTION forklift.jobs_dead_moved()"
                  " CASCADE; DROP FUNCTION forklift.jobs_dead_truncated() CASCADE;"
                  " DELETE FROM forklift.schema_version WHERE version = 8")
        c.execute(history.render(history.ENABLE_SQL.replace(history.DEAD_LETTERS_SQL, ""),
                                 "forklift"))
        for step in history.upkeep_ddl("forklift", set(), datetime.now(UTC).date(), {}):
            c.execute(step)
        gone = insert_job(c, state="dead", errors=[error("error", "disk 3 full")])
        c.execute("WITH m AS (DELETE FROM forklift.jobs RETURNING *)"
                  " INSERT INTO forklift.jobs_history SELECT * FROM m")
        assert [m.version for m in _migrate.apply(c, "forklift")] == [8]
        assert c.execute("SELECT job_id, fingerprint FROM forklift.dead_letters").fetchall() == [
            (gone, "disk <n> full")]
        c.execute("DELETE FROM forklift.jobs_history")
        assert c.execute("SELECT count(*) FROM forklift.dead_letters").fetchone() == (0,)
