"""Putting jobs into the table: one, many (one COPY), or inside the caller's transaction.

Workers are woken by a NOTIFY, which PostgreSQL delivers at commit: a job enqueued in a
transaction that rolls back wakes nobody and exists nowhere. The single job due now sends it
from its own INSERT (``jobs_wake_one``), every other insert through the insert trigger. This
module stores one job; the row it stores is :mod:`forklift._jobs.row`'s, many at once is
:mod:`forklift._jobs.bulk`'s (both importable from here).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Final

import psycopg

from forklift._db.sqltext import render
from forklift._db.steps import Query, Steps, drive, drive_async
from forklift._jobs.bulk import _bulk_ids as _bulk_ids
from forklift._jobs.bulk import insert_many, insert_many_async, many_steps
from forklift._jobs.job import JOB_COLUMNS, LIVE_STATES_SQL, Job
from forklift._jobs.row import (
    COPY_DEFAULTS,
    ON_CONFLICT,
    ON_KEY,
    UNIQUE_ROUNDS,
    OnConflict,
    Row,
    check_on_conflict,
    check_options,
    check_weight,
    conflict,
    flag_weighted,
)

__all__ = ["COPY_DEFAULTS", "ON_CONFLICT", "OnConflict", "Row", "check_on_conflict",
           "check_options", "check_weight", "insert_many", "insert_many_async", "insert_one",
           "insert_one_async", "many_steps", "one_steps"]

_INSERT = (
    "INSERT INTO {s}.jobs AS j (queue, kind, args, state, priority, max_attempts, run_at,"
    " unique_key, tags, meta, retry, traceparent, keys, tenant, enqueued_by, expires_at,"
    " payload_version, weight)"
    " SELECT %s, %s, %s::jsonb, CASE WHEN t.r > now() THEN 'scheduled' ELSE 'available' END,"
    " %s, %s, t.r, %s, %s::text[], %s::jsonb, %s::jsonb, %s, %s::text[], %s, %s,"
    " %s::timestamptz, %s::int4, %s::int2"
    " FROM (SELECT coalesce(%s::timestamptz, now() + make_interval(secs => %s::float8)) AS r) t"
)
# A fresh job without a unique key: the server decides only its id, state, run_at and
# created_at, so only those come back (the rest of the Job is what was sent); without a delay,
# state and run_at are the table's defaults. Reading back and parsing all of a row's columns
# cost more than a third of a single enqueue's time on the client.
_FRESH = " RETURNING id, state, run_at, created_at"
INSERT_TIMED_SQL = _INSERT + _FRESH
# Without a delay only the columns that differ from the table's defaults are sent (COPY_DEFAULTS,
# as the bulk path does): each parameter left out is one less for psycopg to adapt and
# for the server to parse, about a sixth of the client's time in a default enqueue.
_NOW_OPTIONAL: Final = ("priority", "max_attempts", "tags", "meta", "retry", "traceparent",
                         "tenant", "enqueued_by", "expires_at", "payload_version", "weight")
_NOW_CASTS: Final = {"tags": "::text[]", "meta": "::jsonb", "retry": "::jsonb",
                     "expires_at": "::timestamptz", "payload_version": "::int4",
                     "weight": "::int2"}
_now_sql: dict[tuple[str, ...], str] = {}


def insert_now_sql(extra: tuple[str, ...]) -> str:
    """The INSERT of a job due now that names ``extra`` besides queue, kind and args.

    Its queue goes through ``jobs_wake_one()`` (functions/jobs_wake_one_v1.sql): the one
    statement registers the queue and wakes its idle workers itself, and the insert trigger
    skips it (a transition table and a second PL/pgSQL call less a job).
    """
    sql = _now_sql.get(extra)
    if sql is None:
        columns = ", ".join(("queue", "kind", "args", *extra))
        values = ", ".join(("{s}.jobs_wake_one(%s)", "%s", "%s::jsonb",
                            *(f"%s{_NOW_CASTS.get(c, '')}" for c in extra)))
        sql = _now_sql[extra] = f"INSERT INTO {{s}}.jobs ({columns}) VALUES ({values})" + _FRESH
    return sql


#: The default enqueue's statement (queue, kind and args; everything else the table's default).
INSERT_NOW_SQL = insert_now_sql(())
# Each returns the job's columns and whether the row was inserted (xmax is 0 only for a row
# this statement created), or nothing when a live job holds the key and is left alone.
INSERT_UNIQUE_SQL = _INSERT + ON_KEY + " DO NOTHING RETURNING " + JOB_COLUMNS + ", true"
# replace: a live holder that is not running takes the new args, priority and run_at (and the
# state they imply) and the new start-by deadline (or none) in this one statement, and the new tenant when one is named (a kind that
# derives it from the payload keeps the two in step; enqueued_by stays the first enqueuer's);
# a running holder is left alone (the WHERE), and the caller is told so. The insert trigger
# wakes workers for inserted rows only, so a replaced job that becomes available is announced
# here.
REPLACE_UNIQUE_SQL = (
    "WITH r AS (" + _INSERT + ON_KEY + " DO UPDATE SET args = excluded.args,"
    " priority = excluded.priority, priority_base = NULL, run_at = excluded.run_at,"
    " state = excluded.state, keys = excluded.keys, tenant = coalesce(excluded.tenant, j.tenant),"
    " expires_at = excluded.expires_at, payload_version = excluded.payload_version,"
    " weight = excluded.weight"
    " WHERE j.state <> 'running' RETURNING " + JOB_COLUMNS + ", j.xmax = 0 AS fresh)"
    " SELECT r.* FROM r LEFT JOIN LATERAL (SELECT pg_notify({channel}, r.queue)"
    " WHERE NOT r.fresh AND r.state = 'available') n ON true"
)
# A replacement that gives the holder a weight flags its queue as an insert would.
REPLACE_WEIGHTED_SQL = REPLACE_UNIQUE_SQL.replace(
    " SELECT r.* FROM r", ", f AS (" + flag_weighted("(SELECT * FROM r WHERE NOT r.fresh)")
    + ") SELECT r.* FROM r", 1)
EXISTING_SQL = (
    "SELECT " + JOB_COLUMNS + " FROM {s}.jobs WHERE kind = %s AND unique_key = %s"
    " AND state IN " + LIVE_STATES_SQL
)


def _fresh_insert(row: Row) -> tuple[str, tuple[Any, ...]]:
    if row.at is None and not row.delay and row.keys is None:
        extra = tuple(c for c in _NOW_OPTIONAL if getattr(row, c) != COPY_DEFAULTS[c])
        if not extra:
            return INSERT_NOW_SQL, (row.queue, row.kind, row.args)
        return insert_now_sql(extra), (row.queue, row.kind, row.args,
                                       *(getattr(row, c) for c in extra))
    return INSERT_TIMED_SQL, row.params()


_JOB_DEFAULTS: Final[dict[str, Any]] = {
    f.name: f.default for f in dataclasses.fields(Job) if f.default is not dataclasses.MISSING
}
# Fields with a default factory that fresh_job does not set itself (none today: a new one is
# then filled here, not left missing).
_JOB_FACTORIES: Final = tuple(
    (f.name, f.default_factory) for f in dataclasses.fields(Job)
    if f.default_factory is not dataclasses.MISSING and f.name not in ("errors", "tags", "meta")
)


def fresh_job(got: tuple[Any, ...], row: Row, args: Any, meta: dict[str, Any]) -> Job:
    """The Job of a row just inserted (``got``: id, state, run_at, created_at).

    Filled in one ``__dict__`` update: the frozen dataclass's ``__init__`` sets its 26 fields
    one ``object.__setattr__`` at a time, as long as the enqueue's own Python besides.
    """
    job = object.__new__(Job)
    job.__dict__.update(_JOB_DEFAULTS)
    job.__dict__.update(
        id=got[0], queue=row.queue, kind=row.kind, args=args, state=got[1],
        priority=row.priority, attempt=0, max_attempts=row.max_attempts, run_at=got[2],
        created_at=got[3], errors=[], tags=list(row.tags), meta=meta, tenant=row.tenant,
        enqueued_by=row.enqueued_by, expires_at=row.expires_at,
        payload_version=row.payload_version, weight=row.weight,
    )
    for name, factory in _JOB_FACTORIES:
        job.__dict__[name] = factory()
    return job


def one_steps(schema: str, row: Row, on_conflict: OnConflict) -> Steps[Job]:
    """Store one job (sync and async drivers share this); returns it.

    With a unique key a live holder decides: ``return_existing`` returns it (``reused``),
    ``replace`` gives it the new args, priority and run_at unless it is running (``replaced``
    says which), ``raise`` refuses with UniqueConflict.
    """
    if row.unique_key is None:
        sql, params = _fresh_insert(row)
        # Parsed before the insert: a value that could not be read back must fail the call
        # before anything is stored, never after.
        args = json.loads(row.args)
        meta = {} if row.meta == "{}" else json.loads(row.meta)
        got = yield Query(render(sql, schema), params, "one")
        assert got is not None
        return fresh_job(got, row, args, meta)
    insert = INSERT_UNIQUE_SQL if on_conflict != "replace" else (
        REPLACE_UNIQUE_SQL if row.weight is None else REPLACE_WEIGHTED_SQL)
    for _ in range(UNIQUE_ROUNDS):
        got = yield Query(render(insert, schema), row.params(), "one")
        if got is not None:
            fresh = bool(got[-1])
            return Job.from_row(got[:-1], reused=not fresh, replaced=not fresh)
        if on_conflict == "raise":
            raise conflict(row)
        existing = yield Query(render(EXISTING_SQL, schema), (row.kind, row.unique_key), "one")
        if existing is not None:
            return Job.from_row(existing, reused=True)
    raise conflict(row)


def insert_one(conn: psycopg.Connection[Any], schema: str, row: Row,
               on_conflict: OnConflict = "return_existing") -> Job:
    return drive(conn, one_steps(schema, row, on_conflict))


async def insert_one_async(conn: psycopg.AsyncConnection[Any], schema: str, row: Row,
                           on_conflict: OnConflict = "return_existing") -> Job:
    return await drive_async(conn, one_steps(schema, row, on_conflict))


GET_SQL = "SELECT " + JOB_COLUMNS + " FROM {s}.jobs WHERE id = %s"


def get_steps(schema: str, job_id: int) -> Steps[Job | None]:
    """Read one job back by id."""
    row = yield Query(render(GET_SQL, schema), (job_id,), "one")
    return Job.from_row(row) if row else None
