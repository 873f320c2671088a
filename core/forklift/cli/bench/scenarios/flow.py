"""Flow control: a per-key limit against no keys, and fair share behind a tenant's backlog.

``flow_keyed``
    End to end, one default worker: no-op jobs of a kind with a per-key limit
    (``Key(n % 100, limit=1)``: 100 distinct keys, each running at most one job at a time),
    against the same number of no-op jobs without keys, in the same run, both loaded the same
    way once their worker listens (one COPY per 50,000 jobs). Target: at least half the
    unkeyed rate. Like the unkeyed run's worker, each scenario's worker serves the one
    queue it measures (not this app's other queue, which would cost it a claim a round).
``flow_fair``
    Pickup latency of a second tenant on a fair-share queue while one tenant's backlog of
    50,000 jobs (quick: 10,000) drains, against the idle pickup latency of the same queue with
    no backlog; both from the enqueuing client's clock before COMMIT to the handler's first
    line. Target: the p50 within 2x the idle one.

The workers are this module's own app (``worker_main`` below), started as bench subprocesses.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from typing import Any

import psycopg

from forklift import Forklift, JobContext, Key
from forklift.cli.bench.measure import (
    Bench,
    all_done,
    copy_lines,
    max_id,
    pct,
    pickups,
    span,
)
from forklift.cli.bench.procs import Proc, procs, wait, wait_listening
from forklift.cli.bench.registry import scenario
from forklift.cli.bench.report import Figure, Target
from forklift.cli.bench.runs import forklift_run
from forklift.cli.bench.scenarios.latency import pace
from forklift.cli.bench.server import SCHEMA, connect

KEYS = 100
FAIR_EVERY = 0.05  # seconds between the second tenant's jobs
MODULE = __name__

app = Forklift(schema=SCHEMA)


@app.job(name="bench.keyed", queue="keyed",
         concurrency=[Key(lambda p: f"k{p['n'] % KEYS}", limit=1, name="bench.key")])
async def keyed(ctx: JobContext, payload: dict[str, int]) -> None:
    return None


@app.job(name="bench.fair", queue="fair",
         concurrency=[Key(lambda p: str(p["tenant"]), name="bench.tenant")])
async def fair(ctx: JobContext, payload: dict[str, Any]) -> float:
    return time.time()


def worker_main() -> None:
    """A bench worker subprocess for the flow scenarios: this module's app, default settings
    but for those the scenario passes (its queue)."""
    from forklift import Worker, run_worker

    logging.basicConfig(level=logging.WARNING)
    app.use(os.environ["FORKLIFT_DSN"])
    settings = json.loads(os.environ.get("FORKLIFT_BENCH_WORKER") or "{}")
    sys.exit(run_worker(Worker(app, **settings)))


def _copy_keyed(conn: psycopg.Connection[Any], kind: str, queue: str,
                items: list[tuple[dict[str, Any], list[str]]]) -> None:
    """Preload keyed jobs with COPY (the insert trigger flags the queue and makes value rows)."""
    with conn.transaction(), conn.cursor().copy(
        f"COPY {SCHEMA}.jobs (queue, kind, args, keys) FROM STDIN"
    ) as copy:
        for args, keys in items:
            copy.write_row((queue, kind, json.dumps(args), keys))


def _copy_keyed_noops(conn: psycopg.Connection[Any], count: int) -> None:
    """The keyed run's jobs, loaded the way the unkeyed run's are (``copy_lines``, as
    ``copy_jobs`` does), so both measure their worker on the same two cores with nothing
    loading beside it. Rows: ``{"n": i}`` keyed ``k{i % KEYS}``."""
    copy_lines(conn, f"{SCHEMA}.jobs (queue, kind, args, keys)",
               lambda i: f'keyed\tbench.keyed\t{{"n": {i}}}\t{{"bench.key\x1fk{i % KEYS}"}}\n',
               0, count)


def _ready(conn: psycopg.Connection[Any], started: list[Proc]) -> None:
    """Until the worker listens and has recorded its kinds' keys (jobs wait for that)."""
    wait_listening(conn, started)

    def recorded() -> bool:
        row = conn.execute(f"SELECT count(*) FROM {SCHEMA}.flow_keys").fetchone()
        return bool(row and row[0] >= 2)

    wait("the worker to record its keys", recorded, 60.0, started)


@scenario("flow_keyed", figures=("flow_keyed",), order=95)
def flow_keyed(bench: Bench) -> list[Figure]:
    n = max(100, bench.sizes.e2e_jobs // 2)
    plain = forklift_run(bench, 1, n, "unkeyed")
    with bench.database("keyed") as (dsn, conn), \
            procs("worker_main", dsn, 1, module=MODULE, settings={"queues": ["keyed"]}) as started:
        _ready(conn, started)
        _copy_keyed_noops(conn, n)
        last = max_id(conn, f"{SCHEMA}.jobs")
        wait("the keyed jobs", lambda: all_done(conn, last), 600.0, started, 0.1)
        done, seconds = span(conn, f"{SCHEMA}.jobs")
    rate = done / seconds if seconds else None
    return [Figure(
        "flow_keyed", f"end-to-end no-op, per-key limit 1, {KEYS} keys", "jobs/s", rate,
        plain.rate, "no keys", rule=Target("ratio>=", 0.5),
        detail={"jobs": done, "seconds": seconds, "unkeyed_jobs": plain.jobs},
    )]


def _pickups(dsn: str, conn: psycopg.Connection[Any], count: int,
             started: list[Proc]) -> list[float]:
    with connect(dsn, "enqueue") as client:
        app.use(dsn)
        try:
            def enqueue() -> tuple[int, float]:
                with client.transaction():
                    job_id = fair.enqueue({"tenant": "small"}, conn=client).id
                    before_commit = time.time()
                return job_id, before_commit

            sent = pace(count, FAIR_EVERY, enqueue)
        finally:
            app.close()

    def picked() -> bool:
        row = conn.execute(f"SELECT count(*) FROM {SCHEMA}.jobs WHERE id = ANY(%s) AND"
                           " result IS NOT NULL", (list(sent),)).fetchone()
        return bool(row and row[0] == len(sent))

    wait("the second tenant's jobs", picked, 120.0, started)
    return pickups(conn, f"{SCHEMA}.jobs", sent)


@scenario("flow_fair", figures=("flow_fair",), order=96)
def flow_fair(bench: Bench) -> list[Figure]:
    from forklift.ops import Operator

    backlog = min(50_000, max(200, bench.sizes.e2e_jobs // 2))  # full 50,000; quick 10,000
    samples = max(10, bench.sizes.latency_jobs // 5)
    with bench.database("fair") as (dsn, conn):
        with Operator(dsn, schema=SCHEMA, actor="bench") as op:
            op.set_fair("fair", True, create=True)
        with procs("worker_main", dsn, 1, module=MODULE, settings={"queues": ["fair"]}) as started:
            _ready(conn, started)
            idle = _pickups(dsn, conn, samples, started)
            _copy_keyed(conn, "bench.fair", "fair", [
                ({"tenant": "big"}, ["bench.tenant\x1fbig"]) for _ in range(backlog)])
            busy = _pickups(dsn, conn, samples, started)
            row = conn.execute(f"SELECT count(*) FROM {SCHEMA}.jobs WHERE state = 'available'"
                               ).fetchone()
            left = int(row[0]) if row else 0
    return [Figure(
        "flow_fair", f"fair share: 2nd tenant pickup p50 behind {backlog:,}", "ms",
        pct(busy, 0.5), pct(idle, 0.5), "idle p50", rule=Target("ratio<=", 2.0),
        detail={"samples": len(busy), "p99": pct(busy, 0.99), "idle_p99": pct(idle, 0.99),
                "backlog_left_when_done": left},
    )]
