"""Worker memory over a long run: RSS at the end against RSS after the first tenth."""

from __future__ import annotations

import time

from forklift.cli.bench.measure import Bench, all_done, copy_jobs, span
from forklift.cli.bench.procs import procs
from forklift.cli.bench.registry import scenario
from forklift.cli.bench.report import Figure, Target


@scenario("memory", figures=("memory",), order=90)
def memory(bench: Bench) -> list[Figure]:
    n = bench.sizes.memory_jobs
    with bench.database("memory") as (dsn, conn):
        copy_jobs(conn, "forklift.jobs", "bench.noop", 0, n, batch=100_000)
        row = conn.execute("SELECT min(id) + %s, max(id) FROM forklift.jobs", (n // 10,)).fetchone()
        assert row is not None
        mark, last = int(row[0]), int(row[1])
        rss_mark: int | None = None
        peak = 0
        with procs("worker_main", dsn, 1) as workers:
            proc = workers[0]
            deadline = time.monotonic() + 900
            while True:
                proc.check()
                rss = proc.rss()
                peak = max(peak, rss)
                if rss_mark is None:
                    got = conn.execute(
                        "SELECT state FROM forklift.jobs WHERE id = %s", (mark,)
                    ).fetchone()
                    if got and got[0] == "completed":
                        rss_mark = proc.rss()
                elif all_done(conn, last):
                    final = proc.rss()
                    break
                if time.monotonic() > deadline:
                    raise TimeoutError("the memory run did not finish in 15 minutes")
                time.sleep(0.1)
        done, seconds = span(conn, "forklift.jobs")
    mib = 1024 * 1024
    assert rss_mark is not None
    return [Figure(
        "memory", f"worker RSS after {n:,} jobs", "MiB", final / mib, rss_mark / mib,
        "after 10%", ratio=final / rss_mark, rule=Target("ratio<=", 1.10),
        detail={"jobs": done, "seconds": seconds, "rate": done / seconds if seconds else None,
                "peak_mib": peak / mib},
    )]
