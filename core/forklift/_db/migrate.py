"""Versioned SQL migrations, applied in order under an advisory lock, each in one transaction
(bar the indexes it marks ``-- concurrently``, built after it commits).

``migrations/NNNN_name.sql`` take a schema from one version to the next; ``schema.sql`` is the
whole current schema in one readable file, and a fresh schema is created from it (one step,
every version recorded). A test builds a database both ways and compares the catalogs, so the
two cannot drift. PL/pgSQL that changes over time lives in versioned files under
``functions/`` (``batches_v1.sql``, then ``batches_v2.sql``...), pulled into a migration or
into schema.sql by a psql-style ``\\ir path`` line (resolved relative to the including file).

Two header rules a migration may use:

``-- workers: N``
    The oldest worker it still works with: workers built for schema N or later keep working
    once it is applied, older ones break. No such line: every older worker keeps working.
    ``forklift migrate`` refuses (without ``--force``) while a live worker it would break is
    registered (the worker's row records the schema it was built for).

``-- concurrently``
    On a line of its own before a ``CREATE [UNIQUE] INDEX name ON ...`` statement: that index
    is built with ``CREATE INDEX CONCURRENTLY IF NOT EXISTS`` outside the migration's
    transaction, after it commits, so writers to a large table are never blocked by the build.
    The rest of the migration commits first and is recorded as the negative version (-N: "in,
    indexes still building"); the version itself is recorded only once every index is built
    and valid, so a worker needing it still refuses to start meanwhile. A build that was
    interrupted leaves an invalid index behind: the next run drops it and builds it again (and
    does not replay the committed part). Concurrent builds of one schema are serialised by a
    session-level advisory lock taken by polling, so a waiting migrator never holds a snapshot
    the build would wait for. A fresh schema built from ``schema.sql`` keeps plain
    ``CREATE INDEX`` (its tables are empty), and so does ``schema.sql`` itself.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from typing import Any

import psycopg
from psycopg.pq import TransactionStatus

from forklift._base.errors import ConfigError, SchemaOutdated
from forklift._db.connections import connection
from forklift._db.sqltext import check_schema, render

_FILE = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")
_INCLUDE = re.compile(r"^\\ir\s+(\S+)\s*$", re.M)
_WORKERS = re.compile(r"^--\s*workers:\s*(\d+)\s*$", re.M)
_CONCURRENTLY = re.compile(r"^--\s*concurrently\s*$")
_INDEX = re.compile(
    r"^\s*CREATE\s+(UNIQUE\s+)?INDEX\s+(?:IF\s+NOT\s+EXISTS\s+)?([a-z_][a-z0-9_]*)\s+ON\s+(.+?);?\s*$",
    re.I | re.S,
)
#: How often a migrator waiting for another one's concurrent index build asks again (seconds).
_BUILD_POLL = 0.2


@dataclass(frozen=True)
class ConcurrentIndex:
    """One ``-- concurrently`` index of a migration: built outside its transaction."""

    name: str
    unique: bool
    #: What follows ``ON``: the table, the method, the columns, a predicate.
    target: str

    def sql(self, *, concurrently: bool = True) -> str:
        """The statement to run (``concurrently=False``: the plain one, for a scratch copy)."""
        unique = "UNIQUE " if self.unique else ""
        if not concurrently:
            return f"CREATE {unique}INDEX {self.name} ON {self.target}"
        return f"CREATE {unique}INDEX CONCURRENTLY IF NOT EXISTS {self.name} ON {self.target}"


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    #: What runs in the migration's transaction (its ``-- concurrently`` statements taken out).
    text: str
    #: ``-- workers: N``: workers built for an older schema than this break once it is applied
    #: (None: every older worker keeps working).
    workers: int | None = None
    concurrent: tuple[ConcurrentIndex, ...] = ()


def _root(source: Traversable | None) -> Traversable:
    return source if source is not None else resources.files("forklift._db.schema")


def _expand(folder: str, text: str, source: Traversable | None = None) -> str:
    """Replace each ``\\ir path`` line by that file's text (paths relative to ``folder``)."""

    def include(m: re.Match[str]) -> str:
        parts = [p for p in f"{folder}/{m.group(1)}".split("/") if p not in ("", ".")]
        resolved: list[str] = []
        for part in parts:
            if part == "..":
                resolved.pop()
            else:
                resolved.append(part)
        entry = _root(source).joinpath(*resolved)
        return _expand("/".join(resolved[:-1]), entry.read_text("utf-8"), source)

    return _INCLUDE.sub(include, text)


def _split(label: str, text: str) -> tuple[str, tuple[ConcurrentIndex, ...]]:
    """The migration's transactional text, and the statements marked ``-- concurrently``."""
    kept: list[str] = []
    found: list[ConcurrentIndex] = []
    statement: list[str] | None = None
    for line in text.splitlines(keepends=True):
        if statement is not None:
            statement.append(line)
            if line.rstrip().endswith(";"):
                body = "".join(statement)
                m = _INDEX.match(body)
                if not m:
                    raise ConfigError(f"migration {label}: `-- concurrently` must precede a"
                                      f" CREATE INDEX statement, not {body.strip()[:60]!r}")
                found.append(ConcurrentIndex(m.group(2), bool(m.group(1)),
                                             " ".join(m.group(3).split())))
                statement = None
        elif _CONCURRENTLY.match(line.strip()):
            statement = []
        else:
            kept.append(line)
    if statement is not None:
        raise ConfigError(f"migration {label}: `-- concurrently` is not followed by a statement"
                          " ending in `;`")
    return "".join(kept), tuple(found)


def migrations(source: Traversable | None = None) -> list[Migration]:
    """The numbered migrations, in order: forklift's own, or those of a folder holding a
    ``migrations/`` directory laid out the same way (``source``)."""
    found = []
    for entry in _root(source).joinpath("migrations").iterdir():
        m = _FILE.match(entry.name)
        if m:
            raw = entry.read_text("utf-8")
            workers = _WORKERS.search(raw)
            text, concurrent = _split(entry.name, _expand("migrations", raw, source))
            found.append(Migration(int(m.group(1)), m.group(2), text,
                                   int(workers.group(1)) if workers else None, concurrent))
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
        for ix in m.concurrent:
            digest.update(f"\0{ix.sql()}".encode())
    return digest.hexdigest()


def required_version() -> int:
    return migrations()[-1].version


#: The runner's own record of what is applied (not in schema.sql: it exists before either).
#: A positive version is applied; its negative is a migration whose transaction committed
#: while its ``-- concurrently`` indexes are still to be built (not applied yet).
VERSION_TABLE = (
    "CREATE TABLE IF NOT EXISTS {s}.schema_version ("
    " version integer PRIMARY KEY, name text NOT NULL,"
    " applied_at timestamptz NOT NULL DEFAULT now())"
)
_RECORD = "INSERT INTO {s}.schema_version (version, name) VALUES (%s, %s) ON CONFLICT DO NOTHING"


def _lock_key(schema: str) -> str:
    return f"forklift.migrate:{schema}"


def _build_lock_key(schema: str) -> str:
    return f"forklift.migrate.concurrently:{schema}"


def current_version(conn: psycopg.Connection[Any], schema: str) -> int:
    row = conn.execute(
        "SELECT to_regclass(%s) IS NOT NULL", (f"{check_schema(schema)}.schema_version",)
    ).fetchone()
    if not row or not row[0]:
        return 0
    got = conn.execute(render("SELECT coalesce(max(version), 0) FROM {s}.schema_version", schema))
    value = got.fetchone()
    return int(value[0]) if value else 0


def _versions(conn: psycopg.Connection[Any], schema: str) -> set[int]:
    row = conn.execute(
        "SELECT to_regclass(%s) IS NOT NULL", (f"{check_schema(schema)}.schema_version",)
    ).fetchone()
    if not row or not row[0]:
        return set()
    rows = conn.execute(render("SELECT version FROM {s}.schema_version", schema)).fetchall()
    return {int(r[0]) for r in rows}


def applied_versions(conn: psycopg.Connection[Any], schema: str) -> set[int]:
    return {v for v in _versions(conn, schema) if v > 0}


def pending(conn: psycopg.Connection[Any], schema: str,
            found: Iterable[Migration] | None = None) -> list[Migration]:
    """Every migration not yet recorded, in order -- not only those above the highest applied:
    a branch that merged a later number first must not make an earlier one skipped."""
    have = applied_versions(conn, schema)
    return [m for m in (migrations() if found is None else found) if m.version not in have]


def building(conn: psycopg.Connection[Any], schema: str) -> list[int]:
    """Migrations whose transaction committed and whose concurrent indexes are not built yet."""
    return sorted(-v for v in _versions(conn, schema) if v < 0)


def apply(
    conn: psycopg.Connection[Any], schema: str, *, fresh_from_schema_file: bool = True,
    source: Traversable | None = None,
) -> list[Migration]:
    """Apply pending migrations; safe when several processes call it at once.

    A schema with no version yet is created from ``schema.sql`` in one step (every version is
    recorded as applied); ``fresh_from_schema_file=False`` replays the migrations instead (the
    test that keeps the two equal uses both). ``source``: another folder of migrations (laid
    out like forklift's, replayed; never a schema.sql). A migration with ``-- concurrently``
    indexes needs ``conn`` outside a transaction (see the module's docstring).
    """
    check_schema(schema)
    found = migrations(source)
    fresh = fresh_from_schema_file and source is None
    applied: list[Migration] = []
    while True:
        build: Migration | None = None
        with conn.transaction():
            # Serialise concurrent migrators; the loser sees the winner's work and applies nothing.
            conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                         (_lock_key(schema),))
            conn.execute(render("CREATE SCHEMA IF NOT EXISTS {s}", schema))
            conn.execute(render(VERSION_TABLE, schema))
            todo = pending(conn, schema, found)
            if not todo:
                return applied
            if fresh and not _versions(conn, schema):
                conn.execute(render(schema_text(), schema).encode())
                for m in todo:
                    conn.execute(render(_RECORD, schema), (m.version, m.name))
                return todo
            started = set(building(conn, schema))
            for m in todo:
                if m.version not in started:
                    conn.execute(render(m.text, schema).encode())
                if m.concurrent:
                    conn.execute(render(_RECORD, schema), (-m.version, m.name))
                    build = m
                    break
                conn.execute(render(_RECORD, schema), (m.version, m.name))
                applied.append(m)
        if build is None:
            return applied
        if _build(conn, schema, build):
            applied.append(build)


def _build(conn: psycopg.Connection[Any], schema: str, m: Migration) -> bool:
    """Build ``m``'s concurrent indexes, then record it applied; False when another migrator
    recorded it first."""
    if conn.info.transaction_status != TransactionStatus.IDLE:
        raise ConfigError(f"migration {m.version:04d}_{m.name} builds indexes concurrently: run"
                          " it on a connection outside a transaction")
    autocommit = conn.autocommit
    conn.autocommit = True
    key = _build_lock_key(schema)
    try:
        # Polled, not waited on: a blocked statement holds a snapshot, and the other
        # migrator's concurrent build waits for every older snapshot (a deadlock).
        while not _true(conn, "SELECT pg_try_advisory_lock(hashtextextended(%s, 0))", key):
            time.sleep(_BUILD_POLL)
        try:
            if m.version in applied_versions(conn, schema):
                return False
            for ix in m.concurrent:
                if _true(conn, "SELECT NOT i.indisvalid FROM pg_index i"
                               " JOIN pg_class c ON c.oid = i.indexrelid"
                               " JOIN pg_namespace n ON n.oid = c.relnamespace"
                               " WHERE n.nspname = %s AND c.relname = %s", schema, ix.name):
                    # Left by an interrupted build: IF NOT EXISTS would keep it, unusable.
                    conn.execute(render(f"DROP INDEX CONCURRENTLY IF EXISTS {{s}}.{ix.name}",
                                        schema).encode())
                conn.execute(render(ix.sql(), schema).encode())
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                             (_lock_key(schema),))
                conn.execute(render("DELETE FROM {s}.schema_version WHERE version = %s", schema),
                             (-m.version,))
                done = conn.execute(render(_RECORD, schema), (m.version, m.name))
                return done.rowcount == 1
        finally:
            conn.execute("SELECT pg_advisory_unlock(hashtextextended(%s, 0))", (key,))
    finally:
        conn.autocommit = autocommit


def _true(conn: psycopg.Connection[Any], sql: str, *params: Any) -> bool:
    row = conn.execute(sql.encode(), params).fetchone()
    return bool(row and row[0])


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
