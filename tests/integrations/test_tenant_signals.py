"""A job's tenant and who enqueued it, carried to its spans (producer and consumer) and to the
worker's JSON log lines about it; a job carrying neither gets neither attribute nor field."""

from __future__ import annotations

import io
import json
import logging
from typing import Any

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from test_logs import captured
from test_otel import spans

from forklift import Forklift, JobContext, logs
from forklift.testing import drain

__all__ = ["captured", "spans"]  # the fixtures, shared with test_logs and test_otel


def _app(dsn: str) -> Forklift:
    app = Forklift()

    @app.job(name="sig.work", tenant="org")
    def work(ctx: JobContext, payload: dict[str, Any]) -> None:
        logging.getLogger("app").info("working")

    app.use(dsn)
    return app


def test_spans_carry_tenant_and_actor(dsn: str, spans: InMemorySpanExporter) -> None:
    app = _app(dsn)
    tenanted = app.enqueue("sig.work", {"org": "acme"}, enqueued_by="user:7")
    plain = app.enqueue("sig.work", {})
    app.enqueue_many([("sig.work", {"org": "globex"})])
    drain(app)
    app.close()
    finished = spans.get_finished_spans()
    create = [dict(s.attributes or {}) for s in finished if s.name == "create default"]
    assert {(a.get("forklift.job.tenant"), a.get("forklift.job.enqueued_by")) for a in create} \
        == {("acme", "user:7"), (None, None), ("globex", None)}  # app.enqueue_many: a row each
    process = {dict(s.attributes or {})["messaging.message.id"]: dict(s.attributes or {})
               for s in finished if s.name == "process default"}
    assert len(process) == 3
    mine = process[str(tenanted.id)]
    assert (mine["forklift.job.tenant"], mine["forklift.job.enqueued_by"]) == ("acme", "user:7")
    assert "forklift.job.tenant" not in process[str(plain.id)]
    assert "forklift.job.enqueued_by" not in process[str(plain.id)]
    assert {a.get("forklift.job.tenant") for a in process.values()} == {"acme", "globex", None}


def test_job_log_lines_carry_tenant_and_actor(dsn: str, captured: io.StringIO) -> None:
    app = _app(dsn)
    tenanted = app.enqueue("sig.work", {"org": "acme"}, enqueued_by="user:7")
    plain = app.enqueue("sig.work", {})
    drain(app)
    app.close()
    lines = [json.loads(x) for x in captured.getvalue().splitlines() if x.strip()]
    about = {}
    for line in lines:
        if line["logger"] == "forklift.job":
            about.setdefault(line["job_id"], []).append(line)
    assert about[tenanted.id] and about[plain.id]  # started and settled, each
    assert all(x["tenant"] == "acme" and x["enqueued_by"] == "user:7" for x in about[tenanted.id])
    assert all("tenant" not in x and "enqueued_by" not in x for x in about[plain.id])
    assert "tenant" in logs.FIELDS and "enqueued_by" in logs.FIELDS
