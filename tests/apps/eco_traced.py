"""``apps.eco``'s app in a worker that traces: spans go, one JSON object a line, to the file named
by ``ECO_SPANS`` (an exporter of the SDK's kind, configured the ordinary way at import)."""

from __future__ import annotations

import os
from collections.abc import Sequence

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

from apps.eco import app

__all__ = ["app"]


class FileExporter(SpanExporter):
    def __init__(self, path: str) -> None:
        self.path = path

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with open(self.path, "a") as out:
            for span in spans:
                out.write(span.to_json(indent=None) + "\n")
        return SpanExportResult.SUCCESS


provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(FileExporter(os.environ["ECO_SPANS"])))
trace.set_tracer_provider(provider)
