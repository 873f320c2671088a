"""`forklift health --json` cost with 1,000,000 retained jobs (prints figures; asserts nothing).

    python tests/benchmarks/bench_health.py [--finished 1000000] [--calls 20]

The server and the data are bench_stats.py's (FORKLIFT_BENCH_DSN, else an embedded server under
FORKLIFT_BENCH_HOME): a fresh database, 1,000,000 finished jobs and a live backlog, vacuumed
and analysed. Then, after a warm-up: the server's execution time of each statement health runs
(EXPLAIN ANALYZE, summed: the target is at most 50 ms), and the wall and CPU time of whole
``health()`` calls and of the JSON the CLI prints. The database is dropped at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import time
from collections.abc import Iterator

import psycopg
from bench_stats import LOAD_FINISHED, LOAD_LIVE, admin_dsn, report, with_db
from psycopg import sql

from forklift._db.migrate import migrate
from forklift.cli.bench.scenarios.stats import cpu_per_call as timed
from forklift.ops import OpsContext, horizon
from forklift.ops import health as h
from forklift.ops import retention as ops_retention
from forklift.ops import settings as _settings

CTX = OpsContext(actor="bench")
STATEMENTS = {
    "settings": (_settings.READ_SQL.replace("{s}", "forklift"), ("health.%",)),
    "tables": (h.TABLES_SQL, ("forklift",)),
    "indexes": (h.INDEXES_SQL, ("forklift",)),
    "connections": (h.CONNECTIONS_SQL, None),
    "lock waits": (h.LOCK_WAITS_SQL, ("forklift",)),
    "horizon": (horizon.HOLDERS_SQL, (5,)),
    "retention": (ops_retention.ROWS_SQL.replace("{s}", "forklift"), None),
    "retention backlog": (h.RETENTION_BACKLOG_SQL.replace("{s}", "forklift").replace(
        "{skip}", ""), {"state": "completed", "secs": 86_400.0 + h.RETENTION_GRACE, "skip": [],
                        "cap": h.RETENTION_CAP}),
}


def server_ms(conn: psycopg.Connection[object], text: str, params: object) -> float:
    plan = conn.execute("EXPLAIN (ANALYZE, TIMING OFF) " + text, params).fetchall()  # type: ignore[arg-type]
    found = 0.0
    for (line,) in plan:
        m = re.match(r"\s*(Planning|Execution) Time: ([\d.]+) ms", str(line))
        if m:
            found += float(m.group(2))
    return found


@contextlib.contextmanager
def scratch_db(label: str) -> Iterator[str]:
    """A fresh, migrated database on the bench server, dropped afterwards; its conninfo."""
    admin = admin_dsn()
    name = f"forklift_bench_{label}_{os.getpid()}"
    with psycopg.connect(admin, autocommit=True) as a:
        a.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        dsn = with_db(admin, name)
        migrate(dsn, "forklift")
        yield dsn
    finally:
        with psycopg.connect(admin, autocommit=True) as a:
            a.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                sql.Identifier(name)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--finished", type=int, default=1_000_000)
    ap.add_argument("--live", type=int, default=20_000)
    ap.add_argument("--calls", type=int, default=20)
    args = ap.parse_args()

    with scratch_db("health") as dsn, psycopg.connect(dsn, autocommit=True) as c:
        t0 = time.perf_counter()
        c.execute(LOAD_FINISHED, {"n": args.finished})
        c.execute(LOAD_LIVE, {"n": args.live})
        c.execute("VACUUM (ANALYZE) forklift.jobs")
        print(f"loaded {args.finished:,} finished + {args.live:,} live jobs, vacuumed:"
              f" {time.perf_counter() - t0:.1f}s")
        for _ in range(3):
            h.health(c, CTX)
        total = 0.0
        for label, (text, params) in STATEMENTS.items():
            runs = sorted(server_ms(c, text, params) for _ in range(args.calls))
            median = runs[len(runs) // 2]
            total += median
            print(f"  {label:12s} server median {median:6.2f} ms (max {runs[-1]:.2f})")
        print(f"server time of one health read (sum of medians): {total:.1f} ms"
              " (target: at most 50 ms)")
        pid = c.info.backend_pid
        report("health(conn, ctx)", timed(lambda: h.health(c, CTX), args.calls, pid))
        report("health(...).to_json() serialised (forklift health --json)",
               timed(lambda: json.dumps(h.health(c, CTX).to_json(), default=str),
                     args.calls, pid))


if __name__ == "__main__":
    main()
