"""Versioned SQL migrations, applied in order under an advisory lock, each in one transaction.

``migrations/NNNN_name.sql`` take a schema from one version to the next; ``schema.sql`` is the
whole current schema in one readable file, and a fresh schema is created from it (one step,
every version recorded). A test builds a database both ways and compares the catalogs, so the
two cannot drift. PL/pgSQL that changes over time lives in versioned files under
``functions/`` (``batches_v1.sql``, then ``batches_v2.sql``...), pulled into a migration or
into schema.sql by a psql-style ``\\ir path`` line (resolved relative to the including file).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources
from typing import Any

import psycopg

from forklift._base.errors import SchemaOutdated
from forklift._db.connections import connection
from forklift._db.sqltext import check_schema, render

_FILE = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")
_INCLUDE = re.compile(r"^\\ir\s+(\S+)\s*$", re.M)


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    text: str


def _expand(folder: str, text: str) -> str:
    """Replace each ``\\ir path`` line by that file's text (paths relative to ``folder``)."""

    def include(m: re.Match[str]) -> str:
        parts = [p for p in f"{folder}/{m.group(1)}".split("/") if p not in ("", ".")]
        resolved: list[str] = []
        for part in parts:
            if part == "..":
                resolved.pop()
            else:
                resolved.append(part)
        entry = resources.files("forklift._db.schema").joinpath(*resolved)
        return _expand("/".join(resolved[:-1]), entry.read_text("utf-8"))

    return _INCLUDE.sub(include, text)


def migrations() -> list[Migration]:
    found = []
    for entry in resources.files("forklift._db.schema").joinpath("migrations").iterdir():
        m = _FILE.match(entry.name)
        if m:
            text = _expand("migrations", entry.read_text("utf-8"))
            found.append(Migration(int(m.group(1)), m.group(2), text))
    return sorted(found, key=lambda m: m.version)


def schema_text() -> str:
    """The whole current schema (``schema.sql``, includes resolved)."""
    return _expand("", resources.files("forklift._db.schema").joinpath("schema.sql").read_text("utf-8"))


def fingerprint() -> str:
    """A digest of everything that defines the schema (migrations and schema.sql)."""
    import hashlib

    digest = hashlib.sha256(schema_text().encode())
    for m in migrations():
        digest.update(f"\0{m.version}\0{m.name}\0{m.text}".encode())
    return digest.hexdigest()


def required_version() -> int:
    return migrations()[-1].version


#: The runner's own record of what is applied (not in schema.sql: it exists before either).
VERSION_TABLE = (
    "CREATE TABLE IF NOT EXISTS {s}.schema_version ("
    " version integer PRIMARY KEY, name text NOT NULL,"
    " applied_at timestamptz NOT NULL DEFAULT now())"
)


def _lock_key(schema: str) -> str:
    return f"forklift.migrate:{schema}"


def current_version(conn: psycopg.Connection[Any], schema: str) -> int:
    row = conn.execute(
        "SELECT to_regclass(%s) IS NOT NULL", (f"{check_schema(schema)}.schema_version",)
    ).fetchone()
    if not row or not row[0]:
        return 0
    got = conn.execute(render("SELECT coalesce(max(version), 0) FROM {s}.schema_version", schema))
    value = got.fetchone()
    return int(value[0]) if value else 0


def applied_versions(conn: psycopg.Connection[Any], schema: str) -> set[int]:
    if current_version(conn, schema) == 0:
        return set()
    rows = conn.execute(render("SELECT version FROM {s}.schema_version", schema)).fetchall()
    return {int(r[0]) for r in rows}


def pending(conn: psycopg.Connection[Any], schema: str) -> list[Migration]:
    """Every migration not yet recorded, in order -- not only those above the highest applied:
    a branch that merged a later number first must not make an earlier one skipped."""
    have = applied_versions(conn, schema)
    return [m for m in migrations() if m.version not in have]


def apply(
    conn: psycopg.Connection[Any], schema: str, *, fresh_from_schema_file: bool = True
) -> list[Migration]:
    """Apply pending migrations; safe when several processes call it at once.

    A schema with no version yet is created from ``schema.sql`` in one step (every version is
    recorded as applied); ``fresh_from_schema_file=False`` replays the migrations instead (the
    test that keeps the two equal uses both).
    """
    check_schema(schema)
    applied: list[Migration] = []
    with conn.transaction():
        # Serialise concurrent migrators; the loser sees the winner's work and applies nothing.
        conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (_lock_key(schema),))
        conn.execute(render("CREATE SCHEMA IF NOT EXISTS {s}", schema))
        conn.execute(render(VERSION_TABLE, schema))
        todo = pending(conn, schema)
        if fresh_from_schema_file and todo and current_version(conn, schema) == 0:
            conn.execute(render(schema_text(), schema).encode())
            for m in todo:
                conn.execute(
                    render("INSERT INTO {s}.schema_version (version, name) VALUES (%s, %s)",
                           schema),
                    (m.version, m.name),
                )
            return todo
        for m in todo:
            conn.execute(render(m.text, schema).encode())
            conn.execute(
                render("INSERT INTO {s}.schema_version (version, name) VALUES (%s, %s)", schema),
                (m.version, m.name),
            )
            applied.append(m)
    return applied


def migrate(conninfo: str, schema: str = "forklift") -> list[Migration]:
    with connection(conninfo, "migrate") as conn:
        return apply(conn, schema)


def ensure_current(conn: psycopg.Connection[Any], schema: str) -> None:
    """Refuse to work against an older schema, naming the command that fixes it."""
    have = current_version(conn, schema)
    need = required_version()
    if have < need or pending(conn, schema):
        raise SchemaOutdated(
            f"the database schema {schema!r} is at version {have}, this forklift needs {need}:"
            " run `forklift migrate`",
            have=have,
            need=need,
        )
