"""End to end: no-op jobs through real worker processes against the plain claim loop."""

from __future__ import annotations

from forklift.cli.bench.measure import Bench
from forklift.cli.bench.registry import scenario
from forklift.cli.bench.report import Figure, Target
from forklift.cli.bench.runs import forklift_run, one_worker, plain_loop, plain_run


@scenario("e2e", figures=("e2e", "e2e_preloaded", "client_cpu", "db_cpu"), order=10)
def e2e(bench: Bench) -> list[Figure]:
    n = bench.sizes.e2e_jobs
    plain = plain_loop(bench)
    idle = one_worker(bench)
    pre = forklift_run(bench, 1, n, "w1pre", preloaded=True)
    return [
        Figure("e2e", "end-to-end no-op, 1 worker, idle then COPY", "jobs/s", idle.rate,
               plain.rate, "plain loop", rule=Target("ratio>=", 0.85),
               detail={"jobs": n, "forklift_seconds": idle.seconds, "plain_seconds": plain.seconds}),
        Figure("e2e_preloaded", "end-to-end no-op, 1 worker started on a backlog", "jobs/s",
               pre.rate, plain.rate, "plain loop", rule=Target("ratio>=", 0.85),
               detail={"jobs": n, "forklift_seconds": pre.seconds}),
        Figure("client_cpu", "worker process CPU per job", "µs/job", idle.per_job(idle.client_cpu),
               plain.per_job(plain.client_cpu), "plain loop", rule=Target("value<=", 20.0),
               detail={"note": "CPU of the worker process from listening to the last job"}),
        Figure("db_cpu", "PostgreSQL CPU per job", "µs/job", idle.per_job(idle.db_cpu),
               plain.per_job(plain.db_cpu), "plain loop",
               rule=Target("ratio<=", 1.5),
               detail={"note": "client backends of the scenario's database (psutil)"}),
    ]


@scenario("c1", figures=("c1",), order=20)
def c1(bench: Bench) -> list[Figure]:
    """Concurrency 1 and no local buffer: one job at a time, against a claim-1 loop."""
    n = bench.sizes.c1_jobs
    plain = plain_run(bench, n, "plain1", limit=1)
    mine = forklift_run(bench, 1, n, "c1", settings={"concurrency": 1, "prefetch_max": 0})
    return [Figure("c1", "concurrency 1, no buffer, idle then COPY", "jobs/s", mine.rate,
                   plain.rate, "claim-1 loop", rule=Target("ratio>=", 0.9),
                   detail={"jobs": n, "forklift_seconds": mine.seconds,
                           "plain_seconds": plain.seconds})]


def _workers(bench: Bench, count: int) -> Figure:
    n = bench.sizes.e2e_jobs
    one = one_worker(bench)
    many = forklift_run(bench, count, n, f"w{count}")
    return Figure(f"e2e_{count}w", f"end-to-end no-op, {count} worker processes", "jobs/s",
                  many.rate, one.rate, "1 worker", rule=Target("ratio>=", 1.0),
                  detail={"jobs": n, "seconds": many.seconds})


@scenario("e2e_4w", figures=("e2e_4w",), order=60)
def e2e_4w(bench: Bench) -> list[Figure]:
    return [_workers(bench, 4)]


@scenario("e2e_2w", figures=("e2e_2w",), order=61)
def e2e_2w(bench: Bench) -> list[Figure]:
    return [_workers(bench, 2)]


@scenario("e2e_8w", figures=("e2e_8w",), order=62)
def e2e_8w(bench: Bench) -> list[Figure]:
    return [_workers(bench, 8)]
