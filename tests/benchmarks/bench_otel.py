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


def _span_work(n: int) -> tuple[float, float]:
    """The tracing work alone, per job, without a database: a producer span (start, inject,
    end) and a consumer span (extract, start with a link, make current in a context, end)."""
    import contextvars

    from opentelemetry import context as otel_context
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import Link, SpanKind

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
    otel.use(provider)
    t = time.perf_counter()
    parents = [otel.enqueue_traceparent("bench.noop", "default") for _ in range(n)]
    produce = (time.perf_counter() - t) / n
    tracer = otel.tracer()
    propagator = otel._propagator()
    t = time.perf_counter()
    for tp in parents:
        parent = propagator.extract({"traceparent": tp})
        linked = trace.get_current_span(parent).get_span_context()
        span = tracer.start_span("process default", context=parent, kind=SpanKind.CONSUMER,
                                 links=[Link(linked)], attributes={"messaging.system": "forklift"})
        ctx = contextvars.copy_context()
        ctx.run(otel_context.attach, trace.set_span_in_context(span))
        span.set_attribute("forklift.job.outcome", "completed")
        span.end()
    consume = (time.perf_counter() - t) / n
    otel.reset()
    return produce, consume


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
    produce, consume = _span_work(args.jobs)
    print(f"tracing work alone: producer span {produce * 1e6:.1f}us,"
          f" consumer span {consume * 1e6:.1f}us a job")


if __name__ == "__main__":
    main()
