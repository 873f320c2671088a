"""Stats latency with 1,000,000 retained finished jobs (prints figures; asserts nothing).

    /work/.venv/bin/python tests/benchmarks/bench_stats.py [--finished 1000000] [--calls 20]

The server: FORKLIFT_BENCH_DSN (a role that may CREATE DATABASE), else an embedded server under
FORKLIFT_BENCH_HOME (default: a directory in the system temp dir). A fresh database is created,
migrated, loaded with INSERT ... SELECT generate_series (finished jobs spread over the last 24
hours, 2% dead, 5% with a failed attempt first; plus a live backlog), vacuumed and analysed,
then stats are read ``--calls`` times after a warm-up, twice: the function with no cache (every
bucket of the window read, as a one-shot `forklift stats` does) and an Operator whose closed
buckets are cached (as the console and `stats --watch` do). The database is dropped at the end.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from forklift._migrate import migrate
from forklift._sqltext import render
from forklift.ops import Operator
from forklift.ops.stats import COUNTS_SQL, WINDOW_SQL, stats

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


def admin_dsn() -> str:
    explicit = os.environ.get("FORKLIFT_BENCH_DSN")
    if explicit:
        return explicit
    from forklift import embedded

    home = Path(os.environ.get("FORKLIFT_BENCH_HOME")
                or Path(tempfile.gettempdir()) / "forklift-bench-home")
    home.mkdir(parents=True, exist_ok=True)
    home.chmod(0o755)
    return embedded.ensure_server(home)


def with_db(dsn: str, dbname: str) -> str:
    params = conninfo_to_dict(dsn)
    params["dbname"] = dbname
    return make_conninfo(**params)  # type: ignore[arg-type]


def timed(call: Callable[[], object], n: int, backend_pid: int) -> tuple[list[float], float]:
    """Wall-clock ms of each call, and the mean CPU ms per call (this process + its server
    backend; the kernel counts CPU in 10 ms ticks, so only the mean over many calls is
    meaningful). CPU time does not grow while a process waits for a core, so it shows the
    cost on a busy machine too, where wall time can be several times larger."""
    backend = psutil.Process(backend_pid)
    walls = []
    b0, c0 = sum(backend.cpu_times()[:2]), time.process_time()
    for _ in range(n):
        t0 = time.perf_counter()
        call()
        walls.append((time.perf_counter() - t0) * 1000)
    cpu = (sum(backend.cpu_times()[:2]) - b0 + time.process_time() - c0) * 1000 / n
    return sorted(walls), cpu


def report(label: str, figures: tuple[list[float], float]) -> None:
    walls, cpu = figures
    p95 = walls[min(len(walls) - 1, round(0.95 * len(walls)) - 1)]
    print(f"{label} ({len(walls)} calls):\n"
          f"    wall median {statistics.median(walls):.1f} ms, p95 {p95:.1f} ms"
          f" (min {walls[0]:.1f}, max {walls[-1]:.1f}); cpu {cpu:.1f} ms per call")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--finished", type=int, default=1_000_000)
    ap.add_argument("--live", type=int, default=20_000)
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--keep", action="store_true", help="keep the database afterwards")
    args = ap.parse_args()

    admin = admin_dsn()
    name = f"forklift_bench_stats_{os.getpid()}"
    with psycopg.connect(admin, autocommit=True) as a:
        a.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    dsn = with_db(admin, name)
    try:
        migrate(dsn, "forklift")
        with psycopg.connect(dsn, autocommit=True) as c:
            t0 = time.perf_counter()
            c.execute(LOAD_FINISHED, {"n": args.finished})
            c.execute(LOAD_LIVE, {"n": args.live})
            load = time.perf_counter() - t0
            c.execute("INSERT INTO forklift.queues (name) SELECT 'queue_' || i"
                      " FROM generate_series(0, 7) i ON CONFLICT DO NOTHING")
            t0 = time.perf_counter()
            c.execute("VACUUM (ANALYZE) forklift.jobs")
            vac = time.perf_counter() - t0
            print(f"loaded {args.finished:,} finished + {args.live:,} live jobs in {load:.1f}s,"
                  f" vacuum analyze {vac:.1f}s")
            for label, text in (("live counts", COUNTS_SQL), ("window", WINDOW_SQL)):
                plan = c.execute(
                    "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) " + render(text, "forklift"),
                    {"b": 60.0, "n": 30, "since": None},
                ).fetchall()
                scans = [r[0].strip() for r in plan if "Scan" in r[0]]
                total = [r[0] for r in plan if r[0].startswith("Execution Time")]
                print(f"{label}: {total[0] if total else ''}")
                for s in scans:
                    print(f"    {s}")
        print(f"load average before the calls: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
        with Operator(dsn, actor="bench") as op:
            for _ in range(3):
                stats(op.conn, op.ctx)
            pid = op.conn.info.backend_pid
            cold = timed(lambda: stats(op.conn, op.ctx), args.calls, pid)
            report("stats(conn, ctx), every bucket read", cold)
            op.stats()  # fills the Operator's cache of closed buckets
            warm = timed(op.stats, args.calls, pid)
            report("Operator.stats(), closed buckets cached", warm)
            s = op.stats()
            t = s.totals
            print(f"  window {s.window_seconds / 60:.0f} min: {t.completed:,} completed,"
                  f" {t.failed:,} failed attempts, {t.dead_in_window:,} dead;"
                  f" live {t.counts}")
    finally:
        if not args.keep:
            with psycopg.connect(admin, autocommit=True) as a:
                a.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                    sql.Identifier(name)))


if __name__ == "__main__":
    main()
