"""Batches at 10,000 targets: time to submit and time to finish (prints figures; asserts nothing).

    /work/.venv/bin/python tests/benchmarks/bench_batches.py [--targets 10000] [--workers 2]
        [--concurrency 50] [--serial 1000]

The server: FORKLIFT_BENCH_DSN (a role that may CREATE DATABASE), else an embedded server under
FORKLIFT_BENCH_HOME (default: a directory in the system temp dir). Each scenario gets a fresh
database; ``--workers`` real worker subprocesses (``forklift worker``) run a trivial async
handler. Scenarios:

* plain: the same number of ordinary jobs through ``enqueue_many`` (the reference: no batch);
* parallel: one batch, every target released at once;
* parallel ×20: one batch with ``max_parallel=20`` (a target is released as each one settles);
* serial: ``--serial`` targets one at a time (each step is a settle, a release, a NOTIFY and a
  claim).

"finish" is ``max(finished_at) - min(created_at)`` of the targets, read from the database, so
process start-up is not counted; submit is the client's wall time of the call.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
from bench_stats import admin_dsn, with_db  # the same server and naming as the stats bench
from psycopg import sql

from forklift import Forklift, JobContext
from forklift._db.migrate import migrate
from forklift._features.batches import BatchLimits

HERE = Path(__file__).resolve().parent

app = Forklift(batch_limits=BatchLimits(max_targets=1_000_000, max_live=100))


@app.job(name="bench.target", max_attempts=3)
async def target(ctx: JobContext, item: dict[str, Any]) -> int:
    return int(item["n"]) * 2


@contextmanager
def fresh_db(admin: str, tag: str) -> Iterator[str]:
    name = f"forklift_bench_batches_{tag}_{os.getpid()}"
    with psycopg.connect(admin, autocommit=True) as a:
        a.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
        a.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    dsn = with_db(admin, name)
    try:
        migrate(dsn, "forklift")
        yield dsn
    finally:
        with psycopg.connect(admin, autocommit=True) as a:
            a.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                sql.Identifier(name)))


@contextmanager
def workers(dsn: str, n: int, concurrency: int, logs: Path) -> Iterator[None]:
    env = dict(os.environ, FORKLIFT_DSN=dsn, PYTHONPATH=str(HERE))
    procs = []
    for i in range(n):
        log = open(logs / f"worker-{i}.log", "wb")  # noqa: SIM115 - closed below
        procs.append((subprocess.Popen(
            [sys.executable, "-m", "forklift.cli.main", "worker", "--app", "bench_batches:app",
             "--concurrency", str(concurrency), "--log-level", "WARNING"],
            cwd=HERE, env=env, stdout=log, stderr=subprocess.STDOUT,
        ), log))
    try:
        with psycopg.connect(dsn, autocommit=True) as c:
            deadline = time.monotonic() + 60
            while c.execute("SELECT count(*) FROM forklift.workers").fetchone() != (n,):
                if time.monotonic() > deadline:
                    raise RuntimeError("workers did not register")
                time.sleep(0.05)
        yield
    finally:
        for p, _ in procs:
            p.terminate()
        for p, log in procs:
            p.wait(60)
            log.close()


def wait_for(conn: psycopg.Connection[Any], done: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise RuntimeError("timed out")
        time.sleep(0.05)


def span(conn: psycopg.Connection[Any], where: str, arg: Any) -> tuple[float, int]:
    row = conn.execute(
        "SELECT extract(epoch FROM max(finished_at) - min(created_at)), count(*)"
        f" FROM forklift.jobs WHERE {where}", (arg,)).fetchone()
    assert row is not None
    return float(row[0]), int(row[1])


def run(admin: str, label: str, n: int, args: argparse.Namespace, **batch: Any) -> None:
    with fresh_db(admin, label.replace(" ", "_")) as dsn, tempfile.TemporaryDirectory() as tmp:
        app.use(dsn)
        items = [{"n": i} for i in range(n)]
        with workers(dsn, args.workers, args.concurrency, Path(tmp)), \
                psycopg.connect(dsn, autocommit=True) as c:
            t0 = time.perf_counter()
            if label == "plain":
                app.kind("bench.target").enqueue_many(items)
            else:
                b, _ = app.batch("bench.target", items, caller=label, **batch)
            submit = time.perf_counter() - t0
            if label == "plain":
                wait_for(c, lambda: c.execute(
                    "SELECT count(*) FROM forklift.jobs WHERE state = 'completed'"
                ).fetchone() == (n,), args.timeout)
                took, count = span(c, "kind = %s", "bench.target")
                extra = ""
            else:
                wait_for(c, lambda: c.execute(
                    "SELECT state FROM forklift.batches WHERE id = %s", (b.id,)
                ).fetchone() != ("running",), args.timeout)
                took, count = span(c, "batch_id = %s", b.id)
                state = c.execute("SELECT state, completed, settlements FROM forklift.batches"
                                  " WHERE id = %s", (b.id,)).fetchone()
                extra = f"  -> {state[0]} ({state[1]:,} completed, settled {state[2]}x)"
        app.close()
        # A flush that deadlocked is retried by its worker (and logged): count them.
        deadlocks = sum(p.read_text(errors="replace").count("deadlock")
                        for p in Path(tmp).glob("worker-*.log"))
        print(f"{label:<14} {count:>7,} targets: submit {submit * 1000:8.1f} ms"
              f"  finish {took:7.2f} s  ({count / took:8.0f}/s){extra}"
              + (f"  [{deadlocks} deadlock retries]" if deadlocks else ""))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--targets", type=int, default=10_000)
    ap.add_argument("--serial", type=int, default=1_000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--concurrency", type=int, default=50)
    ap.add_argument("--timeout", type=float, default=600.0)
    args = ap.parse_args()
    admin = admin_dsn()
    print(f"{args.workers} worker(s) x concurrency {args.concurrency}; trivial async handler")
    run(admin, "plain", args.targets, args)
    run(admin, "parallel", args.targets, args)
    run(admin, "parallel x20", args.targets, args, max_parallel=20)
    run(admin, "serial", args.serial, args, mode="serial")


if __name__ == "__main__":
    main()
