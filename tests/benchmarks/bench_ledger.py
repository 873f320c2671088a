"""Postings and partition upkeep: what each costs (prints figures; asserts nothing).

    python tests/benchmarks/bench_ledger.py [--postings 1000] [--concurrency 10]

The server is bench_stats.py's (FORKLIFT_BENCH_DSN, else an embedded server under
FORKLIFT_BENCH_HOME), a fresh database dropped at the end. Figures:

- ``post()`` of new postings (three lines each) and of replays, one after another on one
  connection: a new posting is one INSERT in its transaction, a replay an INSERT that inserts
  nothing and the SELECT that compares the stored lines;
- the same postings as jobs run by one worker (its wall time from start to the last job
  completed, so the worker's start is included);
- partition upkeep's plan of a monthly table with ten years of partitions, and a run that
  finds nothing to do.
"""

from __future__ import annotations

import argparse
import asyncio
import threading
import time
from datetime import UTC, datetime
from typing import Any

import psycopg
from bench_health import scratch_db

from forklift import Forklift, Worker
from forklift.ledger import TableBook, ledger
from forklift.partitions import PartitionedTable, partitions


def posting(i: int) -> dict[str, Any]:
    return {"key": f"order-{i}", "entries": [
        {"account": "cash", "amount": {"minor": 100 + i, "currency": "EUR"}},
        {"account": "fees", "amount": {"minor": 3, "currency": "EUR"}},
        {"account": "sales", "amount": {"minor": -(103 + i), "currency": "EUR"}},
    ]}


def per(label: str, seconds: float, n: int) -> None:
    print(f"{label}: {n:,} in {seconds:.2f}s, {seconds / n * 1000:.2f} ms each,"
          f" {n / seconds:,.0f}/s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--postings", type=int, default=1000)
    ap.add_argument("--concurrency", type=int, default=10)
    args = ap.parse_args()
    n = args.postings

    with scratch_db("ledger") as dsn, psycopg.connect(dsn, autocommit=True) as c:
        app = Forklift(dsn, pool_size=args.concurrency)
        book = TableBook()
        book.create(c)
        kind = ledger(app, name="bench.post", book=book)
        t0 = time.perf_counter()
        for i in range(n):
            kind.post(posting(i), conn=c)
        per("post(), new", time.perf_counter() - t0, n)
        t0 = time.perf_counter()
        for i in range(n):
            kind.post(posting(i), conn=c)
        per("post(), replay", time.perf_counter() - t0, n)

        ids = [kind.enqueue(posting(n + i)).id for i in range(n)]
        worker = Worker(app, concurrency=args.concurrency)
        thread = threading.Thread(target=lambda: asyncio.run(worker.run()), daemon=True)
        t0 = time.perf_counter()
        thread.start()
        while True:
            row = c.execute("SELECT count(*) FROM forklift.jobs WHERE id = ANY(%s) AND state"
                            " = 'completed'", (ids,)).fetchone()
            if row and row[0] == n:
                break
            time.sleep(0.02)
        per(f"as jobs, one worker of concurrency {args.concurrency}",
            time.perf_counter() - t0, n)
        loop = worker._loop
        if loop is not None:
            loop.call_soon_threadsafe(worker.drain)
        thread.join(60)
        check = book.check(c)
        print(f"book: balanced={check.balanced}, {check.currencies[0].postings:,} postings")

        c.execute("CREATE TABLE events (at timestamptz NOT NULL) PARTITION BY RANGE (at)")
        upkeep = partitions(app, [PartitionedTable("events", ahead=3)], cron=None)
        now = datetime(2026, 1, 15, tzinfo=UTC)
        t0 = time.perf_counter()
        [made] = upkeep.run(now=now, from_=datetime(2016, 1, 1, tzinfo=UTC), conn=c)
        print(f"partitions: created {len(made.created)} in {time.perf_counter() - t0:.2f}s")
        t0 = time.perf_counter()
        for _ in range(20):
            upkeep.plan(now=now, conn=c)
        print(f"partitions: plan over {len(made.created)} partitions,"
              f" {(time.perf_counter() - t0) / 20 * 1000:.1f} ms")
        t0 = time.perf_counter()
        [again] = upkeep.run(now=now, conn=c)
        print(f"partitions: a run with nothing to do, {(time.perf_counter() - t0) * 1000:.1f} ms"
              f" (created {len(again.created)}, dropped {len(again.dropped)})")
        app.close()


if __name__ == "__main__":
    main()
