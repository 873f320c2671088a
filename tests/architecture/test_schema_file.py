"""schema.sql and the numbered migrations describe the same schema.

A fresh schema is created from ``schema.sql``; existing ones are upgraded by the migrations.
Both must land on the same catalog: tables and their storage options, columns in order with
types, defaults and identity, constraints, indexes, functions, triggers and sequences.
"""

from __future__ import annotations

from typing import Any

import psycopg

from forklift._db.catalog import CATALOG
from forklift._db.catalog import read as read_catalog
from forklift._db.migrate import apply, migrations, schema_text

SCHEMA = "forklift"

def catalog(conninfo: str) -> dict[str, list[tuple[Any, ...]]]:
    with psycopg.connect(conninfo) as conn:
        return read_catalog(conn, SCHEMA)


def build(conninfo: str, *, from_schema_file: bool) -> list[int]:
    with psycopg.connect(conninfo, autocommit=True) as conn:
        applied = apply(conn, SCHEMA, fresh_from_schema_file=from_schema_file)
        got = conn.execute(f"SELECT version FROM {SCHEMA}.schema_version ORDER BY 1").fetchall()
    assert [m.version for m in applied] == [r[0] for r in got]
    return [r[0] for r in got]


def test_schema_file_equals_the_migrations(empty_dsn: str, admin_dsn: str) -> None:
    with psycopg.connect(admin_dsn, autocommit=True) as admin:
        other = psycopg.conninfo.conninfo_to_dict(empty_dsn)["dbname"] + "_m"
        admin.execute(f'CREATE DATABASE "{other}"')
    try:
        replayed = psycopg.conninfo.make_conninfo(empty_dsn, dbname=other)
        assert build(replayed, from_schema_file=False) == [m.version for m in migrations()]
        assert build(empty_dsn, from_schema_file=True) == [m.version for m in migrations()]
        from_migrations, from_file = catalog(replayed), catalog(empty_dsn)
        for part in CATALOG:
            assert from_file[part] == from_migrations[part], part
        assert len(from_file["tables"]) >= 10 and len(from_file["functions"]) >= 6
    finally:
        with psycopg.connect(admin_dsn, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{other}" WITH (FORCE)')


def test_the_comparison_sees_a_difference(empty_dsn: str) -> None:
    # If the catalog read missed column defaults or index definitions, the test above would
    # prove nothing: change one of each after building and look for it.
    build(empty_dsn, from_schema_file=True)
    before = catalog(empty_dsn)
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        conn.execute(f"ALTER TABLE {SCHEMA}.jobs ALTER COLUMN priority SET DEFAULT 1")
        conn.execute(f"DROP INDEX {SCHEMA}.jobs_retried_idx")
    after = catalog(empty_dsn)
    assert before["columns"] != after["columns"] and before["indexes"] != after["indexes"]


def test_versioned_function_files_are_included_not_copied() -> None:
    # The batch bookkeeping is written once, in functions/batches_v1.sql, and pulled in.
    text = schema_text()
    assert text.count("FUNCTION {s}.batch_apply(") == 1
    by_version = {m.version: m.text for m in migrations()}
    assert "FUNCTION {s}.batch_apply(" in by_version[3]
    for source in [text, *by_version.values()]:
        assert not any(line.startswith("\\ir") for line in source.splitlines())
