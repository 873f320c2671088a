"""Debounce: one waiting job per kind and key, the last enqueue's payload, a start pushed back by
each enqueue but never past the first one's ``max_wait``.

One statement, safe under enqueues from many processes at once: an ``INSERT ... ON CONFLICT``
on the partial unique index of waiting, never attempted jobs with a debounce key (migration
0025). The first enqueue inserts the job, due ``wait`` from now; each later one, while that job
still waits, gives it its payload and pushes its start to ``wait`` from now, capped at the first
enqueue's ``max_wait``. Concurrent enqueues serialise on the index entry, so the last to commit
leaves its payload. A job leaves the index as it becomes due (the stager makes it available) or
starts, so an enqueue after that makes a new job, debounced in turn.
"""

from __future__ import annotations

from typing import Any

from forklift._base.debounce import Debounce
from forklift._db.sqltext import render
from forklift._db.steps import Query, Steps
from forklift._jobs.job import JOB_COLUMNS, Job
from forklift._jobs.row import Row, flag_weighted

__all__ = ["DEBOUNCE_SQL", "debounce_steps"]


# The row's columns as a timed insert sends them (Row.params order), with the debounce key and
# the cap (seconds from now) before its due time. The update keeps the job's id, queue, options
# and history; it takes the new payload (its version, the key values and tenant derived from it), and
# the later start, capped at debounce_until. xmax = 0 only for a row this statement inserted.
DEBOUNCE_SQL = (
    "INSERT INTO {s}.jobs AS j (queue, kind, args, state, priority, max_attempts, run_at,"
    " unique_key, tags, meta, retry, traceparent, keys, tenant, enqueued_by, expires_at,"
    " payload_version, weight, debounce_key, debounce_until)"
    " SELECT %s, %s, %s::jsonb, 'scheduled', %s, %s, t.r, %s, %s::text[], %s::jsonb, %s::jsonb,"
    " %s, %s::text[], %s, %s, %s::timestamptz, %s::int4, %s::int2, %s,"
    " now() + make_interval(secs => %s::float8)"
    " FROM (SELECT coalesce(%s::timestamptz, now() + make_interval(secs => %s::float8)) AS r) t"
    " ON CONFLICT (kind, debounce_key)"
    " WHERE debounce_key IS NOT NULL AND state = 'scheduled' AND attempted_at IS NULL"
    " DO UPDATE SET args = excluded.args, keys = excluded.keys,"
    " tenant = coalesce(excluded.tenant, j.tenant), expires_at = excluded.expires_at,"
    " payload_version = excluded.payload_version, weight = excluded.weight,"
    " run_at = least(excluded.run_at, j.debounce_until)"
    " RETURNING " + JOB_COLUMNS + ", j.xmax = 0"
)
# The weight the last enqueue gave a job it debounced flags its queue as an insert would.
DEBOUNCE_WEIGHTED_SQL = (
    "WITH d AS (" + DEBOUNCE_SQL + " AS fresh), f AS ("
    + flag_weighted("(SELECT * FROM d WHERE NOT d.fresh)") + ") SELECT * FROM d"
)


def debounce_steps(schema: str, row: Row, debounce: Debounce) -> Steps[Job]:
    """Store ``row`` debounced (its ``delay`` is the debounce's wait); returns the job, with
    ``replaced`` set when an enqueue before it made it."""
    params: tuple[Any, ...] = row.params()
    sql = DEBOUNCE_SQL if row.weight is None else DEBOUNCE_WEIGHTED_SQL
    got = yield Query(render(sql, schema),
                      (*params[:16], debounce.key, debounce.max_wait_seconds, *params[16:]),
                      "one")
    assert got is not None
    fresh = bool(got[-1])
    return Job.from_row(got[:-1], reused=not fresh, replaced=not fresh)
