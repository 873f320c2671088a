"""Enqueue: single (one transaction each), 16 concurrent producers, and bulk against COPY."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections import Counter

from forklift.cli.bench.measure import Bench, alternate, bound
from forklift.cli.bench.procs import noop, procs
from forklift.cli.bench.registry import scenario
from forklift.cli.bench.report import Figure, Target
from forklift.cli.bench.server import connect

PLAIN_INSERT = "INSERT INTO plain.jobs (kind, args) VALUES (%s, %s)"


@scenario("enqueue", figures=("enqueue",), order=30)
def enqueue(bench: Bench) -> list[Figure]:
    rounds = 4
    per = max(1, bench.sizes.enqueue_jobs // rounds)
    with bench.database("enqueue") as (dsn, conn), bound(dsn):
        for i in range(50):  # warm both paths: pool open, statements prepared
            noop.enqueue({"n": i})
            conn.execute(PLAIN_INSERT, ("bench.noop", json.dumps({"n": i})))

        def plain(r: int) -> None:
            for i in range(r * per, (r + 1) * per):
                conn.execute(PLAIN_INSERT, ("bench.noop", json.dumps({"n": i})))

        def mine(r: int) -> None:
            for i in range(r * per, (r + 1) * per):
                noop.enqueue({"n": i})

        t_plain, t_fl = alternate(rounds, plain, mine)
    total = per * rounds
    return [Figure("enqueue", "single enqueue, 1 transaction each", "jobs/s", total / t_fl,
                   total / t_plain, "INSERTs", rule=Target("ratio>=", 0.85),
                   detail={"jobs": total})]


class _Waits:
    """Samples the wait events of the producers' sessions while one side runs."""

    def __init__(self, dsn: str) -> None:
        self.conn = connect(dsn, "waits")
        self.counts: Counter[str] = Counter()
        self.samples = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> _Waits:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(0.005):
            rows = self.conn.execute(
                "SELECT coalesce(wait_event_type || ':' || wait_event, 'cpu') FROM pg_stat_activity"
                " WHERE datname = current_database() AND backend_type = 'client backend'"
                " AND state = 'active' AND pid <> pg_backend_pid()"
            ).fetchall()
            self.samples += 1
            self.counts.update(r[0] for r in rows)

    def take(self) -> dict[str, int]:
        out = dict(self.counts.most_common(6))
        self.counts.clear()
        return out


@scenario("enqueue_16", figures=("enqueue_16",), order=31)
def enqueue_16(bench: Bench) -> list[Figure]:
    """Concurrent producers (processes), one transaction each, against as many INSERT loops."""
    count, rounds = bench.sizes.producers, 4
    per = max(1, bench.sizes.producer_jobs // (count * rounds))
    waits: dict[str, Counter[str]] = {"plain": Counter(), "mine": Counter()}
    with bench.database("enqueue16") as (dsn, _conn), procs(
        "producer_main", dsn, count, stdin=subprocess.PIPE, stdout=subprocess.PIPE
    ) as producers:
        for p in producers:
            if not p.readline().startswith(b"ready"):
                p.check()
                raise RuntimeError("a producer did not start")
        sampler = _Waits(dsn)
        spent = {"plain": 0.0, "mine": 0.0}
        try:
            for _ in range(rounds):
                for side in ("plain", "mine"):
                    with sampler:
                        t0 = time.perf_counter()
                        for p in producers:
                            assert p.popen.stdin is not None
                            p.popen.stdin.write(f"{side} {per}\n".encode())
                            p.popen.stdin.flush()
                        for p in producers:
                            if not p.readline().startswith(b"done"):
                                raise RuntimeError("a producer stopped")
                        spent[side] += time.perf_counter() - t0
                    waits[side].update(sampler.take())
        finally:
            sampler.conn.close()
    total = per * count * rounds
    return [Figure("enqueue_16", f"enqueue, {count} concurrent producers", "jobs/s",
                   total / spent["mine"], total / spent["plain"], f"{count} INSERT loops",
                   rule=Target("ratio>=", 0.85),
                   detail={"jobs": total, "producers": count,
                           "wait_events_forklift": dict(waits["mine"].most_common(6)),
                           "wait_events_plain": dict(waits["plain"].most_common(6))})]


def _bulk(bench: Bench, key: str, call: int, jobs: int) -> Figure:
    """``enqueue_many`` of ``call`` jobs against COPY of as many rows, one transaction each."""
    calls = max(1, jobs // call)
    with bench.database(key) as (dsn, conn), bound(dsn):
        noop.enqueue_many([{"n": i} for i in range(100)])  # warm

        def items(r: int) -> list[dict[str, int]]:
            return [{"n": r * call + i} for i in range(call)]

        def plain(r: int) -> None:
            rows = items(r)
            with conn.transaction(), conn.cursor().copy(
                "COPY plain.jobs (kind, args) FROM STDIN"
            ) as copy:
                for item in rows:
                    copy.write_row(("bench.noop", json.dumps(item)))

        def mine(r: int) -> None:
            noop.enqueue_many(items(r))

        t_plain, t_fl = alternate(calls, plain, mine)
    total = calls * call
    return Figure(key, f"enqueue_many, {call:,} a call", "jobs/s", total / t_fl,
                  total / t_plain, f"COPY {call:,}s", rule=Target("ratio>=", 0.8),
                  detail={"jobs": total})


@scenario("bulk", figures=("bulk_1000", "bulk_10000"), order=40)
def bulk(bench: Bench) -> list[Figure]:
    sz = bench.sizes
    return [_bulk(bench, "bulk_1000", sz.copy_batch, sz.bulk_small_jobs),
            _bulk(bench, "bulk_10000", sz.bulk_call, sz.bulk_jobs)]
