"""Bench scenario ``wake``: 1,000 jobs parked in ``ctx.wait_for_event``, woken by one
transaction that publishes their 1,000 events; the figure is the time from that commit to the
last of them completed (the database's clock at both ends), target at most 2 s.

Two real worker subprocesses (``forklift worker --app forklift.cli.bench.scenarios.wake:app``)
park the jobs, then resume them. Registered with ``forklift.cli.bench.registry``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from typing import Any

from forklift import Forklift, JobContext
from forklift.cli.bench.measure import Bench
from forklift.cli.bench.procs import wait as _wait
from forklift.cli.bench.registry import scenario
from forklift.cli.bench.report import QUICK, Figure, Target

app = Forklift()
JOBS = 1_000
EVENT = "bench.go"


@app.job(name="bench.wait")
async def wait(ctx: JobContext, p: dict[str, int]) -> None:
    await ctx.wait_for_event(EVENT, match={"n": p["n"]}, timeout=3600)


def _workers(dsn: str, n: int) -> list[subprocess.Popen[bytes]]:
    env = dict(os.environ, FORKLIFT_DSN=dsn)
    cmd = [sys.executable, "-m", "forklift.cli.main", "worker", "--app",
           "forklift.cli.bench.scenarios.wake:app", "--concurrency", "50", "--log-level", "WARNING"]
    return [subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            for _ in range(n)]


def _count(conn: Any, sql: str) -> int:
    row = conn.execute(sql).fetchone()
    return int(row[0]) if row else 0


@scenario("wake", figures=("wake",), order=200)
def wake(bench: Bench) -> list[Figure]:
    # The smoke test's tiny sizes park a few dozen; a real run (quick or full) parks 1,000.
    jobs = JOBS if bench.sizes.e2e_jobs >= QUICK.e2e_jobs else 50

    with bench.database("wake") as (dsn, conn):
        procs = _workers(dsn, 2)
        try:
            app.use(dsn)
            app.kind("bench.wait").enqueue_many([{"n": i} for i in range(jobs)])
            _wait("the jobs to park", lambda: _count(
                conn, "SELECT count(*) FROM forklift.job_steps WHERE state = 'waiting'") == jobs,
                300.0)
            with conn.transaction():
                for i in range(jobs):
                    app.publish_event(EVENT, {"n": i}, conn=conn)
            committed = conn.execute("SELECT clock_timestamp()").fetchone()
            t0 = time.perf_counter()
            _wait("the woken jobs to finish", lambda: _count(
                conn, "SELECT count(*) FROM forklift.jobs WHERE state = 'completed'") == jobs,
                120.0)
            client_seconds = time.perf_counter() - t0
            row = conn.execute(
                "SELECT extract(epoch FROM max(finished_at) - %s)::float8,"
                " percentile_cont(0.5) WITHIN GROUP"
                " (ORDER BY extract(epoch FROM finished_at - %s)::float8) FROM forklift.jobs",
                (committed[0], committed[0])
            ).fetchone() if committed else None
        finally:
            app.close()
            for p in procs:
                p.terminate()
            for p in procs:
                try:
                    p.wait(30)
                except subprocess.TimeoutExpired:
                    p.kill()
    last = float(row[0]) if row and row[0] is not None else None
    return [Figure(
        "wake", f"{jobs:,} parked jobs: their events' commit to the last completed", "s",
        last, 2.0, "target", rule=Target("value<=", 2.0),
        detail={"jobs": jobs, "median_s": row[1] if row else None,
                "client_seconds": client_seconds},
    )]
