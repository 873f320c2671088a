"""Throughput runs the scenarios share: forklift worker processes and the plain claim loop."""

from __future__ import annotations

import time
from typing import Any

from forklift.cli.bench.measure import BackendCpu, Bench, Run, all_done, copy_jobs, max_id, span
from forklift.cli.bench.procs import procs, raw_loop, wait, wait_listening
from forklift.cli.bench.server import connect


def forklift_run(bench: Bench, workers: int, jobs: int, label: str, *, preloaded: bool = False,
                 settings: dict[str, Any] | None = None,
                 module: str = "forklift.cli.bench.procs") -> Run:
    """``workers`` worker processes run ``jobs`` no-op jobs.

    Idle (the default): the workers start, are listening, and then the jobs arrive by COPY (the
    trigger wakes them). Preloaded: the jobs are there first and the workers start on them;
    the span still runs from the first claim, so process start-up is not counted, but the
    worker's warm-up (its buffer sized from a completion rate it has yet to see) is.
    CPU of the worker processes is counted in the idle style only (from the moment they listen).
    ``module`` holds the workers' ``worker_main`` (another app's workers: bench ``unused``).
    """
    with bench.database(label) as (dsn, conn):
        if preloaded:
            copy_jobs(conn, "forklift.jobs", "bench.noop", 0, jobs)
        with procs("worker_main", dsn, workers, settings=settings, module=module) as started:
            client: float | None = None
            db: float | None = None
            if preloaded:
                last = max_id(conn, "forklift.jobs")
            else:
                wait_listening(conn, started)
                cpu = BackendCpu(conn, bench.server.local)
                cpu.begin()
                client0 = sum(p.cpu() for p in started)
                copy_jobs(conn, "forklift.jobs", "bench.noop", 0, jobs)
                last = max_id(conn, "forklift.jobs")
            wait("the workers to finish", lambda: all_done(conn, last), 600.0, started, 0.1)
            if not preloaded:
                client = sum(p.cpu() for p in started) - client0
                db = cpu.end()
        done, seconds = span(conn, "forklift.jobs")
    return Run(done, seconds, client, db)


def plain_run(bench: Bench, jobs: int, label: str, *, limit: int = 100) -> Run:
    """The plain loop in this process: claim ``limit`` FOR UPDATE SKIP LOCKED, complete them."""
    with bench.database(label) as (dsn, conn):
        copy_jobs(conn, "plain.jobs", "bench.noop", 0, jobs)
        with connect(dsn, "plain-loop") as loop:
            cpu = BackendCpu(conn, bench.server.local)
            cpu.begin()
            t0 = time.thread_time()
            raw_loop(loop, limit)
            client = time.thread_time() - t0
            db = cpu.end()
        done, seconds = span(conn, "plain.jobs")
    return Run(done, seconds, client, db)


def one_worker(bench: Bench) -> Run:
    """One default worker, idle then a COPY: the reference of the multi-worker figures."""
    n = bench.sizes.e2e_jobs
    return bench.shared("w1", lambda: forklift_run(bench, 1, n, "w1"))


def plain_loop(bench: Bench) -> Run:
    n = bench.sizes.e2e_jobs
    return bench.shared("plain", lambda: plain_run(bench, n, "plain"))
