"""Per-kind breakdown: for each queue and kind, what finished in a recent window (completed,
dead, the share that died, run time p50/p95, throughput) and what waits now.

Costs: the window reads only jobs finished inside it, through the finished-time index
(``jobs_window_idx``), and the live counts only live jobs (their partial indexes); one round trip
in one snapshot, so the two agree.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import psycopg

from forklift.ops import history
from forklift.ops.context import OpsContext
from forklift.ops.errors import InvalidFilter
from forklift.ops.shape import Shape

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
           FILTER (WHERE state = 'completed' AND attempted_at IS NOT NULL)
FROM {{s}}.jobs
WHERE state IN ('completed', 'dead') AND finished_at >= now() - %(w)s::interval
GROUP BY 1, 2
"""
LIVE_SQL = """
SELECT queue, kind, state, count(*) FROM {s}.jobs
WHERE state IN ('scheduled', 'available', 'running', 'retryable')
GROUP BY 1, 2, 3
"""


@dataclass
class KindRow(Shape):
    queue: str
    kind: str
    completed: int = 0
    dead: int = 0
    #: Seconds; None without a completed job in the window.
    p50: float | None = None
    p95: float | None = None
    #: Live now, by state (scheduled, available, running, retryable).
    live: dict[str, int] = field(default_factory=dict)

    @property
    def failure_rate(self) -> float | None:
        """The share of the window's finished jobs that died (None: nothing finished)."""
        done = self.completed + self.dead
        return self.dead / done if done else None


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
    for queue, kind, completed, dead, p50, p95 in finished:
        rows[(queue, kind)] = KindRow(queue=queue, kind=kind, completed=int(completed),
                                      dead=int(dead), p50=p50, p95=p95)
    for queue, kind, state, n in live:
        row = rows.setdefault((queue, kind), KindRow(queue=queue, kind=kind))
        row.live[str(state)] = int(n)
    ordered = sorted(rows.values(), key=lambda r: (-(r.completed + r.dead), r.queue, r.kind))
    return KindStats(window_seconds=window.total_seconds(), rows=ordered)
