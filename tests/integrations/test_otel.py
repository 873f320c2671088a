"""OpenTelemetry: producer spans at enqueue, consumer spans per attempt, joined through the row.

Spans are captured with the SDK's in-memory exporter in the test process, and exported to a
file by a real worker subprocess (``apps.eco_traced``): the trace crosses processes only
through the job row's ``traceparent``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from apps import eco
from eco_procs import Procs, procs
from helpers import wait_until
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from forklift import Forklift, JobContext, otel
from forklift.testing import drain

__all__ = ["procs"]


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    otel.use(provider)
    try:
        yield exporter
    finally:
        otel.reset()
        provider.shutdown()


def _traceparent(conn: psycopg.Connection[Any], job_id: int) -> str | None:
    row = conn.execute("SELECT traceparent FROM forklift.jobs WHERE id = %s", (job_id,)).fetchone()
    return row[0] if row else None


def test_without_a_tracer_provider_nothing_is_stored(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    otel.reset()
    assert otel.tracer() is None  # nothing configured a global provider in this process
    eco.app.use(dsn)
    one = eco.ok.enqueue({})
    many = eco.ok.enqueue_many([{}, {}])
    eco.app.close()
    assert [_traceparent(conn, i) for i in [one.id, *many]] == [None, None, None]


def test_enqueue_opens_a_producer_span_and_stores_its_traceparent(
    dsn: str, conn: psycopg.Connection[Any], spans: InMemorySpanExporter
) -> None:
    eco.app.use(dsn)
    tracer = otel.tracer()
    with tracer.start_as_current_span("request") as request:
        one = eco.ok.enqueue({"secret": eco.SECRET})
        many = eco.ok.enqueue_many([{}, {}, {}])
        with psycopg.connect(dsn) as tx:
            inside = eco.sync_ok.enqueue({}, conn=tx)
        batch, _ = eco.app.batch(eco.sync_ok, [{"n": 1}, {"n": 2}], caller="test")
    eco.app.close()
    by_name = {(s.name, dict(s.attributes or {})["forklift.job.kind"]): s
               for s in spans.get_finished_spans() if s.name != "request"}
    create, send = by_name["create eco", "eco.ok"], by_name["send eco", "eco.ok"]
    assert create.kind == trace.SpanKind.PRODUCER and send.kind == trace.SpanKind.PRODUCER
    assert create.parent is not None and create.parent.span_id == request.get_span_context().span_id
    assert dict(create.attributes or {}) == {
        "messaging.system": "forklift", "messaging.operation.type": "create",
        "messaging.operation.name": "create", "messaging.destination.name": "eco",
        "forklift.job.kind": "eco.ok"}
    stored = _traceparent(conn, one.id)
    assert stored is not None
    assert stored[:-3] == f"00-{create.context.trace_id:032x}-{create.context.span_id:016x}"
    bulk = {(_traceparent(conn, i) or "")[:-3] for i in many}  # one send span for the bulk
    assert bulk == {f"00-{send.context.trace_id:032x}-{send.context.span_id:016x}"}
    assert _traceparent(conn, inside.id) is not None  # the transactional path too
    targets = conn.execute("SELECT traceparent FROM forklift.jobs WHERE batch_id = %s",
                           (batch.id,)).fetchall()
    assert len(targets) == 2 and all(t[0] for t in targets)  # batch targets too
    assert eco.SECRET not in repr([s.to_json() for s in spans.get_finished_spans()])


def test_each_attempt_runs_in_a_consumer_span_current_in_the_handler(
    dsn: str, conn: psycopg.Connection[Any], spans: InMemorySpanExporter
) -> None:
    app = Forklift()
    seen: dict[str, Any] = {}

    @app.job(name="t.sync")
    def sync_job(ctx: JobContext, payload: dict[str, Any]) -> None:
        with otel.tracer().start_as_current_span("inner sync"):
            seen["sync"] = trace.get_current_span().get_span_context().trace_id

    @app.job(name="t.async", max_attempts=1)
    async def async_job(ctx: JobContext, payload: dict[str, Any]) -> None:
        with otel.tracer().start_as_current_span("inner async"):
            raise RuntimeError("no")

    app.use(dsn)
    a = app.enqueue("t.sync", {})
    b = app.enqueue("t.async", {})
    drain(app)
    app.close()
    got = {s.name: s for s in spans.get_finished_spans()}
    process = [s for s in spans.get_finished_spans() if s.name == "process default"]
    by_job = {dict(s.attributes or {})["messaging.message.id"]: s for s in process}
    ok, failed = by_job[str(a.id)], by_job[str(b.id)]
    assert ok.kind == trace.SpanKind.CONSUMER and ok.status.status_code == trace.StatusCode.UNSET
    assert got["inner sync"].parent.span_id == ok.context.span_id  # current in the thread too
    assert got["inner async"].parent.span_id == failed.context.span_id
    assert failed.status.status_code == trace.StatusCode.ERROR
    assert dict(failed.attributes or {})["error.type"] == "error"
    creates = {s.context.span_id: s for s in spans.get_finished_spans() if s.name == "create default"}
    for consumer in (ok, failed):
        assert consumer.parent is not None and consumer.parent.span_id in creates
        assert [link.context.span_id for link in consumer.links] == [consumer.parent.span_id]
    assert dict(ok.attributes or {})["forklift.job.attempt"] == 1
    assert isinstance(dict(ok.attributes or {})["forklift.job.fence"], int)


def test_the_trace_crosses_processes_through_the_row(
    dsn: str, conn: psycopg.Connection[Any], spans: InMemorySpanExporter, procs: Procs,
    tmp_path: Path,
) -> None:
    eco.app.use(dsn)
    ok = eco.ok.enqueue({"secret": eco.SECRET})
    fatal = eco.fatal.enqueue({})
    eco.app.close()
    producers = {s.name + ":" + str(dict(s.attributes or {})["forklift.job.kind"]): s
                 for s in spans.get_finished_spans()}
    out = tmp_path / "spans.jsonl"
    procs.start("--app", "apps.eco_traced:app", env={"FORKLIFT_DSN": dsn, "ECO_SPANS": str(out)})

    def exported() -> list[dict[str, Any]]:
        lines = out.read_text().splitlines() if out.exists() else []
        found = [json.loads(x) for x in lines]
        return found if len([s for s in found if s["name"] == "process eco"]) == 2 else []

    found = wait_until(exported, timeout=60, interval=0.1)
    consumers = {s["attributes"]["messaging.message.id"]: s for s in found
                 if s["name"] == "process eco"}
    for job, producer in ((ok, producers["create eco:eco.ok"]),
                          (fatal, producers["create eco:eco.fatal"])):
        c = consumers[str(job.id)]
        assert c["kind"] == "SpanKind.CONSUMER"
        assert c["context"]["trace_id"] == f"0x{producer.context.trace_id:032x}"
        assert c["parent_id"] == f"0x{producer.context.span_id:016x}"
        assert c["attributes"]["messaging.system"] == "forklift"
        assert c["attributes"]["messaging.destination.name"] == "eco"
        assert c["attributes"]["forklift.job.kind"] == job.kind
    assert consumers[str(fatal.id)]["status"]["status_code"] == "ERROR"
    assert consumers[str(fatal.id)]["attributes"]["error.type"] == "no_such_account"
    text = out.read_text()
    assert eco.SECRET not in text and eco.RESULT not in text and "closed" not in text
