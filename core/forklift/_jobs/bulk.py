"""Many jobs in one transaction: ids taken first, then one COPY, or one INSERT per round when
unique keys are present; a step generator with a sync and an async driver."""

from __future__ import annotations

import operator
from datetime import datetime, timedelta
from typing import Any, Final

import psycopg

from forklift._base.errors import UniqueConflict
from forklift._db.sqltext import render
from forklift._db.steps import Copy, Query, Steps, drive, drive_async
from forklift._jobs.job import LIVE_STATES_SQL
from forklift._jobs.row import COPY_DEFAULTS, ON_KEY, UNIQUE_ROUNDS, Row, conflict

__all__ = ["BULK_EXISTING_SQL", "BULK_IDS_SQL", "BULK_UNIQUE_SQL", "insert_many",
           "insert_many_async", "many_steps"]

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
# Bulk with unique keys: ids are preallocated here too, so each row's id is known whatever
# order RETURNING uses; a row that conflicted is then looked up by its key.
BULK_UNIQUE_SQL = (
    "INSERT INTO {s}.jobs (id, queue, kind, args, state, priority, max_attempts, run_at,"
    " unique_key, tags, meta, retry, traceparent, keys, tenant, enqueued_by, expires_at,"
    " payload_version, weight)"
    " SELECT u.id, u.queue, u.kind, u.args,"
    " CASE WHEN u.run_at > now() THEN 'scheduled' ELSE 'available' END,"
    " u.priority, u.max_attempts, u.run_at, u.unique_key, string_to_array(u.tags, chr(31)),"
    " u.meta, u.retry, u.traceparent, string_to_array(u.keys, chr(30)), u.tenant, u.enqueued_by,"
    " u.expires_at, u.payload_version, u.weight"
    " FROM unnest(%s::int8[], %s::text[], %s::text[], %s::jsonb[],"
    " %s::int2[], %s::int4[], %s::timestamptz[], %s::text[], %s::text[], %s::jsonb[], %s::jsonb[],"
    " %s::text[], %s::text[], %s::text[], %s::text[], %s::timestamptz[], %s::int4[],"
    " %s::int2[]) AS u(id,"
    " queue, kind, args, priority, max_attempts, run_at, unique_key, tags, meta, retry,"
    " traceparent, keys, tenant, enqueued_by, expires_at, payload_version, weight)"
    + ON_KEY + " DO NOTHING RETURNING id"
)
BULK_EXISTING_SQL = (
    "SELECT j.id, j.kind, j.unique_key FROM {s}.jobs j"
    " JOIN unnest(%s::text[], %s::text[]) AS u(kind, unique_key)"
    " ON j.kind = u.kind AND j.unique_key = u.unique_key WHERE j.state IN " + LIVE_STATES_SQL
)


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
                 "tags": 9, "meta": 10, "retry": 11, "traceparent": 12, "keys": 13,
                 "tenant": 14, "enqueued_by": 15, "expires_at": 16, "payload_version": 17,
                 "weight": 18}
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
        row.tenant,
        row.enqueued_by,
        row.expires_at,
        row.payload_version,
        row.weight,
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
        return conflict(self.rows[self.todo[0]])


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
