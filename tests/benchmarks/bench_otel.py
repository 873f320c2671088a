"""What tracing costs per job: forklift with no tracer provider vs. the SDK with an in-memory
exporter, same database, same run. Prints figures; asserts nothing.

    python tests/benchmarks/bench_otel.py --dsn "$DSN" [--jobs 3000]

Each round uses a fresh schema of the given database: single enqueues (one transaction each),
one bulk enqueue, and the worker (an in-process Worker running every job to the end, measured
from its start to the last settle).
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import psycopg

from forklift import Forklift, JobContext, migrate, otel
from forklift.testing import drain


def _app(dsn: str, schema: str) -> Forklift:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    migrate(dsn, schema)
    app = Forklift(dsn, schema=schema)

    @app.job(name="bench.noop")
    async def noop(ctx: JobContext, payload: dict[str, Any]) -> None:
        return None

    return app


def _round(dsn: str, jobs: int, traced: bool) -> dict[str, float]:
    exporter = None
    if traced:
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        otel.use(provider)
    else:
        otel.use(None)
    app = _app(dsn, "bench_otel")
    kind = app.kind("bench.noop")
    out: dict[str, float] = {}
    t = time.perf_counter()
    for _ in range(jobs):
        kind.enqueue({})
    out["single enqueue"] = (time.perf_counter() - t) / jobs
    t = time.perf_counter()
    kind.enqueue_many([{}] * jobs)
    out["bulk enqueue"] = (time.perf_counter() - t) / jobs
    t = time.perf_counter()
    report = drain(app, timeout=600, concurrency=20)
    out["worker (run + settle)"] = (time.perf_counter() - t) / (2 * jobs)
    assert report.completed == 2 * jobs
    if exporter is not None:
        out["spans"] = float(len(exporter.get_finished_spans()))
    app.close()
    otel.reset()
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dsn", required=True)
    parser.add_argument("--jobs", type=int, default=3000)
    args = parser.parse_args()
    _round(args.dsn, 200, False)  # warm up
    off = _round(args.dsn, args.jobs, False)
    on = _round(args.dsn, args.jobs, True)
    print(f"{'per job':24} {'no provider':>12} {'in-memory':>12} {'cost':>10}")
    for key in ("single enqueue", "bulk enqueue", "worker (run + settle)"):
        print(f"{key:24} {off[key] * 1e6:10.1f}us {on[key] * 1e6:10.1f}us"
              f" {(on[key] - off[key]) * 1e6:8.1f}us")
    print(f"spans exported: {on['spans']:.0f}")


if __name__ == "__main__":
    main()
