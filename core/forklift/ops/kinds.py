"""Per-kind breakdown: for each queue and kind, what finished in a recent window (completed,
dead, the share that died, failed attempts and the share of attempts that failed, run time
p50/p95, throughput) and what waits now, by payload version too; a batch kind's batch size,
as its workers registered it; a weighted kind's weight, as its jobs carry it.

Costs: the window reads only jobs finished inside it, through the finished-time index
(``jobs_window_idx``), and the live counts only live jobs (their partial indexes); one round trip
in one snapshot, so the two agree. Failed attempts are counted as stats counts them (by the time on
each error entry, reading only the rows that can hold one in the window: see
:data:`forklift.ops.stats.FAILED_SQL`), per kind.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import psycopg

from forklift.ops import history, payload_versions
from forklift.ops.context import OpsContext
from forklift.ops.errors import InvalidFilter
from forklift.ops.shape import Shape
from forklift.ops.stats import _LAST_AT

__all__ = ["DEFAULT_WINDOW", "MAX_WINDOW", "KindRow", "KindStats", "kind_stats"]

DEFAULT_WINDOW = timedelta(hours=1)
MAX_WINDOW = timedelta(days=7)

_RUN = "date_part('epoch', finished_at - attempted_at)"
WINDOW_SQL = f"""
SELECT queue, kind,
       count(*) FILTER (WHERE state = 'completed'),
       count(*) FILTER (WHERE state = 'dead'),
       percentile_cont(0.5) WITHIN GROUP (ORDER BY {_RUN})
           FILTER (WHERE state = 'completed' AND attempted_at IS NOT NULL),
       percentile_cont(0.95) WITHIN GROUP (ORDER BY {_RUN})
           FILTER (WHERE state = 'completed' AND attempted_at IS NOT NULL),
       max(weight)
FROM {{s}}.jobs
WHERE state IN ('completed', 'dead') AND finished_at >= now() - %(w)s::interval
GROUP BY 1, 2
"""
# As stats.FAILED_SQL, per queue and kind over the whole window (no buckets).
_SINCE = "now() - %(w)s::interval"
FAILED_SQL = f"""
SELECT j.queue, j.kind, count(*)
FROM (
    SELECT queue, kind, errors FROM {{s}}.jobs
        WHERE state = 'completed' AND attempt > 1 AND finished_at >= {_SINCE}
    UNION ALL
    SELECT queue, kind, errors FROM {{s}}.jobs WHERE state = 'dead' AND finished_at >= {_SINCE}
    UNION ALL
    SELECT queue, kind, errors FROM {{s}}.jobs
        WHERE state = 'retryable' AND {_LAST_AT} >= {_SINCE}
    UNION ALL
    SELECT queue, kind, errors FROM {{s}}.jobs
        WHERE state = 'running' AND attempt > 1 AND {_LAST_AT} >= {_SINCE}
) j
CROSS JOIN LATERAL (
    -- each entry's time read and cast once, as in stats (OFFSET 0: see stats.FAILED_SQL)
    SELECT CASE WHEN x.t ~ '^\\d{{4}}-\\d\\d-\\d\\dT' THEN x.t::timestamptz END AS at
    FROM (SELECT x ->> 'at' AS t, x ->> 'code' AS code FROM jsonb_array_elements(j.errors) x
          OFFSET 0) x
    WHERE x.code NOT IN ('cancelled', 'interrupted', 'payload_version_ahead')
    OFFSET 0
) e
WHERE e.at >= {_SINCE} AND e.at < now() + interval '1 minute'
GROUP BY 1, 2
"""
# The batch size (most jobs a handler call takes) of each batch kind, as the workers that run
# it registered it (forklift._worker.worker); the largest when workers of two releases differ.
BATCH_SQL = """
SELECT e.kind, max((e.spec ->> 'batch')::int)
FROM {s}.workers w CROSS JOIN LATERAL jsonb_each(coalesce(w.kinds, '{}'::jsonb)) AS e(kind, spec)
WHERE w.state <> 'exited' AND e.spec ->> 'batch' IS NOT NULL
GROUP BY 1
"""
#: Live jobs per queue, kind, payload version and state (forklift.ops.payload_versions), and
#: the heaviest of them (NULL: each takes one slot), read in the same pass over them.
LIVE_SQL = payload_versions.LIVE_SQL.replace("count(*)", "count(*), max(weight)", 1)


@dataclass
class KindRow(Shape):
    queue: str
    kind: str
    completed: int = 0
    dead: int = 0
    #: Seconds; None without a completed job in the window.
    p50: float | None = None
    p95: float | None = None
    #: Failed attempts in the window (a retried job's, a dead job's last one included).
    failed: int = 0
    #: Live now, by state (scheduled, available, running, retryable).
    live: dict[str, int] = field(default_factory=dict)
    #: A batch kind's most jobs a handler call takes (as its live workers registered it);
    #: None for a kind run one job a call.
    batch: int | None = None
    #: Live now, by payload version (1: a kind without versions); see versions_text.
    versions: dict[int, int] = field(default_factory=dict)
    #: The most slots one of the jobs counted here takes (live now, or finished in the window;
    #: ``weight=``, the kind's or an enqueue's); None when each takes one. Read from the jobs,
    #: not from a declaration: a kind none of whose jobs is counted shows none.
    weight: int | None = None

    @property
    def versions_text(self) -> str:
        """``v1 3 · v2 10``: the live jobs of each payload version, oldest first; empty when
        every live job is version 1 (nothing to drain)."""
        if set(self.versions) <= {1}:
            return ""
        return " · ".join(f"v{v} {n:,}" for v, n in sorted(self.versions.items()))

    @property
    def failure_rate(self) -> float | None:
        """The share of the window's finished jobs that died (None: nothing finished)."""
        done = self.completed + self.dead
        return self.dead / done if done else None

    @property
    def attempt_failure_rate(self) -> float | None:
        """The share of the window's ended attempts that failed (None: no attempt ended):
        a kind that fails often but succeeds on retry shows here, not in failure_rate."""
        ended = self.completed + self.failed
        return self.failed / ended if ended else None


@dataclass
class KindStats(Shape):
    window_seconds: float
    rows: list[KindRow]

    def per_minute(self, row: KindRow) -> float:
        return row.completed / (self.window_seconds / 60.0)


def kind_stats(
    conn: psycopg.Connection[Any], ctx: OpsContext, *, window: timedelta = DEFAULT_WINDOW
) -> KindStats:
    if not timedelta(minutes=1) <= window <= MAX_WINDOW:
        raise InvalidFilter("the window is between 1 minute and 7 days", field="window")
    s = ctx.schema
    rows: dict[tuple[str, str], KindRow] = {}
    own = conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    with conn.transaction():
        if own:  # one snapshot: the window and the live counts agree
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        finished = conn.execute(history.render_read(WINDOW_SQL, conn, s), {"w": window}).fetchall()
        live = conn.execute(history.render_read(LIVE_SQL, conn, s)).fetchall()
        failed = conn.execute(history.render_read(FAILED_SQL, conn, s), {"w": window}).fetchall()
        batched = dict(conn.execute(history.render_read(BATCH_SQL, conn, s)).fetchall())
    for queue, kind, completed, dead, p50, p95, weight in finished:
        rows[(queue, kind)] = KindRow(queue=queue, kind=kind, completed=int(completed),
                                      dead=int(dead), p50=p50, p95=p95, weight=weight)
    for queue, kind, n in failed:
        row = rows.setdefault((queue, kind), KindRow(queue=queue, kind=kind))
        row.failed = int(n)
    for queue, kind, version, state, n, weight in live:
        row = rows.setdefault((queue, kind), KindRow(queue=queue, kind=kind))
        if weight is not None:
            row.weight = max(int(weight), row.weight or 1)
        row.live[str(state)] = row.live.get(str(state), 0) + int(n)
        row.versions[int(version)] = row.versions.get(int(version), 0) + int(n)
    for row in rows.values():
        size = batched.get(row.kind)
        row.batch = None if size is None else int(size)
    ordered = sorted(rows.values(), key=lambda r: (-(r.completed + r.dead), r.queue, r.kind))
    return KindStats(window_seconds=window.total_seconds(), rows=ordered)
