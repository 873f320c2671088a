"""Pickup latency: an idle worker, one job every 20 ms, against a raw LISTEN loop."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from typing import Any

import psycopg

from forklift.cli.bench.measure import Bench, all_done, bound, pct, pickups
from forklift.cli.bench.procs import PLAIN_CHANNEL, Proc, procs, stamp, wait, wait_listening
from forklift.cli.bench.registry import scenario
from forklift.cli.bench.report import Figure, Target
from forklift.cli.bench.server import connect


def pace(n: int, every: float, fn: Callable[[], tuple[int, float]]) -> dict[int, float]:
    """Call ``fn`` every ``every`` seconds; job id -> the client's clock before its commit."""
    sent: dict[int, float] = {}
    start = time.monotonic()
    for i in range(n):
        delay = start + i * every - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        job_id, at = fn()
        sent[job_id] = at
    return sent


def _raw(dsn: str, conn: psycopg.Connection[Any], n: int, every: float) -> list[float]:
    proc = Proc("raw_listener_main", dsn, stdout=subprocess.PIPE)
    try:
        if not proc.readline().startswith(b"ready"):
            proc.check()
            raise RuntimeError("the raw listener did not start")
        with connect(dsn, "raw-enqueue") as client:

            def enqueue() -> tuple[int, float]:
                with client.transaction():
                    row = client.execute(
                        "INSERT INTO plain.jobs (kind, args) VALUES ('bench.stamp', '{}')"
                        " RETURNING id"
                    ).fetchone()
                    client.execute("SELECT pg_notify(%s, 'default')", (PLAIN_CHANNEL,))
                    before_commit = time.time()
                assert row is not None
                return int(row[0]), before_commit

            sent = pace(n, every, enqueue)

        def finished() -> bool:
            row = conn.execute(
                "SELECT NOT EXISTS (SELECT 1 FROM plain.jobs WHERE state <> 'completed')"
            ).fetchone()
            return bool(row and row[0])

        wait("the raw loop", finished, 60.0, [proc])
    finally:
        proc.stop()
    return pickups(conn, "plain.jobs", sent)


@scenario("latency", figures=("latency_p50", "latency_p99"), order=50)
def latency(bench: Bench) -> list[Figure]:
    n, every = bench.sizes.latency_jobs, bench.sizes.latency_every
    with bench.database("latency") as (dsn, conn):
        with bound(dsn), procs("worker_main", dsn, 1) as workers, \
                connect(dsn, "enqueue") as client:
            wait_listening(conn, workers)

            def enqueue() -> tuple[int, float]:
                # The caller's own transaction (enqueue(conn=...)): the clock is read just
                # before COMMIT, the moment the job becomes visible and its NOTIFY is sent.
                with client.transaction():
                    job_id = stamp.enqueue({"n": 0}, conn=client).id
                    before_commit = time.time()
                return job_id, before_commit

            warm = enqueue()[0]  # not counted: connection and statement caches
            wait("the warm-up job", lambda: all_done(conn, warm), 60.0, workers)
            sent = pace(n, every, enqueue)
            wait("the paced jobs", lambda: all_done(conn, max(sent)), 60.0, workers)
        fl = pickups(conn, "forklift.jobs", sent)
        raw = _raw(dsn, conn, n, every)
    figures = []
    for key, q, bound_ in (("latency_p50", 0.5, 1.3), ("latency_p99", 0.99, 2.0)):
        figures.append(Figure(
            key, f"pickup latency p{round(q * 100)}, 1 job/{every * 1000:.0f} ms", "ms",
            pct(fl, q), pct(raw, q), "raw loop", rule=Target("ratio<=", bound_),
            detail={"samples": len(fl), "raw_samples": len(raw),
                    "from": "client clock before COMMIT",
                    "to": "handler start (forklift) / claim returned (raw)"},
        ))
    return figures
