"""`forklift migrate --check` finds what was changed by hand: the live schema against one built
from schema.sql, read from the catalog, with nothing left behind."""

from __future__ import annotations

from typing import Any

import psycopg

from forklift.ops.migrations import Drift, drift


def test_a_schema_as_forklift_made_it_has_no_drift(conn: psycopg.Connection[Any]) -> None:
    assert drift(conn, "forklift") == []
    left = conn.execute("SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'forklift_drift_%'"
                        ).fetchone()
    assert left == (0,)


def test_hand_made_changes_are_named(conn: psycopg.Connection[Any]) -> None:
    conn.execute("DROP INDEX forklift.jobs_dead_idx")
    conn.execute("CREATE INDEX jobs_by_hand ON forklift.jobs (kind)")
    conn.execute("ALTER TABLE forklift.jobs ADD COLUMN note text")
    conn.execute("ALTER TABLE forklift.queues ALTER COLUMN pause_reason SET NOT NULL")
    conn.execute("""CREATE OR REPLACE FUNCTION forklift.desired_workers(
        p_queue text, p_per_worker integer DEFAULT NULL, p_max integer DEFAULT 100,
        p_target double precision DEFAULT 30) RETURNS integer LANGUAGE sql AS 'SELECT 1'""")
    found = {(d.part, d.name, d.change) for d in drift(conn, "forklift")}
    assert found == {
        ("indexes", "jobs_dead_idx", "missing"),
        ("indexes", "jobs_by_hand", "extra"),
        ("columns", "jobs.note", "extra"),
        ("columns", "queues.pause_reason", "altered"),
        # PostgreSQL 18 records a NOT NULL as a constraint of its own as well
        *([("constraints", "queues.queues_pause_reason_not_null", "extra")]
          if conn.info.server_version >= 180000 else []),
        ("functions", "desired_workers(p_queue text, p_per_worker integer, p_max integer,"
                      " p_target double precision)", "altered"),
    }
    (altered,) = [d for d in drift(conn, "forklift") if d.name == "queues.pause_reason"]
    assert altered == Drift("columns", "queues.pause_reason", "altered",
                            expected="text False  ", found="text True  ")


def test_the_optional_partitioned_history_is_not_drift(conn: psycopg.Connection[Any]) -> None:
    from forklift.ops import history

    assert history.enable(conn, "forklift")
    assert drift(conn, "forklift") == []
