"""Partitioned history (optional per installation: ``forklift migrate --partitioned-history``).

Finished jobs move from ``{s}.jobs`` into ``{s}.jobs_history``, partitioned by state (LIST)
and then by day of ``finished_at`` (RANGE), so retention drops a day's partition instead of
deleting its rows one by one, and the live table stays small. The leader's history service
(``forklift._worker.maintenance.history``) keeps it: partitions created days ahead, finished
jobs moved over in batches (one statement each: DELETE ... RETURNING feeding an INSERT, so a
crash leaves every job in exactly one of the two tables), expired partitions dropped, all DDL
under a short ``lock_timeout``. Jobs finished before history was switched on stay in the jobs
table until its ordinary retention removes them.

Reads see both tables through :func:`source` (one relation: the jobs table, or the union of
both); a requeue or delete of a job in history moves it back first (:func:`restore`). An
installation without history pays nothing: :func:`partitioned` is one catalog look-up per
connection, and the relation is then the jobs table itself.
"""

from __future__ import annotations

import re
import weakref
from collections.abc import Generator
from datetime import UTC, date, datetime, timedelta
from typing import Any

import psycopg
from psycopg import sql

from forklift._db.sqltext import render
from forklift._features.retention import DEFAULTS

STATES = ("completed", "cancelled", "dead")
#: Days of partitions kept ready ahead of today.
AHEAD_DAYS = 3
#: A finished job moves once it is this old (its batch bookkeeping and callbacks are done).
MOVE_AFTER = 10.0
MOVE_BATCH = 5000
#: DDL waits at most this long for its lock, then gives up until the next pass.
LOCK_TIMEOUT_MS = 2000
#: Settings (forklift.settings): when history was switched on (epoch seconds; jobs finished
#: before stay in the jobs table), and how old a finished job must be to move (seconds).
SINCE_SETTING = "history.partitioned_since"
MOVE_AFTER_SETTING = "history.move_after"

# Dead jobs in history stay in the dead-letter groups (forklift.ops.dead): the same triggers as
# on the jobs table (migration 0008), so a move into history keeps the job in its group and a
# delete from history takes it out.
DEAD_LETTERS_SQL = """
CREATE OR REPLACE TRIGGER jobs_history_dead_in AFTER INSERT ON {s}.jobs_history
    FOR EACH ROW WHEN (NEW.state = 'dead') EXECUTE FUNCTION {s}.jobs_dead_moved();
CREATE OR REPLACE TRIGGER jobs_history_dead_out AFTER DELETE ON {s}.jobs_history
    FOR EACH ROW WHEN (OLD.state = 'dead') EXECUTE FUNCTION {s}.jobs_dead_moved();
"""

ENABLE_SQL = """
CREATE TABLE IF NOT EXISTS {s}.jobs_history (LIKE {s}.jobs INCLUDING DEFAULTS)
    PARTITION BY LIST (state);
CREATE INDEX IF NOT EXISTS jobs_history_id_idx ON {s}.jobs_history (id);
CREATE INDEX IF NOT EXISTS jobs_history_window_idx ON {s}.jobs_history (finished_at)
    INCLUDE (queue, state, attempted_at);
CREATE INDEX IF NOT EXISTS jobs_history_queue_idx ON {s}.jobs_history (queue, finished_at);
CREATE INDEX IF NOT EXISTS jobs_history_batch_idx ON {s}.jobs_history (batch_id, batch_index)
    WHERE batch_id IS NOT NULL;
-- the operators' tenant filter, as jobs_tenant_idx on the jobs table (an installation that
-- enabled history before it gets it from `forklift migrate --partitioned-history` again)
CREATE INDEX IF NOT EXISTS jobs_history_tenant_idx ON {s}.jobs_history (tenant, id)
    WHERE tenant IS NOT NULL;
CREATE TABLE IF NOT EXISTS {s}.jobs_history_completed PARTITION OF {s}.jobs_history
    FOR VALUES IN ('completed') PARTITION BY RANGE (finished_at);
CREATE TABLE IF NOT EXISTS {s}.jobs_history_cancelled PARTITION OF {s}.jobs_history
    FOR VALUES IN ('cancelled') PARTITION BY RANGE (finished_at);
CREATE TABLE IF NOT EXISTS {s}.jobs_history_dead PARTITION OF {s}.jobs_history
    FOR VALUES IN ('dead') PARTITION BY RANGE (finished_at);
INSERT INTO {s}.settings (name, value, updated_by)
VALUES ('history.partitioned_since', extract(epoch FROM now()), 'forklift migrate')
ON CONFLICT (name) DO NOTHING;
""" + DEAD_LETTERS_SQL

EXISTS_SQL = "SELECT to_regclass(%s) IS NOT NULL"

# The day partitions there are: (state, day).
PARTITIONS_SQL = """
SELECT p.relname::text, c.relname::text
FROM pg_inherits i
JOIN pg_class c ON c.oid = i.inhrelid
JOIN pg_class p ON p.oid = i.inhparent
JOIN pg_namespace n ON n.oid = p.relnamespace
WHERE n.nspname = %s AND p.relname IN ('jobs_history_completed', 'jobs_history_cancelled',
                                        'jobs_history_dead')
"""

CREATE_SQL = """
CREATE TABLE IF NOT EXISTS {s}.{name} PARTITION OF {s}.jobs_history_{state}
    FOR VALUES FROM ('{day} 00:00:00+00') TO ('{next} 00:00:00+00')
"""
DROP_SQL = "DROP TABLE IF EXISTS {s}.{name}"
# Dropping rows fires no trigger: a dead partition's jobs leave their dead-letter groups first,
# in the same transaction.
DROP_DEAD_SQL = """
DELETE FROM {s}.dead_letters d USING {s}.{name} p WHERE d.job_id = p.id;
DROP TABLE IF EXISTS {s}.{name}
"""

# Finished jobs into history, oldest first, within the days that have partitions for every
# state (%(until)s); one statement, so a job is in exactly one table whatever happens.
MOVE_SQL = """
WITH picked AS (
    SELECT id FROM {s}.jobs j
    WHERE finished_at IS NOT NULL AND finished_at >= to_timestamp(%(since)s)
      AND finished_at < now() - make_interval(secs => %(after)s)
      AND finished_at >= %(from)s::timestamptz AND finished_at < %(until)s::timestamptz
      AND (batch_id IS NULL OR NOT EXISTS (  -- a batch's targets stay while it lives
          SELECT 1 FROM {s}.batches b WHERE b.id = j.batch_id AND b.expires_at > now()))
    ORDER BY finished_at LIMIT %(n)s
    FOR UPDATE SKIP LOCKED
), moved AS (
    DELETE FROM {s}.jobs t USING picked WHERE t.id = picked.id
      AND t.state IN ('completed', 'cancelled', 'dead')
    RETURNING t.*
)
INSERT INTO {s}.jobs_history SELECT * FROM moved
"""

RESTORE_SQL = """
WITH back AS (DELETE FROM {s}.jobs_history WHERE id = ANY(%s::bigint[]) RETURNING *)
INSERT INTO {s}.jobs SELECT * FROM back
"""

SETTINGS_SQL = "SELECT name, value FROM {s}.settings WHERE name LIKE 'history.%%'"

# Columns of the jobs table that history lacks (a migration added them after history was
# switched on): added in the same order, so both tables stay one relation for reads.
MISSING_COLUMNS_SQL = """
SELECT a.attname::text, format_type(a.atttypid, a.atttypmod)
FROM pg_attribute a
WHERE a.attrelid = to_regclass(%(jobs)s) AND a.attnum > 0 AND NOT a.attisdropped
  AND NOT EXISTS (SELECT 1 FROM pg_attribute h WHERE h.attrelid = to_regclass(%(history)s)
                  AND h.attname = a.attname AND NOT h.attisdropped)
ORDER BY a.attnum
"""
ADD_COLUMN_SQL = "ALTER TABLE {s}.jobs_history ADD COLUMN IF NOT EXISTS {column} {type}"

_NAME = re.compile(r"^jobs_history_(completed|cancelled|dead)_(\d{8})$")
_JOBS = re.compile(r"\{s\}\.jobs(?![A-Za-z0-9_])(?=\s+(?:AS\s+)?([A-Za-z_]\w*)|)")
# Words that may follow a table in FROM without being its alias.
_NOT_ALIAS = frozenset({
    "where", "group", "order", "limit", "offset", "fetch", "join", "left", "right", "inner",
    "full", "cross", "natural", "on", "using", "union", "except", "intersect", "for", "window",
    "having",
})

_known: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()


def partition_name(state: str, day: date) -> str:
    return f"jobs_history_{state}_{day:%Y%m%d}"


def enable(conn: psycopg.Connection[Any], schema: str) -> bool:
    """Create the history tables (idempotent); True when they were not there before."""
    with conn.transaction():
        existed = bool(conn.execute(EXISTS_SQL, (f"{schema}.jobs_history",)).fetchone()[0])  # type: ignore[index]
        conn.execute(render(ENABLE_SQL, schema).encode())
        for step in upkeep_ddl(schema, set(), datetime.now(UTC).date(), {}):
            conn.execute(step.encode())
    _known.pop(conn, None)
    return not existed


def partitioned(conn: psycopg.Connection[Any], schema: str) -> bool:
    """Whether this installation keeps partitioned history (cached per connection)."""
    known = _known.get(conn)
    if known is None:
        row = conn.execute(EXISTS_SQL, (f"{schema}.jobs_history",)).fetchone()
        known = bool(row and row[0])
        _known[conn] = known
    return known


def source(schema: str, partitioned: bool) -> str:
    """The relation job reads come from: the jobs table, or both tables as one."""
    if not partitioned:
        return "{s}.jobs"
    return "(SELECT * FROM {s}.jobs UNION ALL SELECT * FROM {s}.jobs_history)"


def render_read(text: str, conn: psycopg.Connection[Any], schema: str) -> str:
    """``render(text, schema)`` for a read: every ``{s}.jobs`` reads :func:`source`."""
    if partitioned(conn, schema):
        def union(m: re.Match[str]) -> str:
            # A subquery needs an alias before PostgreSQL 16: keep the query's, or name it jobs.
            aliased = m.group(1) is not None and m.group(1).lower() not in _NOT_ALIAS
            return source(schema, True) + ("" if aliased else " AS jobs")

        text = _JOBS.sub(union, text)
    return render(text, schema)


def restore(conn: psycopg.Connection[Any], schema: str, ids: list[int]) -> int:
    """Move these jobs back from history into the jobs table (before a requeue or delete,
    in its transaction); a no-op without history."""
    if not ids or not partitioned(conn, schema):
        return 0
    return max(conn.execute(render(RESTORE_SQL, schema), (ids,)).rowcount, 0)


# -- upkeep -------------------------------------------------------------------------------------
def days(names: list[tuple[str, str]]) -> set[tuple[str, date]]:
    found = set()
    for _parent, name in names:
        m = _NAME.match(name)
        if m:
            d = m.group(2)
            found.add((m.group(1), date(int(d[:4]), int(d[4:6]), int(d[6:]))))
    return found


def upkeep_ddl(
    schema: str, have: set[tuple[str, date]], today: date,
    keep_days: dict[str, float | None],
) -> list[str]:
    """CREATE the day partitions missing from today to AHEAD_DAYS ahead; DROP those whose day
    ended before their state's longest window (``keep_days``: None keeps them)."""
    out: list[str] = []
    for state in STATES:
        for ahead in range(AHEAD_DAYS + 1):
            day = today + timedelta(days=ahead)
            if (state, day) not in have:
                out.append(render(CREATE_SQL.format(
                    s="{s}", name=partition_name(state, day), state=state,
                    day=day.isoformat(), next=(day + timedelta(days=1)).isoformat()), schema))
    for state, day in sorted(have):
        keep = keep_days.get(state)
        if keep is not None and day + timedelta(days=1) < today - timedelta(days=keep):
            drop = DROP_DEAD_SQL if state == "dead" else DROP_SQL
            out.append(render(drop.format(s="{s}", name=partition_name(state, day)), schema))
    return out


#: (kind, sql, params): kind "rows" (send back the rows), "count" (send back the rowcount) or
#: "ddl" (run in its own transaction under LOCK_TIMEOUT_MS; send back whether it ran).
Step = tuple[str, str, Any]


def upkeep(
    schema: str, keep: dict[str, float | None], today: date,
    move_after: float = MOVE_AFTER, batch: int = MOVE_BATCH, max_batches: int = 10,
) -> Generator[Step, Any, int]:
    """One pass: partitions created and dropped, then finished jobs moved, in batches. Returns
    the jobs moved. Every step is idempotent, so a pass cut short (a crash, a lock timeout)
    is finished by the next one, on this leader or another."""
    names = {"jobs": f"{schema}.jobs", "history": f"{schema}.jobs_history"}
    for column, type_ in (yield "rows", MISSING_COLUMNS_SQL, names):
        yield "ddl", render(ADD_COLUMN_SQL.format(
            s="{s}", column=sql.Identifier(column).as_string(None), type=type_), schema), None
    have = days((yield "rows", render(PARTITIONS_SQL, schema), (schema,)))
    for ddl in upkeep_ddl(schema, have, today, keep):
        yield "ddl", ddl, None
    have = days((yield "rows", render(PARTITIONS_SQL, schema), (schema,)))
    per_state = [{d for s, d in have if s == state} for state in STATES]
    common = set.intersection(*per_state) if all(per_state) else set()
    if not common:
        return 0
    found = dict((yield "rows", render(SETTINGS_SQL, schema), ()))
    params = {"since": float(found.get(SINCE_SETTING, 0.0)),
              "after": float(found.get(MOVE_AFTER_SETTING, move_after)),
              "from": f"{min(common).isoformat()} 00:00:00+00",
              "until": f"{(max(common) + timedelta(days=1)).isoformat()} 00:00:00+00", "n": batch}
    moved = 0
    for _ in range(max_batches):
        n = int((yield "count", render(MOVE_SQL, schema), params))
        moved += n
        if n < batch:
            break
    return moved


def keep_days(windows: dict[tuple[str, str], float | None]) -> dict[str, float | None]:
    """Per state, the longest window of any queue in days (None: some queue keeps forever)."""
    out: dict[str, float | None] = {}
    for state in STATES:
        values = [w for (s, _q), w in windows.items() if s == state]
        longest = max((v for v in values if v is not None), default=DEFAULTS[state])
        out[state] = None if any(v is None for v in values) else longest / 86_400.0
    return out
