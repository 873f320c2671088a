"""Versioned SQL migrations, applied in order under an advisory lock, each in one transaction."""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources
from typing import Any

import psycopg

from forklift._db import connection
from forklift._errors import SchemaOutdated
from forklift._sqltext import check_schema, render

_FILE = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    text: str


def migrations() -> list[Migration]:
    found = []
    for entry in resources.files("forklift").joinpath("migrations").iterdir():
        m = _FILE.match(entry.name)
        if m:
            found.append(Migration(int(m.group(1)), m.group(2), entry.read_text("utf-8")))
    return sorted(found, key=lambda m: m.version)


def required_version() -> int:
    return migrations()[-1].version


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


def pending(conn: psycopg.Connection[Any], schema: str) -> list[Migration]:
    have = current_version(conn, schema)
    return [m for m in migrations() if m.version > have]


def apply(conn: psycopg.Connection[Any], schema: str) -> list[Migration]:
    """Apply pending migrations; safe when several processes call it at once."""
    check_schema(schema)
    applied: list[Migration] = []
    with conn.transaction():
        # Serialise concurrent migrators; the loser sees the winner's work and applies nothing.
        conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (_lock_key(schema),))
        conn.execute(render("CREATE SCHEMA IF NOT EXISTS {s}", schema))
        conn.execute(
            render(
                "CREATE TABLE IF NOT EXISTS {s}.schema_version ("
                " version integer PRIMARY KEY, name text NOT NULL,"
                " applied_at timestamptz NOT NULL DEFAULT now())",
                schema,
            )
        )
        for m in pending(conn, schema):
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
    if have < need:
        raise SchemaOutdated(
            f"the database schema {schema!r} is at version {have}, this forklift needs {need}:"
            " run `forklift migrate`",
            have=have,
            need=need,
        )
