"""OpenTelemetry tracing (extra ``otel``: ``opentelemetry-api`` only).

Configure a tracer provider as usual (``opentelemetry.trace.set_tracer_provider(...)``, or the
auto-instrumentation agent), or hand forklift one with :func:`use`. forklift then:

- opens a producer span (``create <queue>``; one ``send <queue>`` span for a bulk enqueue of one
  kind) when a job is enqueued, inside whatever span is current, and stores its W3C
  ``traceparent`` on the job's row: single, bulk, transactional, batch and cron enqueues alike;
- runs each attempt in a consumer span (``process <queue>``), a child of that producer span and
  linked to it, current while the handler runs (sync handlers included), so the handler's own
  spans join the trace; attributes follow the messaging semantic conventions
  (``messaging.system`` = ``forklift``, ``messaging.operation.type``/``.name``,
  ``messaging.destination.name`` = the queue, ``messaging.message.id`` = the job id) plus
  ``forklift.job.kind``, ``.attempt``, ``.fence`` and ``.outcome``, and ``forklift.job.tenant``
  and ``.enqueued_by`` for a job that carries them (on the producer span too); an attempt that fails
  (retried or dead) sets the span's status to ERROR with its failure code (``error.type``).
  Payloads, results and error messages are never put on a span.

Whether a provider is configured is looked up once (the first enqueue or worker start) and
remembered; with none, enqueue and the worker pay one cached test and store nothing.
"""

from __future__ import annotations

import contextvars
import sys
from typing import Any

from forklift._jobs import lifecycle

SYSTEM = "forklift"
_UNKNOWN: Any = object()
_tracer: Any = _UNKNOWN  # the forklift tracer, None (tracing off), or not looked up yet


def use(provider: Any) -> None:
    """Trace with ``provider`` (an ``opentelemetry.trace.TracerProvider``; None: stop tracing)."""
    global _tracer
    _tracer = None if provider is None else provider.get_tracer("forklift", _version())


def reset() -> None:
    """Look the global tracer provider up again on next use (after configuring it late)."""
    global _tracer
    _tracer = _UNKNOWN


def tracer() -> Any:
    """forklift's tracer, or None when no tracer provider is configured (looked up once)."""
    global _tracer
    if _tracer is _UNKNOWN:
        _tracer = _detect()
    return _tracer


def _detect() -> Any:
    trace = sys.modules.get("opentelemetry.trace")
    if trace is None:  # nothing imported OpenTelemetry, so nothing configured it
        return None
    provider = trace.get_tracer_provider()
    if isinstance(provider, (trace.ProxyTracerProvider, trace.NoOpTracerProvider)):
        return None
    return provider.get_tracer("forklift", _version())


def _version() -> str:
    from forklift._base.version import VERSION

    return VERSION


_PROPAGATOR: Any = None


def _propagator() -> Any:
    global _PROPAGATOR
    if _PROPAGATOR is None:
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        _PROPAGATOR = TraceContextTextMapPropagator()
    return _PROPAGATOR


# -- enqueue ---------------------------------------------------------------------------------------
def enqueue_traceparent(kind: str, queue: str, *, bulk: bool = False,
                        tenant: str | None = None, enqueued_by: str | None = None) -> str | None:
    """A producer span for an enqueue of ``kind`` into ``queue``; its traceparent (or None)."""
    t = tracer()
    if t is None:
        return None
    from opentelemetry.trace import SpanKind

    operation = "send" if bulk else "create"
    attributes: dict[str, Any] = {
        "messaging.system": SYSTEM, "messaging.operation.type": operation,
        "messaging.operation.name": operation, "messaging.destination.name": queue,
        "forklift.job.kind": kind,
    }
    _attribution(attributes, tenant, enqueued_by)
    span = t.start_span(f"{operation} {queue}", kind=SpanKind.PRODUCER, attributes=attributes)
    try:
        from opentelemetry import trace

        carrier: dict[str, str] = {}
        _propagator().inject(carrier, context=trace.set_span_in_context(span))
        return carrier.get("traceparent")
    finally:
        span.end()


def _attribution(attributes: dict[str, Any], tenant: str | None, enqueued_by: str | None) -> None:
    """A job's tenant and actor as span attributes, when it carries them."""
    if tenant is not None:
        attributes["forklift.job.tenant"] = tenant
    if enqueued_by is not None:
        attributes["forklift.job.enqueued_by"] = enqueued_by


# -- the worker's side ----------------------------------------------------------------------------
def attach(life: lifecycle.Lifecycle) -> None:
    """Consumer spans for this worker's attempts, when tracing is on."""
    t = tracer()
    if t is None:
        return
    from opentelemetry import context as otel_context
    from opentelemetry import trace
    from opentelemetry.trace import Link, SpanKind, Status, StatusCode

    propagator = _propagator()
    spans: dict[int, Any] = {}
    worker = life.worker
    running = worker.running
    limit = 4 * (worker.concurrency + worker.prefetch_max) + 16

    def on_start(rec: lifecycle.Attempt) -> None:
        job = rec.job
        parent = propagator.extract({"traceparent": job.traceparent}) if job.traceparent else None
        links = []
        if parent is not None:
            linked = trace.get_current_span(parent).get_span_context()
            if linked.is_valid:
                links.append(Link(linked))
        attributes: dict[str, Any] = {
            "messaging.system": SYSTEM, "messaging.operation.type": "process",
            "messaging.operation.name": "process", "messaging.destination.name": job.queue,
            "messaging.message.id": str(job.id), "forklift.job.kind": job.kind,
            "forklift.job.attempt": job.attempt, "forklift.job.fence": job.fence,
        }
        _attribution(attributes, job.tenant, job.enqueued_by)
        span = t.start_span(f"process {job.queue}", context=parent, kind=SpanKind.CONSUMER,
                            links=links, attributes=attributes)
        if len(spans) >= limit:  # attempts that ended with no outcome (a lost lease)
            for fence in [f for f in spans if f not in running]:
                spans.pop(fence).end()
        spans[job.fence] = span
        # The attempt's task (and a sync handler's thread) runs in this context: the span is
        # current there, and only there.
        context = contextvars.copy_context()
        context.run(otel_context.attach, trace.set_span_in_context(span))
        rec.context = context

    def on_settle(rec: lifecycle.Attempt, outcome: lifecycle.Settled) -> None:
        span = spans.pop(rec.job.fence, None)
        if span is None:
            return
        span.set_attribute("forklift.job.outcome", outcome.next)
        if outcome.next in ("retryable", "dead"):  # a snooze or an operator's cancel is no failure
            code = outcome.code or "error"
            span.set_attribute("error.type", code)
            span.set_status(Status(StatusCode.ERROR, code))
        span.end()

    life.on_start.append(on_start)
    life.on_settle.append(on_settle)


lifecycle.observe(attach)
