"""Retention over 1,000,000 expired jobs: the longest transaction it holds (prints; asserts nothing).

    python tests/benchmarks/bench_prune.py [--rows 1000000] [--batch 1000]

The server is bench_stats.py's (FORKLIFT_BENCH_DSN, else an embedded server under
FORKLIFT_BENCH_HOME). A fresh database gets ``--rows`` completed jobs finished two days ago
(past the 1-day default window) plus a day's worth of recent ones that must stay, vacuumed and
analysed; then the leader's retention pass (forklift._features.retention: keyset batches, one statement
and so one transaction each) is driven until nothing is left to delete. Each statement is timed
on the client (an upper bound of its transaction on the server: autocommit, loopback); the
longest is the figure (the target is at most 200 ms). The database is dropped at the end.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Any

import psycopg
from bench_health import scratch_db

from forklift._features import retention as r

LOAD = """
INSERT INTO forklift.jobs (queue, kind, args, state, attempt, run_at, created_at, attempted_at,
                           finished_at)
SELECT 'queue_' || (i %% 8), 'bench.kind', jsonb_build_object('n', i), 'completed', 1,
       f, f, f, f
FROM (SELECT i, now() - %(age)s::interval - (i::float8 / %(n)s) * interval '1 hour' AS f
      FROM generate_series(1, %(n)s) AS i) s
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--recent", type=int, default=100_000)
    ap.add_argument("--batch", type=int, default=1000)
    args = ap.parse_args()

    with scratch_db("prune") as dsn, psycopg.connect(dsn, autocommit=True) as c:
        t0 = time.perf_counter()
        c.execute(LOAD, {"n": args.rows, "age": "2 days"})
        c.execute(LOAD, {"n": args.recent, "age": "1 minute"})
        c.execute("VACUUM (ANALYZE) forklift.jobs")
        print(f"loaded {args.rows:,} expired + {args.recent:,} recent completed jobs,"
              f" vacuumed: {time.perf_counter() - t0:.1f}s")
        plan = r.passes(r.load_sync(c, "forklift"))
        times: list[float] = []
        deleted = 0
        started = time.perf_counter()
        while True:
            gen = r.steps("forklift", plan, batch=args.batch, max_batches=10)
            before = deleted
            try:
                text, params = next(gen)
                while True:
                    t = time.perf_counter()
                    rows: list[Any] = c.execute(text, params).fetchall()
                    times.append((time.perf_counter() - t) * 1000)
                    deleted += len(rows)
                    text, params = gen.send(rows)
            except StopIteration:
                pass
            if deleted == before:
                break
        wall = time.perf_counter() - started
        left = c.execute("SELECT count(*) FROM forklift.jobs").fetchone()
        times.sort()
        p99 = times[min(len(times) - 1, round(0.99 * len(times)) - 1)]
        print(f"pruned {deleted:,} jobs in {len(times):,} statements over {wall:.1f}s"
              f" ({deleted / wall:,.0f} rows/s); {left[0] if left else '?':,} left")
        print(f"transaction time per batch of {args.batch:,}: median"
              f" {statistics.median(times):.1f} ms, p99 {p99:.1f} ms,"
              f" longest {times[-1]:.1f} ms (target: at most 200 ms)")
        print(f"load average: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
