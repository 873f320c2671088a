"""Steady load for the long scenarios: a producer at a fixed rate, a probe of the queue's state.

The producer enqueues the bench's ``stamp`` kind at ``rate`` jobs a second, in ticks of 10 ms:
each tick enqueues what the rate owes by then in one transaction (``enqueue_many(conn=...)``),
and reads the client's clock just before COMMIT, so a slow tick is caught up by the next ones
and the offered load stays the rate, not the rate the producer happens to manage. The handler
stores its own start (``time.time()``) as the job's result: a job's pickup is that minus its
commit clock, as the latency scenario takes it.

The probe reads, once a second on its own session, the queue's depth (available jobs, from
the claim index) and the table's dead tuples (``pg_stat_user_tables.n_dead_tup``, which
backends report within about a second of their commits).
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import psycopg

from forklift.cli.bench.measure import BackendCpu, bound, pct
from forklift.cli.bench.procs import stamp
from forklift.cli.bench.server import connect

#: Seconds between the producer's transactions.
TICK = 0.010
#: Seconds between the probe's readings.
PROBE_EVERY = 1.0

STATE_SQL = """
SELECT (SELECT count(*) FROM forklift.jobs WHERE state = 'available'),
       coalesce((SELECT n_dead_tup FROM pg_stat_user_tables
                 WHERE relid = 'forklift.jobs'::regclass), 0)
"""


@dataclass(frozen=True)
class Reading:
    """One probe reading: client clock, available jobs, dead tuples of the jobs table."""

    at: float
    depth: int
    dead: int


class Producer(threading.Thread):
    """Enqueues ``stamp`` jobs at ``rate`` a second until stopped; job id -> commit clock."""

    def __init__(self, dsn: str, rate: float) -> None:
        super().__init__(name="bench-steady-producer", daemon=True)
        self.dsn = dsn
        self.rate = rate
        self.sent: dict[int, float] = {}
        self.error: BaseException | None = None
        self._stop_event = threading.Event()

    def run(self) -> None:
        try:
            with bound(self.dsn), connect(self.dsn, "steady-producer") as client:
                self._produce(client)
        except BaseException as exc:  # reported by stop(): the scenario fails with it
            self.error = exc

    def _produce(self, client: psycopg.Connection[Any]) -> None:
        start = time.monotonic()
        made = 0
        while not self._stop_event.is_set():
            owed = math.floor(self.rate * (time.monotonic() - start)) - made
            if owed > 0:
                with client.transaction():
                    ids = stamp.enqueue_many([{"n": made + i} for i in range(owed)], conn=client)
                    before_commit = time.time()
                for job_id in ids:
                    self.sent[job_id] = before_commit
                made += owed
            ticks = math.floor((time.monotonic() - start) / TICK) + 1
            self._stop_event.wait(max(0.0, start + ticks * TICK - time.monotonic()))

    def stop(self) -> dict[int, float]:
        self._stop_event.set()
        self.join()
        if self.error is not None:
            raise RuntimeError(f"the steady producer failed: {self.error}") from self.error
        return self.sent


class Probe(threading.Thread):
    """Reads the queue's depth and the table's dead tuples every ``PROBE_EVERY`` seconds."""

    def __init__(self, dsn: str) -> None:
        super().__init__(name="bench-steady-probe", daemon=True)
        self.conn = connect(dsn, "steady-probe")
        self.readings: list[Reading] = []
        self._stop_event = threading.Event()

    def read(self) -> Reading:
        row = self.conn.execute(STATE_SQL).fetchone()
        assert row is not None
        return Reading(time.time(), int(row[0]), int(row[1]))

    def run(self) -> None:
        while not self._stop_event.wait(PROBE_EVERY):
            self.readings.append(self.read())

    def stop(self) -> list[Reading]:
        self._stop_event.set()
        self.join()
        self.conn.close()
        return self.readings


@dataclass
class Phase:
    """A stretch of a steady run: its bounds on both clocks and what was seen in it."""

    name: str
    client_start: float = 0.0
    client_end: float = 0.0
    server_start: Any = None
    server_end: Any = None
    cpu_start: dict[int, float] = field(default_factory=dict)
    db_cpu: float | None = None
    dead_start: int = 0
    dead_end: int = 0


class Phases:
    """Marks phase bounds on the client's clock, the server's clock and the backends' CPU."""

    def __init__(self, conn: psycopg.Connection[Any], cpu: BackendCpu, probe: Probe) -> None:
        self.conn = conn
        self.cpu = cpu
        self.probe = probe
        self.done: list[Phase] = []

    def _server_now(self) -> Any:
        row = self.conn.execute("SELECT clock_timestamp()").fetchone()
        assert row is not None
        return row[0]

    def _dead(self) -> int:
        row = self.conn.execute(STATE_SQL).fetchone()
        return int(row[1]) if row else 0

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[Phase]:
        p = Phase(name, client_start=time.time(), server_start=self._server_now(),
                  cpu_start=self.cpu.sample(), dead_start=self._dead())
        try:
            yield p
        finally:
            p.client_end = time.time()
            p.server_end = self._server_now()
            p.dead_end = self._dead()
            if self.cpu.local:
                now = self.cpu.sample()
                p.db_cpu = sum(v - p.cpu_start.get(pid, 0.0) for pid, v in now.items())
            self.done.append(p)


def completed_between(conn: psycopg.Connection[Any], start: Any, end: Any) -> int:
    """Jobs completed in [start, end) on the server's clock (the stats window's index)."""
    row = conn.execute("SELECT count(*) FROM forklift.jobs WHERE state = 'completed'"
                       " AND finished_at >= %s AND finished_at < %s", (start, end)).fetchone()
    return int(row[0]) if row else 0


def pickups_of(conn: psycopg.Connection[Any], sent: dict[int, float]) -> dict[int, float]:
    """Job id -> milliseconds from its commit (client clock) to its handler's start."""
    rows = conn.execute(
        "SELECT id, (result::text)::float8 FROM forklift.jobs"
        " WHERE id = ANY(%s) AND state = 'completed'", (list(sent),)
    ).fetchall()
    return {int(i): (float(started) - sent[int(i)]) * 1000 for i, started in rows}


def summary(conn: psycopg.Connection[Any], phase: Phase, sent: dict[int, float],
            picked: dict[int, float], readings: list[Reading]) -> dict[str, Any]:
    """What a phase showed: completion rate, pickup p50/p99 of the jobs sent in it, depth,
    dead tuples (level, most seen, growth per 1,000 jobs completed) and server CPU a job."""
    seconds = max(1e-9, phase.client_end - phase.client_start)
    done = completed_between(conn, phase.server_start, phase.server_end)
    ids = [i for i, at in sent.items() if phase.client_start <= at < phase.client_end]
    lat = [picked[i] for i in ids if i in picked]
    seen = [r for r in readings if phase.client_start <= r.at < phase.client_end]
    dead_seen = [r.dead for r in seen] or [phase.dead_end]
    return {
        "seconds": round(seconds, 1),
        "sent": len(ids),
        "completed": done,
        "rate": done / seconds,
        "pickup_p50_ms": pct(lat, 0.5) if lat else None,
        "pickup_p99_ms": pct(lat, 0.99) if lat else None,
        "not_picked_up": len(ids) - len(lat),
        "depth_max": max((r.depth for r in seen), default=0),
        "depth_end": seen[-1].depth if seen else 0,
        "dead_start": phase.dead_start,
        "dead_end": phase.dead_end,
        "dead_max": max(dead_seen),
        "dead_per_1000_jobs": ((phase.dead_end - phase.dead_start) / done * 1000) if done else None,
        "db_cpu_us_per_job": (phase.db_cpu / done * 1e6) if phase.db_cpu is not None and done
        else None,
    }
