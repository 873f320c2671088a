"""One-shot stats with 1,000,000 retained jobs: CPU per call, this process and its backend.

The load: finished jobs spread over the last 24 hours (2% dead, 5% with a failed attempt
first) plus a live backlog, vacuumed and analysed, and the closed minutes of the last hour
rolled up as a worker's leader writes them on its first pass (forklift.ops.stats_rollup). A call is ``forklift.ops.stats.stats`` with
no cache, every bucket of the window read, as a one-shot ``forklift stats`` does. CPU time does
not grow while a process waits for a core, so it shows the cost on a busy machine too; the
kernel counts it in ticks, so only the mean over many calls means anything.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import psutil
import psycopg

from forklift.cli.bench.measure import Bench
from forklift.cli.bench.registry import scenario
from forklift.cli.bench.report import Figure, Target
from forklift.ops import Operator
from forklift.ops.stats import stats
from forklift.ops.stats_rollup import rollup

LOAD_FINISHED = """
INSERT INTO forklift.jobs (queue, kind, args, state, attempt, max_attempts, run_at, created_at,
                           attempted_at, finished_at, errors)
SELECT 'queue_' || (i %% 8),
       'bench.kind_' || (i %% 5),
       jsonb_build_object('n', i, 'customer', 'c' || (i %% 1000)),
       CASE WHEN i %% 50 = 0 THEN 'dead' ELSE 'completed' END,
       CASE WHEN i %% 20 = 1 THEN 2 ELSE 1 END,
       20,
       f - interval '2 seconds', f - interval '3 seconds',
       f - (random() * interval '1 second'), f,
       CASE WHEN i %% 50 = 0 OR i %% 20 = 1 THEN jsonb_build_array(jsonb_build_object(
           'code', 'error', 'type', 'RuntimeError', 'message', 'upstream said no to ' || i,
           'traceback', '[]'::jsonb, 'attempt', 1, 'worker', 'bench',
           'at', f - interval '1 second'))
            ELSE '[]'::jsonb END
FROM (SELECT i, now() - (i::float8 / %(n)s) * interval '24 hours' AS f
      FROM generate_series(1, %(n)s) AS i) s
"""

LOAD_LIVE = """
INSERT INTO forklift.jobs (queue, kind, args, state, attempt, run_at, worker_id, fence,
                           lease_expires_at, attempted_at, errors)
SELECT 'queue_' || (i %% 8), 'bench.kind_' || (i %% 5), jsonb_build_object('n', i), st,
       CASE WHEN st IN ('running', 'retryable') THEN 1 ELSE 0 END,
       CASE WHEN st IN ('scheduled', 'retryable') THEN now() + interval '1 hour'
            ELSE now() - interval '1 minute' END,
       CASE WHEN st = 'running' THEN 'bench-worker' END,
       CASE WHEN st = 'running' THEN i END,
       CASE WHEN st = 'running' THEN now() + interval '30 seconds' END,
       CASE WHEN st = 'running' THEN now() END,
       CASE WHEN st = 'retryable' THEN jsonb_build_array(jsonb_build_object(
           'code', 'error', 'message', 'try again', 'attempt', 1, 'at', now())) ELSE '[]' END
FROM generate_series(1, %(n)s) AS i,
     LATERAL (SELECT CASE WHEN i %% 100 < 80 THEN 'available' WHEN i %% 100 < 90 THEN 'scheduled'
                          WHEN i %% 100 < 98 THEN 'retryable' ELSE 'running' END AS st) x
"""


QUEUES_SQL = ("INSERT INTO forklift.queues (name) SELECT 'queue_' || i"
              " FROM generate_series(0, 7) i ON CONFLICT DO NOTHING")


def load(conn: psycopg.Connection[Any], finished: int, live: int) -> None:
    """The retained history and the live backlog (``conn``: an autocommit connection)."""
    conn.execute(LOAD_FINISHED, {"n": finished})
    conn.execute(LOAD_LIVE, {"n": live})
    conn.execute(QUEUES_SQL)
    conn.execute("VACUUM (ANALYZE) forklift.jobs")


def roll_up(dsn: str) -> int:
    """A worker leader's first rollup pass: the closed minutes of the last hour."""

    async def once() -> int:
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
            return await rollup(conn, "forklift")

    return asyncio.run(once())


def cpu_per_call(call: Callable[[], object], n: int, backend_pid: int) -> tuple[list[float], float]:
    """Wall-clock ms of each call (sorted), and the mean CPU ms per call (this process and
    its server backend)."""
    backend = psutil.Process(backend_pid)
    walls = []
    b0, c0 = sum(backend.cpu_times()[:2]), time.process_time()
    for _ in range(n):
        t0 = time.perf_counter()
        call()
        walls.append((time.perf_counter() - t0) * 1000)
    cpu = (sum(backend.cpu_times()[:2]) - b0 + time.process_time() - c0) * 1000 / n
    return sorted(walls), cpu


@scenario("stats", figures=("stats_1m",), order=70)
def stats_1m(bench: Bench) -> list[Figure]:
    sz = bench.sizes
    with bench.database("stats") as (dsn, conn):
        load(conn, sz.stats_finished, sz.stats_live)
        rolled = roll_up(dsn)
        with Operator(dsn, actor="bench") as op:
            for _ in range(3):
                stats(op.conn, op.ctx)
            walls, cpu = cpu_per_call(lambda: stats(op.conn, op.ctx), sz.stats_calls,
                                      op.conn.info.backend_pid)
            op.stats()  # fills the Operator's cache of closed buckets
            _, cached = cpu_per_call(op.stats, sz.stats_calls, op.conn.info.backend_pid)
    return [Figure(
        "stats_1m", f"one-shot stats, {sz.stats_finished:,} retained jobs", "ms CPU", cpu,
        cached, "buckets cached", rule=Target("value<=", 20.0),
        detail={"calls": sz.stats_calls, "wall_median_ms": walls[len(walls) // 2],
                "finished": sz.stats_finished, "live": sz.stats_live, "rolled_up_minutes": rolled,
                "note": "client and server backend CPU per call, every bucket read"},
    )]
