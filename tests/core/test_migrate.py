"""Schema migrations: applied once, in order, safely under concurrency; refused when behind."""

from __future__ import annotations

import subprocess
import sys
import threading
from typing import Any

import psycopg
import pytest
from helpers import wait_until
from psycopg import errors

from forklift._base.errors import SchemaOutdated
from forklift._db.migrate import (
    _lock_key,
    current_version,
    ensure_current,
    migrate,
    migrations,
    pending,
    required_version,
)

SCHEMA = "forklift"


def versions(conninfo: str) -> list[int]:
    with psycopg.connect(conninfo) as c:
        return [r[0] for r in c.execute("SELECT version FROM forklift.schema_version ORDER BY 1")]


def test_migrate_applies_v1_to_an_empty_database(empty_dsn: str) -> None:
    applied = migrate(empty_dsn, SCHEMA)

    assert [m.version for m in applied][:1] == [1]
    assert [m.version for m in applied] == [m.version for m in migrations()]
    assert versions(empty_dsn) == [m.version for m in applied]
    with psycopg.connect(empty_dsn) as c:
        tables = {
            r[0]
            for r in c.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = 'forklift'"
            )
        }
    assert {"jobs", "queues", "workers", "leader", "audit", "schema_version"} <= tables


def test_applying_twice_is_a_no_op(empty_dsn: str) -> None:
    assert migrate(empty_dsn, SCHEMA)
    assert migrate(empty_dsn, SCHEMA) == []
    assert versions(empty_dsn) == [m.version for m in migrations()]


def test_the_template_is_current(dsn: str) -> None:
    assert migrate(dsn, SCHEMA) == []
    with psycopg.connect(dsn) as c:
        assert current_version(c, SCHEMA) == required_version()
        ensure_current(c, SCHEMA)


def test_concurrent_migrators_apply_once(empty_dsn: str) -> None:
    """Two migrators queue on the advisory lock; the second finds the work done."""
    results: list[int] = []
    failures: list[BaseException] = []

    def run() -> None:
        try:
            results.append(len(migrate(empty_dsn, SCHEMA)))
        except BaseException as exc:  # reported below
            failures.append(exc)

    with psycopg.connect(empty_dsn, autocommit=True) as gate:
        # Hold the migrators' lock so both are provably inside apply() at the same time.
        gate.execute("SELECT pg_advisory_lock(hashtextextended(%s, 0))", (_lock_key(SCHEMA),))
        threads = [threading.Thread(target=run) for _ in range(2)]
        for t in threads:
            t.start()

        def waiting() -> bool:
            row = gate.execute(
                "SELECT count(*) FROM pg_stat_activity"
                " WHERE datname = current_database() AND wait_event_type = 'Lock'"
                " AND application_name = 'forklift:migrate'"
            ).fetchone()
            return row is not None and row[0] == 2

        wait_until(waiting, message="both migrators should wait on the advisory lock")
        gate.execute("SELECT pg_advisory_unlock(hashtextextended(%s, 0))", (_lock_key(SCHEMA),))
        for t in threads:
            t.join(timeout=30)

    assert not failures, failures
    assert sorted(results) == [0, len(migrations())]
    assert versions(empty_dsn) == [m.version for m in migrations()]


def test_concurrent_migrator_processes(empty_dsn: str) -> None:
    code = "import sys; from forklift._db.migrate import migrate; print(len(migrate(sys.argv[1])))"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, empty_dsn],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outputs = [p.communicate(timeout=60) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    assert sorted(int(out) for out, _ in outputs) == [0, len(migrations())]
    assert versions(empty_dsn) == [m.version for m in migrations()]


def test_ensure_current_refuses_an_empty_database(empty_dsn: str) -> None:
    with psycopg.connect(empty_dsn) as c, pytest.raises(SchemaOutdated) as info:
        ensure_current(c, SCHEMA)
    assert "forklift migrate" in str(info.value)
    assert info.value.detail == {"have": 0, "need": required_version()}


def test_terminal_states_need_finished_at(conn: psycopg.Connection[Any]) -> None:
    insert = "INSERT INTO forklift.jobs (kind, state, finished_at) VALUES ('k', %s, {})"
    with pytest.raises(errors.CheckViolation, match="jobs_finished_iff_terminal"):
        conn.execute(insert.format("NULL"), ("completed",))
    with pytest.raises(errors.CheckViolation, match="jobs_finished_iff_terminal"):
        conn.execute(insert.format("now()"), ("available",))
    conn.execute(insert.format("now()"), ("dead",))
    conn.execute(insert.format("NULL"), ("scheduled",))
    row = conn.execute("SELECT count(*) FROM forklift.jobs").fetchone()
    assert row == (2,)


def test_every_known_state_is_accepted_and_no_other(conn: psycopg.Connection[Any]) -> None:
    insert = ("INSERT INTO forklift.jobs (kind, state, finished_at, worker_id, fence,"
              " lease_expires_at) VALUES ('k', %s, {}, 'w', 1, now())")
    terminal = {"completed", "cancelled", "dead"}
    for state in ("scheduled", "available", "running", "retryable", *sorted(terminal)):
        conn.execute(insert.format("now()" if state in terminal else "NULL"), (state,))
    for bad in ("done", "Available", ""):
        with pytest.raises(errors.CheckViolation, match="jobs_state_known"):
            conn.execute(insert.format("NULL"), (bad,))
    row = conn.execute("SELECT count(*) FROM forklift.jobs").fetchone()
    assert row == (7,)


def test_state_sets_are_stored_as_one_constant(conn: psycopg.Connection[Any]) -> None:
    # Every statement on jobs prepares its checks and WHEN clauses from their stored form: a
    # list of names is one node per name to parse and fold each time, an array constant one.
    defs = [r[0] for r in conn.execute(
        "SELECT pg_get_constraintdef(oid) FROM pg_constraint"
        " WHERE conrelid = 'forklift.jobs'::regclass AND contype = 'c'"
        " UNION ALL SELECT pg_get_triggerdef(oid) FROM pg_trigger"
        " WHERE tgrelid = 'forklift.jobs'::regclass AND NOT tgisinternal").fetchall()]
    with_sets = [d for d in defs if "ANY" in d]
    assert len(with_sets) >= 4, defs  # two checks, the two delete triggers' WHEN clauses
    assert not [d for d in defs if "ARRAY[" in d], defs


def test_a_state_change_prepares_one_trigger_clause(conn: psycopg.Connection[Any]) -> None:
    # Each UPDATE naming `state` prepares the WHEN clause of every UPDATE OF state trigger, per
    # statement: the batch, dead-letter and dependency work share one trigger and one clause.
    on_state = conn.execute(
        "SELECT tgname FROM pg_trigger WHERE tgrelid = 'forklift.jobs'::regclass"
        " AND NOT tgisinternal AND pg_get_triggerdef(oid) LIKE '%UPDATE OF state%'").fetchall()
    assert on_state == [("jobs_state_moved",)]


def test_one_live_job_per_unique_key(conn: psycopg.Connection[Any]) -> None:
    insert = "INSERT INTO forklift.jobs (kind, unique_key) VALUES (%s, %s) RETURNING id"
    first = conn.execute(insert, ("report", "day-1")).fetchone()
    assert first is not None
    with pytest.raises(errors.UniqueViolation, match="jobs_unique_live_idx"):
        conn.execute(insert, ("report", "day-1"))
    conn.execute(insert, ("other-kind", "day-1"))  # the key is per kind
    conn.execute(
        "UPDATE forklift.jobs SET state = 'completed', finished_at = now() WHERE id = %s",
        (first[0],),
    )
    conn.execute(insert, ("report", "day-1"))  # the first no longer holds the key
    row = conn.execute(
        "SELECT count(*) FROM forklift.jobs WHERE kind = 'report' AND unique_key = 'day-1'"
    ).fetchone()
    assert row == (2,)


def test_a_migration_missing_below_the_highest_is_still_applied(dsn: str) -> None:
    # Branches merge in any order: a schema that recorded version N+1 before version N existed
    # must still get N, and a worker must refuse it until then.
    last = migrations()[-1]
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute("DELETE FROM forklift.schema_version WHERE version = 1")
        with pytest.raises(SchemaOutdated):
            ensure_current(c, SCHEMA)
        assert [m.version for m in pending(c, SCHEMA)] == [1]
        assert current_version(c, SCHEMA) == last.version
