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
from pathlib import Path

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from forklift._db.migrate import migrate
from forklift._db.sqltext import render
from forklift.cli.bench.scenarios.stats import (
    LOAD_FINISHED,
    LOAD_LIVE,
    QUEUES_SQL,
    cpu_per_call,
)
from forklift.ops import Operator
from forklift.ops.stats import COUNTS_SQL, WINDOW_SQL, stats


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
            c.execute(QUEUES_SQL)
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
            cold = cpu_per_call(lambda: stats(op.conn, op.ctx), args.calls, pid)
            report("stats(conn, ctx), every bucket read", cold)
            op.stats()  # fills the Operator's cache of closed buckets
            warm = cpu_per_call(op.stats, args.calls, pid)
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
