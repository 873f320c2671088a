"""Bench scenario ``horizon``: a steady load while a transaction pins the xmin horizon.

One default worker under a steady producer (800 jobs a second, or ``--rate``) through three
stretches: before (``sustained_seconds``), held (``horizon_seconds``, 300 s in a full run: a
REPEATABLE READ transaction with a transaction id, open in the same database, so no dead row
of the jobs table made meanwhile can be vacuumed) and after (``sustained_seconds`` again, the
transaction ended). For each stretch: the completion rate, pickup p50/p99 of the jobs sent in
it, queue depth, dead tuples per 1,000 jobs completed and the server's CPU a job.

``horizon_rate`` is the held stretch's completion rate over the stretch before (target 0.9x),
``horizon_p99`` the held stretch's pickup p99 (target 50 ms), ``horizon_dead`` its dead
tuples per 1,000 jobs against the stretch before (reported). Run only when named
(``forklift bench --only horizon``); ``--hold`` sets the held seconds.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

from forklift.cli.bench.measure import BackendCpu, Bench
from forklift.cli.bench.procs import procs, wait, wait_listening
from forklift.cli.bench.registry import scenario
from forklift.cli.bench.report import REPORTED, Figure, Target
from forklift.cli.bench.server import connect
from forklift.cli.bench.steady import Phases, Probe, Producer, pickups_of, summary

RATE_BOUND = 0.9
P99_BOUND_MS = 50.0


def held_run(bench: Bench) -> dict[str, dict[str, Any]]:
    """The three stretches' summaries (``before``, ``held``, ``after``)."""
    sz = bench.sizes
    with bench.database("horizon") as (dsn, conn), procs("worker_main", dsn, 1) as workers, \
            connect(dsn, "horizon-pin") as pin:
        wait_listening(conn, workers)
        probe = Probe(dsn)
        cpu = BackendCpu(conn, bench.server.local,
                         exclude=(probe.conn.info.backend_pid, pin.info.backend_pid))
        phases = Phases(conn, cpu, probe)
        producer = Producer(dsn, sz.sustained_rate)
        pinned_xmin: Any = None
        probe.start()
        try:
            producer.start()
            with phases.phase("before"):
                time.sleep(sz.sustained_seconds)  # the stretch's length
            with phases.phase("held"):
                pin.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
                pin.execute("SELECT pg_current_xact_id()")
                row = conn.execute("SELECT backend_xmin::text FROM pg_stat_activity"
                                   " WHERE pid = %s", (pin.info.backend_pid,)).fetchone()
                pinned_xmin = row[0] if row else None
                time.sleep(sz.horizon_seconds)
                pin.execute("ROLLBACK")
            with phases.phase("after"):
                time.sleep(sz.sustained_seconds)
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
            wait("the held run's last job", drained, max(60.0, sz.sustained_seconds), workers,
                 0.1)
        picked = pickups_of(conn, sent)
        out = {p.name: summary(conn, p, sent, picked, readings) for p in phases.done}
        out["held"]["pinned_xmin"] = pinned_xmin
        for stretch in out.values():
            stretch["offered_rate"] = sz.sustained_rate
    return out


@scenario("horizon", figures=("horizon_rate", "horizon_p99", "horizon_dead"), order=97,
          default=False)
def horizon(bench: Bench) -> list[Figure]:
    sz = bench.sizes
    run = held_run(bench)
    before, held, after = run["before"], run["held"], run["after"]
    what = f"steady {sz.sustained_rate:,} jobs/s, horizon held {sz.horizon_seconds:g} s"
    return [
        Figure("horizon_rate", f"completion rate, {what}", "jobs/s", held["rate"],
               before["rate"], "unpinned", rule=Target("ratio>=", RATE_BOUND), detail=run),
        Figure("horizon_p99", f"pickup p99, {what}", "ms", held["pickup_p99_ms"],
               before["pickup_p99_ms"], "unpinned", rule=Target("value<=", P99_BOUND_MS),
               detail={"before": before["pickup_p99_ms"], "held": held["pickup_p99_ms"],
                       "after": after["pickup_p99_ms"]}),
        Figure("horizon_dead", f"dead tuples per 1,000 jobs, {what}", "tuples",
               held["dead_per_1000_jobs"], before["dead_per_1000_jobs"], "unpinned",
               rule=REPORTED,
               detail={k: run[k]["dead_per_1000_jobs"] for k in ("before", "held", "after")}
               | {"dead_max_held": held["dead_max"], "dead_end_after": after["dead_end"]}),
    ]
