"""Putting jobs into the table: one, many (one COPY), or inside the caller's transaction.

Workers are woken by the insert trigger's NOTIFY, which PostgreSQL delivers at commit: a job
enqueued in a transaction that rolls back wakes nobody and exists nowhere.
"""

from __future__ import annotations

import dataclasses
import json
import operator
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final, Literal

import psycopg

from forklift._errors import InvalidOption, UniqueConflict
from forklift._job import JOB_COLUMNS, LIVE_STATES_SQL, Job
from forklift._names import check_name
from forklift._sqltext import render
from forklift._steps import Copy, Query, Steps, drive, drive_async

__all__ = ["ON_CONFLICT", "OnConflict", "Row", "insert_many", "insert_many_async", "insert_one",
           "insert_one_async", "many_steps", "one_steps"]

OnConflict = Literal["return_existing", "replace", "raise"]
ON_CONFLICT: Final[tuple[OnConflict, ...]] = ("return_existing", "replace", "raise")

_INSERT = (
    "INSERT INTO {s}.jobs AS j (queue, kind, args, state, priority, max_attempts, run_at,"
    " unique_key, tags, meta, retry, traceparent, keys)"
    " SELECT %s, %s, %s::jsonb, CASE WHEN t.r > now() THEN 'scheduled' ELSE 'available' END,"
    " %s, %s, t.r, %s, %s::text[], %s::jsonb, %s::jsonb, %s, %s::text[]"
    " FROM (SELECT coalesce(%s::timestamptz, now() + make_interval(secs => %s::float8)) AS r) t"
)
# A fresh job without a unique key: the server decides only its id, state, run_at and
# created_at, so only those come back (the rest of the Job is what was sent); without a delay,
# state and run_at are the table's defaults. Reading back and parsing all of a row's columns
# cost more than a third of a single enqueue's time on the client.
_FRESH = " RETURNING id, state, run_at, created_at"
INSERT_TIMED_SQL = _INSERT + _FRESH
# Without a delay only the columns that differ from the table's defaults are sent (COPY_DEFAULTS
# below, as the bulk path does): each parameter left out is one less for psycopg to adapt and
# for the server to parse, about a sixth of the client's time in a default enqueue.
_NOW_OPTIONAL: Final = ("priority", "max_attempts", "tags", "meta", "retry", "traceparent")
_NOW_CASTS: Final = {"tags": "::text[]", "meta": "::jsonb", "retry": "::jsonb"}
_now_sql: dict[tuple[str, ...], str] = {}


def insert_now_sql(extra: tuple[str, ...]) -> str:
    """The INSERT of a job due now that names ``extra`` besides queue, kind and args."""
    sql = _now_sql.get(extra)
    if sql is None:
        columns = ", ".join(("queue", "kind", "args", *extra))
        values = ", ".join(("%s", "%s", "%s::jsonb", *(f"%s{_NOW_CASTS.get(c, '')}" for c in extra)))
        sql = _now_sql[extra] = f"INSERT INTO {{s}}.jobs ({columns}) VALUES ({values})" + _FRESH
    return sql


#: The default enqueue's statement (queue, kind and args; everything else the table's default).
INSERT_NOW_SQL = insert_now_sql(())
_ON_KEY = (
    " ON CONFLICT (kind, unique_key) WHERE unique_key IS NOT NULL AND state IN " + LIVE_STATES_SQL
)
# Each returns the job's columns and whether the row was inserted (xmax is 0 only for a row
# this statement created), or nothing when a live job holds the key and is left alone.
INSERT_UNIQUE_SQL = _INSERT + _ON_KEY + " DO NOTHING RETURNING " + JOB_COLUMNS + ", true"
# replace: a live holder that is not running takes the new args, priority and run_at (and the
# state they imply) in this one statement; a running holder is left alone (the WHERE), and the
# caller is told so. The insert trigger wakes workers for inserted rows only, so a replaced job
# that becomes available is announced here.
REPLACE_UNIQUE_SQL = (
    "WITH r AS (" + _INSERT + _ON_KEY + " DO UPDATE SET args = excluded.args,"
    " priority = excluded.priority, run_at = excluded.run_at, state = excluded.state,"
    " keys = excluded.keys"
    " WHERE j.state <> 'running' RETURNING " + JOB_COLUMNS + ", j.xmax = 0 AS fresh)"
    " SELECT r.* FROM r LEFT JOIN LATERAL (SELECT pg_notify({channel}, r.queue)"
    " WHERE NOT r.fresh AND r.state = 'available') n ON true"
)
EXISTING_SQL = (
    "SELECT " + JOB_COLUMNS + " FROM {s}.jobs WHERE kind = %s AND unique_key = %s"
    " AND state IN " + LIVE_STATES_SQL
)

# Bulk: ids are taken from the identity sequence first so COPY, the fastest way in, can still
# report them; the insert trigger fires once for the whole COPY. The ids come back as a range
# (first, last) when they are consecutive, as they are unless another session takes ids at the
# same moment, and only then as an array: 10,000 rows of one id each cost more than the COPY.
# The same round trip reads the server's clock, which decides state and run_at of timed rows
# exactly as a single enqueue's now() does (it is this transaction's now()).
# The sequence is looked up once (the scalar subquery is an InitPlan): nextval() of the text
# pg_get_serial_sequence() returns cast that text to a regclass for every row, a catalog
# lookup each, which cost 3.4 us a row on the server, more than the COPY's own work.
BULK_IDS_SQL = (
    "SELECT min(v), max(v), CASE WHEN max(v) - min(v) + 1 = count(*) THEN NULL"
    " ELSE array_agg(v ORDER BY v) END, now()"
    " FROM (SELECT nextval((SELECT pg_get_serial_sequence('{s}.jobs', 'id')::regclass)) AS v"
    " FROM generate_series(1, %s)) AS ids"
)
# A COPY sends only the columns some row needs: the rest take the table's defaults
# (0001_jobs.sql; a test keeps these in step). Each column left out saves about a microsecond
# a row on the client and again on the server.
COPY_DEFAULTS: dict[str, Any] = {
    "priority": 0, "max_attempts": 20, "unique_key": None, "tags": [], "meta": "{}", "retry": None,
    "traceparent": None,  # untraced (no tracer provider): never sent
    "keys": None,  # a kind without keys (forklift._flow.keys)
}
# Bulk with unique keys: ids are preallocated here too, so each row's id is known whatever
# order RETURNING uses; a row that conflicted is then looked up by its key.
BULK_UNIQUE_SQL = (
    "INSERT INTO {s}.jobs (id, queue, kind, args, state, priority, max_attempts, run_at,"
    " unique_key, tags, meta, retry, traceparent, keys)"
    " SELECT u.id, u.queue, u.kind, u.args,"
    " CASE WHEN u.run_at > now() THEN 'scheduled' ELSE 'available' END,"
    " u.priority, u.max_attempts, u.run_at, u.unique_key, string_to_array(u.tags, chr(31)),"
    " u.meta, u.retry, u.traceparent, string_to_array(u.keys, chr(30))"
    " FROM unnest(%s::int8[], %s::text[], %s::text[], %s::jsonb[],"
    " %s::int2[], %s::int4[], %s::timestamptz[], %s::text[], %s::text[], %s::jsonb[], %s::jsonb[],"
    " %s::text[], %s::text[]) AS u(id, queue, kind, args, priority, max_attempts, run_at,"
    " unique_key, tags, meta, retry, traceparent, keys)"
    + _ON_KEY + " DO NOTHING RETURNING id"
)
BULK_EXISTING_SQL = (
    "SELECT j.id, j.kind, j.unique_key FROM {s}.jobs j"
    " JOIN unnest(%s::text[], %s::text[]) AS u(kind, unique_key)"
    " ON j.kind = u.kind AND j.unique_key = u.unique_key WHERE j.state IN " + LIVE_STATES_SQL
)
#: A live holder can finish between our insert and our read of it: try again, this often.
UNIQUE_ROUNDS: Final = 5


@dataclass(frozen=True)
class Row:
    """One job ready to insert: validated, serialised, with its options resolved.

    ``__init__`` fills the fields in one ``__dict__`` update (see :meth:`many`); the generated
    one set them one ``object.__setattr__`` at a time, a tenth of a single enqueue's Python.
    """

    queue: str
    kind: str
    args: str
    priority: int
    max_attempts: int
    at: datetime | None
    delay: float
    unique_key: str | None
    tags: list[str]
    meta: str
    retry: str | None
    traceparent: str | None = None  # the enqueue's producer span (forklift.otel), if traced
    #: Key values (forklift._flow.keys), computed from the payload; None for unkeyed kinds.
    keys: list[str] | None = None

    def __init__(self, queue: str, kind: str, args: str, priority: int, max_attempts: int,
                 at: datetime | None, delay: float, unique_key: str | None, tags: list[str],
                 meta: str, retry: str | None, traceparent: str | None = None,
                 keys: list[str] | None = None) -> None:
        self.__dict__.update(
            queue=queue, kind=kind, args=args, priority=priority, max_attempts=max_attempts,
            at=at, delay=delay, unique_key=unique_key, tags=tags, meta=meta, retry=retry,
            traceparent=traceparent, keys=keys)

    @classmethod
    def many(cls, fields: dict[str, Any], payloads: Iterable[str]) -> list[Row]:
        """Rows that differ only in their payload (``fields``: every other field, checked).

        Built without ``__init__``: a frozen dataclass sets each of its eleven fields through
        ``object.__setattr__``, which cost as much as validating and serialising the payload.
        """
        base = {**fields, "args": ""}
        out = []
        for text in payloads:
            row = object.__new__(cls)
            row.__dict__.update(base)
            row.__dict__["args"] = text
            out.append(row)
        return out

    @classmethod
    def many_keyed(cls, fields: dict[str, Any], items: Iterable[tuple[str, list[str]]]
                   ) -> list[Row]:
        """:meth:`many` for a keyed kind: each row's (payload, key values)."""
        base = {**fields, "args": "", "keys": None}
        out = []
        for text, keys in items:
            row = object.__new__(cls)
            row.__dict__.update(base)
            row.__dict__["args"] = text
            row.__dict__["keys"] = keys
            out.append(row)
        return out

    def params(self) -> tuple[Any, ...]:
        return (
            self.queue,
            self.kind,
            self.args,
            self.priority,
            self.max_attempts,
            self.unique_key,
            self.tags,
            self.meta,
            self.retry,
            self.traceparent,
            self.keys,
            self.at,
            self.delay,
        )


def check_options(
    *, priority: int, max_attempts: int, delay: float | None, at: datetime | None, queue: str
) -> None:
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise InvalidOption(f"priority must be an integer, not {priority!r}", field="priority")
    if not -32768 <= priority <= 32767:
        raise InvalidOption(f"priority {priority} is out of range (-32768..32767)", field="priority")
    if isinstance(max_attempts, bool) or not isinstance(max_attempts, int):
        raise InvalidOption(f"max_attempts must be an integer, not {max_attempts!r}",
                            field="max_attempts")
    if not 1 <= max_attempts <= 2**31 - 1:
        raise InvalidOption(f"max_attempts must be at least 1, not {max_attempts}", field="max_attempts")
    if delay is not None and at is not None:
        raise InvalidOption("give delay or at, not both", field="delay")
    if delay is not None and not delay >= 0:  # NaN too
        raise InvalidOption(f"delay must not be negative, not {delay}", field="delay")
    check_name(queue, "queue")


def check_on_conflict(value: object) -> OnConflict:
    if value not in ON_CONFLICT:
        raise InvalidOption(
            f"on_conflict must be one of {', '.join(ON_CONFLICT)}, not {value!r}",
            field="on_conflict",
        )
    return value


def _conflict(row: Row) -> UniqueConflict:
    return UniqueConflict(
        f"a live {row.kind} job already holds unique key {row.unique_key!r}",
        kind=row.kind,
        unique_key=row.unique_key,
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
        created_at=got[3], errors=[], tags=list(row.tags), meta=meta,
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
    insert = REPLACE_UNIQUE_SQL if on_conflict == "replace" else INSERT_UNIQUE_SQL
    for _ in range(UNIQUE_ROUNDS):
        got = yield Query(render(insert, schema), row.params(), "one")
        if got is not None:
            fresh = bool(got[-1])
            return Job.from_row(got[:-1], reused=not fresh, replaced=not fresh)
        if on_conflict == "raise":
            raise _conflict(row)
        existing = yield Query(render(EXISTING_SQL, schema), (row.kind, row.unique_key), "one")
        if existing is not None:
            return Job.from_row(existing, reused=True)
    raise _conflict(row)


def insert_one(conn: psycopg.Connection[Any], schema: str, row: Row,
               on_conflict: OnConflict = "return_existing") -> Job:
    return drive(conn, one_steps(schema, row, on_conflict))


async def insert_one_async(conn: psycopg.AsyncConnection[Any], schema: str, row: Row,
                           on_conflict: OnConflict = "return_existing") -> Job:
    return await drive_async(conn, one_steps(schema, row, on_conflict))


def _bulk_ids(got: tuple[Any, ...] | None, n: int) -> list[int]:
    assert got is not None
    first, last, scattered = got
    ids = list(range(int(first), int(last) + 1)) if scattered is None else [int(i) for i in scattered]
    assert len(ids) == n
    return ids


_OPTIONAL_OF = operator.attrgetter(*COPY_DEFAULTS)
_DEFAULTS_ROW: Final = tuple(COPY_DEFAULTS.values())
_WHEN_OF = operator.attrgetter("at", "delay")


def _copy_plan(rows: list[Row]) -> tuple[str, list[str]]:
    """The COPY statement's column list and the optional columns some row needs."""
    # One C-level pass over the rows for each question (map, not a generator: a Python frame
    # per row and column cost 0.7 us a row); the per-column pass only when some row differs.
    timed = any(map((None, 0.0).__ne__, map(_WHEN_OF, rows)))
    extra: list[str] = []
    if any(map(_DEFAULTS_ROW.__ne__, map(_OPTIONAL_OF, rows))):
        extra = [c for c, default in COPY_DEFAULTS.items()
                 if any(getattr(r, c) != default for r in rows)]
    if timed:
        extra += ["state", "run_at"]
    columns = ", ".join(["id", "queue", "kind", "args", *extra])
    return "COPY {s}.jobs (" + columns + ") FROM STDIN", extra


def _copy_rows(ids: list[int], rows: list[Row], extra: list[str], now: datetime) -> Any:
    if not extra:
        return ((i, r.queue, r.kind, r.args) for i, r in zip(ids, rows, strict=True))
    positions = {"state": 4, "priority": 5, "max_attempts": 6, "run_at": 7, "unique_key": 8,
                 "tags": 9, "meta": 10, "retry": 11, "traceparent": 12, "keys": 13}
    picks = [positions[c] for c in extra]

    def record(job_id: int, row: Row) -> tuple[Any, ...]:
        full = _copy_record(job_id, row, now)
        return (*full[:4], *(full[k] for k in picks))

    return (record(i, r) for i, r in zip(ids, rows, strict=True))


def _copy_record(job_id: int, row: Row, now: datetime) -> tuple[Any, ...]:
    run_at = row.at if row.at is not None else now
    if row.at is None and row.delay:
        run_at = now + timedelta(seconds=row.delay)
    state = "scheduled" if run_at > now else "available"
    return (
        job_id,
        row.queue,
        row.kind,
        row.args,
        state,
        row.priority,
        row.max_attempts,
        run_at,
        row.unique_key,
        row.tags,
        row.meta,
        row.retry,
        row.traceparent,
        row.keys,
    )


class _UniqueBulk:
    """The bookkeeping of a bulk insert with unique keys, apart from the I/O (sync and async
    drivers share it). Each round inserts the rows not yet resolved; a row refused by a live
    key takes that job's id; a key whose holder finished between insert and lookup is tried
    again next round."""

    ROUNDS = UNIQUE_ROUNDS

    def __init__(self, rows: list[Row], ids: list[int], now: datetime) -> None:
        self.rows = rows
        self.now = now
        self.ids = ids  # preallocated; replaced by the holder's id where a key was taken
        self.todo = list(range(len(rows)))

    def insert_params(self) -> tuple[Any, ...]:
        recs = [_copy_record(self.ids[k], self.rows[k], self.now) for k in self.todo]
        columns = list(zip(*recs, strict=True))
        columns[9] = tuple("\x1f".join(tags) for tags in columns[9])
        columns[13] = tuple(None if keys is None else "\x1e".join(keys) for keys in columns[13])
        return tuple(list(c) for c in columns[:4] + columns[5:])  # every column but state

    def inserted(self, got: list[tuple[Any, ...]]) -> None:
        taken = {int(r[0]) for r in got}
        self.todo = [k for k in self.todo if self.ids[k] not in taken]

    def lookup_params(self) -> tuple[list[str], list[str | None]]:
        return [self.rows[k].kind for k in self.todo], [self.rows[k].unique_key for k in self.todo]

    def found(self, got: list[tuple[Any, ...]]) -> None:
        holders = {(str(kind), str(key)): int(job_id) for job_id, kind, key in got}
        left = []
        for k in self.todo:
            holder = holders.get((self.rows[k].kind, str(self.rows[k].unique_key)))
            if holder is None:
                left.append(k)
            else:
                self.ids[k] = holder
        self.todo = left

    def conflict(self) -> UniqueConflict:
        return _conflict(self.rows[self.todo[0]])


def many_steps(schema: str, rows: list[Row]) -> Steps[list[int]]:
    """Store rows in one transaction (one COPY, or one INSERT when unique keys are present);
    run with ``tx="atomic"``.

    Returns the job ids in order; for a row whose unique key a live job already held, that
    job's id.
    """
    if not rows:
        return []
    got = yield Query(render(BULK_IDS_SQL, schema), (len(rows),), "one")
    assert got is not None
    ids, now = _bulk_ids(got[:3], len(rows)), got[3]
    if any(r.unique_key is not None for r in rows):
        bulk = _UniqueBulk(rows, ids, now)
        for _ in range(bulk.ROUNDS):
            bulk.inserted((yield Query(render(BULK_UNIQUE_SQL, schema), bulk.insert_params(),
                                       "all")))
            if not bulk.todo:
                return bulk.ids
            bulk.found((yield Query(render(BULK_EXISTING_SQL, schema), bulk.lookup_params(),
                                    "all")))
            if not bulk.todo:
                return bulk.ids
        raise bulk.conflict()
    statement, extra = _copy_plan(rows)
    yield Copy(render(statement, schema), _copy_rows(ids, rows, extra, now))
    return ids


def insert_many(conn: psycopg.Connection[Any], schema: str, rows: list[Row]) -> list[int]:
    return drive(conn, many_steps(schema, rows), "atomic") if rows else []


async def insert_many_async(
    conn: psycopg.AsyncConnection[Any], schema: str, rows: list[Row]
) -> list[int]:
    return await drive_async(conn, many_steps(schema, rows), "atomic") if rows else []


GET_SQL = "SELECT " + JOB_COLUMNS + " FROM {s}.jobs WHERE id = %s"


def get_steps(schema: str, job_id: int) -> Steps[Job | None]:
    """Read one job back by id."""
    row = yield Query(render(GET_SQL, schema), (job_id,), "one")
    return Job.from_row(row) if row else None
