"""Bench scenario ``fleet``: how the claim rate grows with worker processes against one server.

2, 4, 8 and 16 default worker processes run the same no-op backlog as one worker does (idle,
then a COPY), each against the one-worker rate of the same run; each figure's detail says how
many database connections a worker held while listening (claim, complete, heartbeat, listen,
and the leader's sessions on one of them) and the server's own CPU a job. Reported, not judged:
the figures say where this machine's one PostgreSQL server stops giving more (on two cores,
every process shares the cores the server needs). Run only when named: ``forklift bench
--only fleet``.
"""

from __future__ import annotations

from typing import Any

from forklift.cli.bench.measure import BackendCpu, Bench, Run, all_done, copy_jobs, max_id, span
from forklift.cli.bench.procs import procs, wait, wait_listening
from forklift.cli.bench.registry import scenario
from forklift.cli.bench.report import REPORTED, Figure
from forklift.cli.bench.runs import one_worker

COUNTS = (2, 4, 8, 16)


def _connections(conn: Any) -> int:
    row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                       " AND application_name LIKE 'forklift:%'").fetchone()
    return int(row[0]) if row else 0


def _run(bench: Bench, workers: int, jobs: int) -> tuple[Run, int]:
    with bench.database(f"fleet{workers}") as (dsn, conn):
        with procs("worker_main", dsn, workers) as started:
            wait_listening(conn, started)
            cpu = BackendCpu(conn, bench.server.local)
            cpu.begin()
            copy_jobs(conn, "forklift.jobs", "bench.noop", 0, jobs)
            last = max_id(conn, "forklift.jobs")
            wait("the workers to finish", lambda: all_done(conn, last), 600.0, started, 0.1)
            db = cpu.end()
            # counted once they have worked: a worker opens some connections on first use,
            # so a count taken while they only listen depends on how fast they started
            held = _connections(conn)
        done, seconds = span(conn, "forklift.jobs")
    return Run(done, seconds, None, db), held


@scenario("fleet", figures=tuple(f"fleet_{n}w" for n in COUNTS), order=95, default=False)
def fleet(bench: Bench) -> list[Figure]:
    n = bench.sizes.e2e_jobs
    one = one_worker(bench)
    figures = []
    for count in COUNTS:
        many, held = _run(bench, count, n)
        figures.append(Figure(
            f"fleet_{count}w", f"claim rate, {count} worker processes against one server",
            "jobs/s", many.rate, one.rate, "1 worker", rule=REPORTED,
            detail={"jobs": n, "seconds": many.seconds,
                    "connections_per_worker": round(held / count, 2),
                    "db_cpu_us_per_job": many.per_job(many.db_cpu)}))
    return figures
