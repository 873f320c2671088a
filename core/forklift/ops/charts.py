"""Charts: per-bucket series over a recent window, for one queue or all.

    from forklift.ops import Operator
    with Operator() as op:
        c = op.charts(window=timedelta(hours=1), bucket=timedelta(minutes=1), queue="mail")
        c.completed[-1], c.failed[-1], c.lag_p95[-1], c.run_p50[-1]

Per bucket, oldest first (the last one is in progress):

- ``completed``, ``dead``: jobs that finished in the bucket;
- ``failed``: failed attempts in the bucket, by the time on each error entry (the count
  :func:`forklift.ops.stats.stats` gives);
- ``lag_p50``/``lag_p95``: pickup lag, seconds from a job's ``run_at`` (due) to the start of
  its current attempt, of the jobs picked up in the bucket (running now or finished since);
- ``run_p50``/``run_p95``: run time, seconds from start to finish, of the jobs that
  completed in the bucket.

A percentile is None for a bucket with no such job. (A job waiting to retry is not counted in
the lag: its ``run_at`` already names its next try.)

Costs: one statement per call, whatever the number of buckets (with the queues' names, to
choose one). Every arm over jobs is a range scan
bounded by the window: finished jobs through ``jobs_window_idx`` (finish time), running ones
through ``jobs_running_idx``, failed attempts as in stats (only rows that can hold an error in
the window). The percentiles are exact (``percentile_cont``), computed on the server per bucket.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import psycopg

from forklift.ops import history
from forklift.ops.context import OpsContext
from forklift.ops.filters import check_text
from forklift.ops.shape import Shape
from forklift.ops.stats import _SLOT, _START, FAILED_SQL, _points

__all__ = ["DEFAULT_BUCKET", "DEFAULT_WINDOW", "ChartSeries", "chart_series"]

DEFAULT_WINDOW = timedelta(hours=1)
DEFAULT_BUCKET = timedelta(minutes=1)

_RUN = "date_part('epoch', finished_at - attempted_at)"
# Never negative: a job made runnable early (run now) was picked up at once.
_LAG = "greatest(date_part('epoch', attempted_at - run_at), 0)"
_PCT = "percentile_cont(ARRAY[0.5, 0.95]::float8[]) WITHIN GROUP (ORDER BY {x})"
# {q}: the queue clause, or nothing (all queues); spliced as fixed text, the name a parameter.
SQL = f"""
WITH fin AS (
    SELECT state, attempted_at, run_at, finished_at FROM {{s}}.jobs
    WHERE state IN ('completed', 'dead') AND finished_at >= {_START}{{q}}
), picked AS (
    SELECT attempted_at, run_at FROM fin
    WHERE attempted_at >= {_START}
    UNION ALL
    SELECT attempted_at, run_at FROM {{s}}.jobs
    WHERE state = 'running' AND attempted_at >= {_START}{{q}}
), failed AS ({FAILED_SQL})
SELECT 'now', floor(extract(epoch FROM now()) / %(b)s)::bigint, 0::bigint, 0::bigint,
       NULL::float8[], now(), NULL::text
UNION ALL
SELECT 'queue', 0, 0, 0, NULL, NULL, name FROM {{s}}.queues
UNION ALL
SELECT 'finished', {_SLOT.format(col="finished_at")},
       count(*) FILTER (WHERE state = 'completed'), count(*) FILTER (WHERE state = 'dead'),
       {_PCT.format(x=_RUN)} FILTER (WHERE state = 'completed' AND attempted_at IS NOT NULL),
       NULL, NULL
FROM fin GROUP BY 2
UNION ALL
SELECT 'picked', {_SLOT.format(col="attempted_at")}, count(*), 0, {_PCT.format(x=_LAG)}, NULL,
       NULL
FROM picked GROUP BY 2
UNION ALL
SELECT 'failed', slot, sum(n)::bigint, 0, NULL, NULL, NULL
FROM failed AS f (queue, slot, n) {{fq}} GROUP BY 2
"""


@dataclass(frozen=True)
class ChartSeries(Shape):
    """One point per bucket, oldest first; the last bucket is the one in progress."""

    at: datetime
    window_seconds: float
    bucket_seconds: float
    #: The queue charted, or None for all queues.
    queue: str | None
    #: Start of each bucket.
    buckets: list[datetime]
    completed: list[int]
    failed: list[int]
    dead: list[int]
    #: Jobs picked up in the bucket (the lag's sample).
    picked: list[int]
    lag_p50: list[float | None]
    lag_p95: list[float | None]
    run_p50: list[float | None]
    run_p95: list[float | None]
    #: Every queue's name (to choose another).
    queues: list[str] = field(default_factory=list)


def render_sql(queue: str | None) -> str:
    """The statement for all queues, or for one (its name is the ``%(q)s`` parameter)."""
    if queue is None:
        return SQL.replace("{q}", "").replace("{fq}", "")
    return SQL.replace("{q}", " AND queue = %(q)s").replace("{fq}", "WHERE f.queue = %(q)s")


def params(window: timedelta, bucket: timedelta, queue: str | None) -> dict[str, Any]:
    return {"b": bucket.total_seconds(), "n": _points(window, bucket), "since": None, "q": queue}


def chart_series(
    conn: psycopg.Connection[Any],
    ctx: OpsContext,
    *,
    window: timedelta = DEFAULT_WINDOW,
    bucket: timedelta = DEFAULT_BUCKET,
    queue: str | None = None,
) -> ChartSeries:
    """The window's series for ``queue`` (None: every queue), in one statement."""
    if queue is not None:
        check_text(queue, "queue")
    p = params(window, bucket, queue)
    n, width = int(p["n"]), float(p["b"])
    rows = conn.execute(history.render_read(render_sql(queue), conn, ctx.schema), p).fetchall()
    now_slot, at = next((int(r[1]), r[5]) for r in rows if r[0] == "now")
    first = now_slot - (n - 1)
    completed, failed, dead, picked = ([0] * n for _ in range(4))
    none: list[float | None] = [None] * n
    lag50, lag95, run50, run95 = list(none), list(none), list(none), list(none)
    names = sorted(str(r[6]) for r in rows if r[0] == "queue")
    for what, slot, a, b, pct, _, _ in rows:
        i = int(slot) - first
        if what in ("now", "queue") or not 0 <= i < n:
            continue
        p50, p95 = (float(pct[0]), float(pct[1])) if pct else (None, None)
        if what == "finished":
            completed[i], dead[i], run50[i], run95[i] = int(a), int(b), p50, p95
        elif what == "picked":
            picked[i], lag50[i], lag95[i] = int(a), p50, p95
        else:
            failed[i] = int(a)
    start = datetime.fromtimestamp(first * width, at.tzinfo)
    return ChartSeries(
        at=at,
        window_seconds=window.total_seconds(),
        bucket_seconds=width,
        queue=queue,
        buckets=[start + timedelta(seconds=i * width) for i in range(n)],
        completed=completed,
        failed=failed,
        dead=dead,
        picked=picked,
        lag_p50=lag50,
        lag_p95=lag95,
        run_p50=run50,
        run_p95=run95,
        queues=names,
    )
