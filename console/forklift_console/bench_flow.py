"""`forklift bench` scenarios of flow control (listed by bench.py).

``flow_keyed``
    End to end, one worker with default settings: no-op jobs of a kind with a per-key limit
    (``Key(n % 100, limit=1)``: 100 distinct keys, each running at most one job at a time),
    against the same number of no-op jobs without keys, in the same run. Target: at least half
    the unkeyed rate.
``flow_fair``
    Pickup latency of a second tenant on a fair-share queue while one tenant's backlog of
    50,000 jobs (quick: 10,000) drains, against the idle pickup latency of the same queue with
    no backlog; both from the enqueuing client's clock before COMMIT to the handler's first
    line. Target: the p50 within 2x the idle one.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from typing import TYPE_CHECKING, Any

import psycopg

from forklift import Forklift, JobContext, Key
from forklift.ops import Operator

if TYPE_CHECKING:
    from forklift_console.bench import Figure, _Bench

log = logging.getLogger("forklift_console.bench")

SCENARIOS = ("flow_keyed", "flow_fair")
SCHEMA = "forklift"
KEYS = 100
FAIR_EVERY = 0.05  # seconds between the second tenant's jobs

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
    """A bench worker subprocess for the flow scenarios: this module's app, default settings."""
    from forklift import Worker, run_worker

    logging.basicConfig(level=logging.WARNING)
    app.use(os.environ["FORKLIFT_DSN"])
    sys.exit(run_worker(Worker(app)))


def _copy_keyed(conn: psycopg.Connection[Any], kind: str, queue: str,
                items: list[tuple[dict[str, Any], list[str]]]) -> None:
    """Preload keyed jobs with COPY (the insert trigger flags the queue and makes value rows)."""
    with conn.transaction(), conn.cursor().copy(
        f"COPY {SCHEMA}.jobs (queue, kind, args, keys) FROM STDIN"
    ) as copy:
        for args, keys in items:
            copy.write_row((queue, kind, json.dumps(args), keys))


def _ready(conn: psycopg.Connection[Any], procs: list[Any]) -> None:
    """Until the worker listens and has recorded its kinds' keys (jobs wait for that)."""
    from forklift_console import bench as b

    b._wait_listening(conn, procs)

    def recorded() -> bool:
        row = conn.execute(f"SELECT count(*) FROM {SCHEMA}.flow_keys").fetchone()
        return bool(row and row[0] >= 2)

    b._wait("the worker to record its keys", recorded, 60.0, procs)


def run_keyed(bench: _Bench) -> list[Figure]:
    from forklift_console import bench as b

    n = max(100, bench.sizes.e2e_jobs // 2)
    plain = bench.forklift_run(1, n, "unkeyed")
    with bench.database("keyed") as (dsn, conn), \
            b._procs("worker_main", dsn, 1, module=__name__) as procs:
        _ready(conn, procs)
        for start in range(0, n, 10_000):
            _copy_keyed(conn, "bench.keyed", "keyed", [
                ({"n": i}, [f"bench.key\x1fk{i % KEYS}"])
                for i in range(start, min(n, start + 10_000))])
        last = b._max_id(conn, f"{SCHEMA}.jobs")
        b._wait("the keyed jobs", lambda: b._all_done(conn, last), 600.0, procs, 0.1)
        done, seconds = b._span(conn, f"{SCHEMA}.jobs")
    rate = done / seconds if seconds else None
    ratio = b._ratio(rate, plain.rate)
    return [b.Figure(
        "flow_keyed", f"end-to-end no-op, per-key limit 1, {KEYS} keys", "jobs/s", rate,
        plain.rate, "no keys", ">= 0.50", ratio=ratio, ok=ratio is not None and ratio >= 0.5,
        detail={"jobs": done, "seconds": seconds},
    )]


def _pickups(bench: _Bench, dsn: str, conn: psycopg.Connection[Any], count: int,
             procs: list[Any]) -> list[float]:
    from forklift_console import bench as b

    with b._connect(dsn, "enqueue") as client:
        app.use(dsn)
        try:
            def enqueue() -> tuple[int, float]:
                with client.transaction():
                    job_id = fair.enqueue({"tenant": "small"}, conn=client).id
                    before_commit = time.time()
                return job_id, before_commit

            sent = bench._pace(count, FAIR_EVERY, enqueue)
        finally:
            app.close()

    def picked() -> bool:
        row = conn.execute(f"SELECT count(*) FROM {SCHEMA}.jobs WHERE id = ANY(%s) AND"
                           " result IS NOT NULL", (list(sent),)).fetchone()
        return bool(row and row[0] == len(sent))

    b._wait("the second tenant's jobs", picked, 120.0, procs)
    return b._pickups(conn, f"{SCHEMA}.jobs", sent)


def run_fair(bench: _Bench) -> list[Figure]:
    from forklift_console import bench as b

    backlog = min(50_000, max(200, bench.sizes.e2e_jobs // 2))  # full 50,000; quick 10,000
    samples = max(10, bench.sizes.latency_jobs // 5)
    with bench.database("fair") as (dsn, conn):
        with Operator(dsn, schema=SCHEMA, actor="bench") as op:
            op.set_fair("fair", True, create=True)
        with b._procs("worker_main", dsn, 1, module=__name__) as procs:
            _ready(conn, procs)
            idle = _pickups(bench, dsn, conn, samples, procs)
            _copy_keyed(conn, "bench.fair", "fair", [
                ({"tenant": "big"}, ["bench.tenant\x1fbig"]) for _ in range(backlog)])
            busy = _pickups(bench, dsn, conn, samples, procs)
            row = conn.execute(f"SELECT count(*) FROM {SCHEMA}.jobs WHERE state = 'available'"
                               ).fetchone()
            left = int(row[0]) if row else 0
    mine, theirs = b._pct(busy, 0.5), b._pct(idle, 0.5)
    ratio = b._ratio(mine, theirs)
    return [b.Figure(
        "flow_fair", f"fair share: 2nd tenant pickup p50 behind {backlog:,}", "ms", mine, theirs,
        "idle p50", "<= 2.00", ratio=ratio, ok=ratio is not None and ratio <= 2.0,
        detail={"samples": len(busy), "p99": b._pct(busy, 0.99), "idle_p99": b._pct(idle, 0.99),
                "backlog_left_when_done": left},
    )]


RUNS = {"flow_keyed": run_keyed, "flow_fair": run_fair}
