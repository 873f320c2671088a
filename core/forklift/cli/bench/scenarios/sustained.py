"""Bench scenario ``sustained``: a steady producer at fixed rates instead of a burst.

One default worker, idle and listening; a producer then enqueues at a fixed rate (800 jobs a
second, then 5,000, or the ``Sizes`` given) for ``sustained_seconds`` each (60 s in a full run),
each rate in a fresh database. Reported for each: pickup p50/p99 (the jobs' commit to their
handler's start), the queue's depth (available jobs, read once a second), dead tuples per 1,000
jobs completed (the growth of ``n_dead_tup`` over the run) and the server's CPU a job.

``sustained_p99`` is the pickup p99 at the low rate, judged against 25 ms; ``sustained_depth``
is the most jobs waiting in the second half of the high-rate run, judged against one second of
that rate (a queue that keeps up holds well under a second's jobs; one that falls behind grows
past any bound). Run only when named (``forklift bench --only sustained``); ``--sustain``
sets the seconds and ``--rate`` the low rate.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

from forklift.cli.bench.measure import BackendCpu, Bench
from forklift.cli.bench.procs import procs, wait, wait_listening
from forklift.cli.bench.registry import scenario
from forklift.cli.bench.report import Figure, Target
from forklift.cli.bench.steady import Phases, Probe, Producer, pickups_of, summary

#: The low rate's target for its pickup p99, in milliseconds.
P99_BOUND_MS = 25.0


def steady_run(bench: Bench, label: str, rate: float, seconds: float) -> dict[str, Any]:
    """One worker under ``rate`` jobs a second for ``seconds``: the run's summary, and the
    depth readings of its second half (``depth_late_max``)."""
    with bench.database(label) as (dsn, conn), procs("worker_main", dsn, 1) as workers:
        wait_listening(conn, workers)
        probe = Probe(dsn)
        cpu = BackendCpu(conn, bench.server.local, exclude=(probe.conn.info.backend_pid,))
        phases = Phases(conn, cpu, probe)
        producer = Producer(dsn, rate)
        probe.start()
        try:
            with phases.phase("steady") as steady:
                producer.start()
                time.sleep(seconds)  # the run's length, not a wait for anything
                sent = producer.stop()
        finally:
            if producer.is_alive():
                producer.stop()
            readings = probe.stop()
        last = max(sent, default=0)

        def drained() -> bool:
            row = conn.execute("SELECT state FROM forklift.jobs WHERE id = %s", (last,)).fetchone()
            return row is None or row[0] == "completed"

        with contextlib.suppress(TimeoutError):  # a run that fell behind reports it as such
            wait("the steady run's last job", drained, max(60.0, seconds), workers, 0.1)
        out = summary(conn, steady, sent, pickups_of(conn, sent), readings)
        half = steady.client_start + (steady.client_end - steady.client_start) / 2
        out["depth_late_max"] = max((r.depth for r in readings if r.at >= half), default=0)
        out["offered_rate"] = rate
    return out


@scenario("sustained", figures=("sustained_p99", "sustained_depth"), order=96, default=False)
def sustained(bench: Bench) -> list[Figure]:
    sz = bench.sizes
    low = steady_run(bench, "steady_low", sz.sustained_rate, sz.sustained_seconds)
    high = steady_run(bench, "steady_high", sz.sustained_high_rate, sz.sustained_seconds)
    return [
        Figure("sustained_p99", f"pickup p99, steady {sz.sustained_rate:,} jobs/s, 1 worker",
               "ms", low["pickup_p99_ms"], low["pickup_p50_ms"], "p50",
               rule=Target("value<=", P99_BOUND_MS), detail=low),
        Figure("sustained_depth",
               f"most jobs waiting, steady {sz.sustained_high_rate:,} jobs/s, 2nd half",
               "jobs", float(high["depth_late_max"]), float(sz.sustained_high_rate),
               "1 s of jobs", rule=Target("ratio<=", 1.0), detail=high),
    ]
