"""The schema's version: what is applied, what is pending, and applying it.

    from forklift.ops.migrations import status, apply

    with connection(dsn, "migrate") as conn:
        s = status(conn, "forklift")          # MigrationStatus(current=3, required=4, ...)
        if s.pending:
            apply(conn, "forklift")

Applying is safe from several processes at once (an advisory lock serialises them; the loser
applies nothing), and each migration is one transaction (its ``-- concurrently`` indexes are
built after it commits; see :mod:`forklift._db.migrate`).

    for w in breaking(conn, "forklift"):   # live workers a pending migration would break
        print(w.host, w.pid, w.version, w.schema_built, w.broken_by)
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from typing import Any

import psycopg

from forklift._db import catalog
from forklift._db import migrate as _m
from forklift._db.sqltext import render
from forklift.ops.shape import Shape
from forklift.ops.workers import STALE_AFTER

__all__ = [
    "BrokenWorker", "Drift", "Migration", "MigrationStatus", "apply", "breaking", "drift",
    "label", "pending", "required_version", "status",
]

#: Objects a schema may hold besides schema.sql's: the optional partitioned history
#: (``forklift migrate --partitioned-history``) manages its own tables, indexes and triggers.
_OPTIONAL_PREFIXES = ("jobs_history",)

Migration = _m.Migration


@dataclass(frozen=True)
class MigrationStatus(Shape):
    schema: str
    #: The newest version applied (0: no forklift schema yet).
    current: int
    #: The version this forklift needs.
    required: int
    #: ``NNNN_name`` of each migration not applied yet, in order.
    pending: list[str] = field(default_factory=list)
    #: ``NNNN_name`` of each migration whose transaction committed while its concurrent indexes
    #: are not built yet (an interrupted run: ``forklift migrate`` finishes them).
    building: list[str] = field(default_factory=list)

    @property
    def up_to_date(self) -> bool:
        return not self.pending


def label(m: Migration) -> str:
    return f"{m.version:04d}_{m.name}"


def required_version() -> int:
    return _m.required_version()


def pending(conn: psycopg.Connection[Any], schema: str) -> list[Migration]:
    return _m.pending(conn, schema)


def status(conn: psycopg.Connection[Any], schema: str) -> MigrationStatus:
    todo = _m.pending(conn, schema)
    started = set(_m.building(conn, schema))
    return MigrationStatus(
        schema=schema,
        current=_m.current_version(conn, schema),
        required=_m.required_version(),
        pending=[label(m) for m in todo],
        building=[label(m) for m in todo if m.version in started],
    )


def apply(conn: psycopg.Connection[Any], schema: str) -> list[Migration]:
    """Apply what is pending; the migrations applied (none when up to date)."""
    return _m.apply(conn, schema)


#: What a worker row that records no schema was built for: the version before workers
#: recorded it.
_BEFORE_RECORDING = 18

_LIVE_SQL = """
SELECT id, host, pid, version, state, {built}, {oldest}
FROM {s}.workers
WHERE state IN ('running', 'draining') AND heartbeat_at > now() - make_interval(secs => %s)
ORDER BY host, pid, id
"""


@dataclass(frozen=True)
class BrokenWorker(Shape):
    """A live worker (fresh heartbeat, running or draining) that a pending migration breaks."""

    id: str
    host: str
    pid: int
    #: The forklift version it runs.
    version: str | None
    #: running or draining
    state: str
    #: The schema version it was built for (None: a worker from before version 19, which did
    #: not record it; taken as 18).
    schema_built: int | None
    #: The oldest schema it can work with (None: not recorded).
    schema_min: int | None
    #: The oldest worker the breaking migrations work with (the highest ``-- workers: N``).
    needs: int
    #: ``NNNN_name`` of each pending migration that breaks it.
    broken_by: list[str] = field(default_factory=list)


def breaking(conn: psycopg.Connection[Any], schema: str,
             todo: list[Migration] | None = None) -> list[BrokenWorker]:
    """The live workers that the pending migrations (or ``todo``) would break: those built for
    an older schema than a migration's ``-- workers: N`` header allows."""
    todo = _m.pending(conn, schema) if todo is None else todo
    strict = [m for m in todo if m.workers is not None]
    if not strict:
        return []
    row = conn.execute(
        "SELECT to_regclass(%s) IS NOT NULL,"
        " EXISTS (SELECT FROM pg_attribute WHERE attrelid = to_regclass(%s)"
        " AND attname = 'schema_built' AND NOT attisdropped)",
        (f"{schema}.workers", f"{schema}.workers"),
    ).fetchone()
    if not row or not row[0]:
        return []
    columns = ("schema_built", "schema_min") if row[1] else ("NULL::integer", "NULL::integer")
    sql = _LIVE_SQL.replace("{built}", columns[0]).replace("{oldest}", columns[1])
    out: list[BrokenWorker] = []
    for wid, host, pid, version, state, built, oldest in conn.execute(
        render(sql, schema).encode(), (STALE_AFTER,)
    ).fetchall():
        have = _BEFORE_RECORDING if built is None else int(built)
        by = [m for m in strict if m.workers is not None and have < m.workers]
        if by:
            out.append(BrokenWorker(
                id=wid, host=host, pid=pid, version=version, state=state, schema_built=built,
                schema_min=oldest, needs=max(m.workers or 0 for m in by),
                broken_by=[label(m) for m in by],
            ))
    return out


@dataclass(frozen=True)
class Drift(Shape):
    """A difference between the live schema and the one ``schema.sql`` builds."""

    #: tables, columns, constraints, indexes, functions, triggers or sequences
    part: str
    #: The object: a table, ``table.column``, an index, ``function(args)``, a trigger...
    name: str
    #: missing (schema.sql has it, the database does not), extra (the other way), altered,
    #: or invalid (an index a concurrent build left unusable: ``forklift migrate`` rebuilds
    #: one of its own)
    change: str
    #: The definition schema.sql gives, and the one the database holds (None where absent).
    expected: str | None = None
    found: str | None = None


def _key(part: str, row: tuple[Any, ...]) -> str:
    if part == "columns":
        return f"{row[0]}.{row[2]}"
    if part == "constraints":
        return f"{row[0]}.{row[1]}"
    if part == "functions":
        return f"{row[0]}({row[1]})"
    return str(row[0])


def _text(part: str, row: tuple[Any, ...]) -> str:
    if part == "columns":  # its position, type, not null, default, identity
        return " ".join(str(v) for v in row[3:])
    return " ".join(str(v) for v in row[1:])


def drift(conn: psycopg.Connection[Any], schema: str) -> list[Drift]:
    """What was changed by hand: the live schema against one built in a scratch schema, inside
    a transaction that is rolled back (nothing is left behind). Needs the right to CREATE a
    schema in the database (``forklift migrate`` has it). The scratch is built from
    ``schema.sql`` when nothing is pending; otherwise by replaying the migrations the live
    schema records (a pending migration is not drift)."""
    scratch = f"forklift_drift_{secrets.token_hex(4)}"
    todo = _m.pending(conn, schema)
    started = set(_m.building(conn, schema))
    applied = _m.applied_versions(conn, schema)
    # A build under way (or interrupted) is the migration's business, not drift.
    under_way = {ix.name for m in _m.migrations() if m.version in started for ix in m.concurrent}
    with conn.transaction(force_rollback=True):
        conn.execute(render("CREATE SCHEMA {s}", scratch))
        conn.execute(render(_m.VERSION_TABLE, scratch))
        if not todo:
            conn.execute(render(_m.schema_text(), scratch).encode())
        for m in _m.migrations() if todo else []:
            if m.version in applied or m.version in started:
                conn.execute(render(m.text, scratch).encode())
            for ix in m.concurrent if m.version in applied else ():
                conn.execute(render(ix.sql(concurrently=False), scratch).encode())
        expected = catalog.read(conn, scratch, rename={scratch: schema})
        found = catalog.read(conn, schema)
    invalid = conn.execute(
        "SELECT c.relname, pg_get_indexdef(c.oid) FROM pg_index i"
        " JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_namespace n ON n.oid = c.relnamespace"
        " WHERE n.nspname = %s AND NOT i.indisvalid ORDER BY 1", (schema,)).fetchall()
    out: list[Drift] = [Drift("indexes", name, "invalid", found=sql)
                        for name, sql in invalid if name not in under_way]
    for part in catalog.CATALOG:
        want = {_key(part, r): _text(part, r) for r in expected[part]}
        have = {_key(part, r): _text(part, r) for r in found[part]}
        for name in sorted(want.keys() | have.keys()):
            if name.startswith(_OPTIONAL_PREFIXES) or name in under_way:
                continue
            if name not in have:
                out.append(Drift(part, name, "missing", expected=want[name]))
            elif name not in want:
                out.append(Drift(part, name, "extra", found=have[name]))
            elif want[name] != have[name]:
                out.append(Drift(part, name, "altered", expected=want[name], found=have[name]))
    return out
