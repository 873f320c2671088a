"""The autoscaling signal: how many workers each queue needs now, one number per queue.

The number comes from one SQL function, ``{schema}.desired_workers(queue, per_worker, max,
target)`` (``_db/schema/functions/scale_v1.sql``), so the three ways it is read agree by
construction: a KEDA ``postgresql`` scaler querying the function, the Prometheus gauge
``forklift_queue_desired_workers`` and ``forklift queues scale --json``.

How it is made, per queue:

- *demand*: jobs running, and jobs that could start now (available, and scheduled or
  retryable ones already due: with no worker left nobody stages those, so counting them keeps
  the way back from zero workers open);
- *rate*: completions a second over the last closed minute (the stats rollup), divided by the
  running jobs: what one busy slot gets through;
- *slots*: the running jobs plus the slots that clear the waiting jobs within ``target``
  seconds at that rate; with no rate known (no completions in the last two minutes, or long
  jobs), one slot for each waiting job;
- *workers*: slots divided by the worker's concurrency, rounded up, at most ``max``.

Scale-in never outruns the drain: the answer is never below the workers the running jobs need
(``ceil(running / per_worker)``), so it only ever asks to remove idle capacity, and a worker
told to stop finishes its in-flight jobs within its drain bound (``--drain-timeout`` plus the
final writes). Zero only when nothing runs and nothing waits: scale-to-zero works, and the
first enqueue (or a scheduled job falling due) makes it one again. Every count is capped at
``max * per_worker`` rows, so the cost does not grow with the backlog.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg

from forklift._db.sqltext import render
from forklift.ops.context import OpsContext
from forklift.ops.errors import InvalidFilter
from forklift.ops.shape import Shape

__all__ = ["DEFAULT_MAX", "DEFAULT_TARGET", "QUEUES_SQL", "QueueScale", "desired_workers", "scale", "scaler_query"]

#: Most workers the signal asks for unless told otherwise.
DEFAULT_MAX = 100
#: Seconds within which the waiting jobs should be cleared at the observed rate.
DEFAULT_TARGET = 30.0

# Every queue's signal in one statement: the names given, in their order, or QUEUES_SQL's.
_SIGNAL_SQL = """
SELECT q.name, s.per_worker, s.running, s.waiting, s.rate, s.desired
FROM unnest(%(queues)s::text[]) WITH ORDINALITY AS q(name, n),
     LATERAL {s}.scale_signal(q.name, %(per_worker)s, %(max)s, %(target)s) s
ORDER BY q.n
"""
#: The queues the signal is read for when none are named: every queue with a row or a live
#: worker (the Prometheus gauge samples the same list).
QUEUES_SQL = """
SELECT name FROM (
    SELECT name FROM {s}.queues
    UNION SELECT DISTINCT unnest(queues) FROM {s}.workers WHERE state <> 'exited'
) q ORDER BY name
"""


@dataclass(frozen=True)
class QueueScale(Shape):
    queue: str
    #: Workers the queue needs now (what the scaler acts on).
    desired: int
    #: The concurrency one worker brings (given, else the queue's live workers', else 10).
    per_worker: int
    #: Jobs running now (capped at max * per_worker).
    running: int
    #: Jobs that could start now: available, and scheduled or retryable ones already due.
    waiting: int
    #: Completions a second over the last closed minute; None when none were recorded.
    rate: float | None


def _check(per_worker: int | None, max_workers: int, target: float) -> None:
    if per_worker is not None and per_worker < 1:
        raise InvalidFilter(f"per_worker must be at least 1, not {per_worker}",
                            field="per_worker")
    if max_workers < 0:
        raise InvalidFilter(f"max must be 0 or more, not {max_workers}", field="max")
    if not target > 0:
        raise InvalidFilter(f"target must be above 0 seconds, not {target}", field="target")


def scale(
    conn: psycopg.Connection[Any],
    ctx: OpsContext,
    queues: list[str] | None = None,
    *,
    per_worker: int | None = None,
    max_workers: int = DEFAULT_MAX,
    target: float = DEFAULT_TARGET,
) -> list[QueueScale]:
    """The signal for each of ``queues`` (default: every queue with a row or a live worker)."""
    _check(per_worker, max_workers, target)
    names = queues if queues is not None else [
        r[0] for r in conn.execute(render(QUEUES_SQL, ctx.schema)).fetchall()]
    rows = conn.execute(render(_SIGNAL_SQL, ctx.schema), {
        "queues": names, "per_worker": per_worker, "max": max_workers, "target": target,
    }).fetchall()
    return [QueueScale(queue=r[0], desired=int(r[5]), per_worker=int(r[1]), running=int(r[2]),
                       waiting=int(r[3]), rate=None if r[4] is None else float(r[4]))
            for r in rows]


def desired_workers(
    conn: psycopg.Connection[Any],
    ctx: OpsContext,
    queue: str,
    *,
    per_worker: int | None = None,
    max_workers: int = DEFAULT_MAX,
    target: float = DEFAULT_TARGET,
) -> int:
    """The one number for ``queue``, as the KEDA scaler's query reads it."""
    _check(per_worker, max_workers, target)
    row = conn.execute(render(scaler_query(), ctx.schema), {
        "queue": queue, "per_worker": per_worker, "max": max_workers, "target": target,
    }).fetchone()
    assert row is not None
    return int(row[0])


def scaler_query(
    queue: str | None = None, *, schema: str = "{s}", per_worker: int | None = None,
    max_workers: int = DEFAULT_MAX, target: float = DEFAULT_TARGET,
) -> str:
    """The query a KEDA ``postgresql`` scaler runs: with ``queue`` given, a literal one to paste
    into a ScaledObject; without, the parameterised form this module runs."""
    if queue is None:
        return ("SELECT {s}.desired_workers(%(queue)s, %(per_worker)s, %(max)s, %(target)s)"
                .replace("{s}", schema))
    literal = "'" + queue.replace("'", "''") + "'"
    pw = "NULL" if per_worker is None else str(int(per_worker))
    return (f"SELECT {schema}.desired_workers({literal}, {pw}, {int(max_workers)},"
            f" {float(target)})")
