"""Structured logs: one JSON object a line, with the job and worker a line is about.

``forklift worker --log-format json`` uses :func:`configure`; an app that runs a worker itself
calls ``forklift.logs.configure(format="json")`` (or puts :class:`JsonFormatter` on a handler of
its own). Each line has ``ts`` (UTC, ISO 8601), ``level``, ``logger`` and ``message``, plus
whichever of ``worker_id``, ``job_id``, ``kind``, ``queue``, ``attempt``, ``fence``, ``tenant``,
``enqueued_by``, ``state``, ``code`` the line concerns (``tenant`` and ``enqueued_by`` only for a
job that carries them). The worker's own lines carry them (``extra=`` from
:func:`job_fields`; its worker id from the context every one of its tasks runs in, so an async
handler's own lines carry the worker id too).

What a line never holds: payloads, results, progress, meta. An exception is shown as its type,
its message scrubbed of secrets the way the error history scrubs it, and its frames (file, line,
function; no locals, no source) -- never the raw traceback text.

Per-attempt lines (``forklift.job`` logger: started, and how it settled) are DEBUG, and the
worker only arranges for them when that logger is enabled for DEBUG when it starts, so they
cost nothing otherwise.
"""

from __future__ import annotations

import contextvars
import json
import logging
import sys
from datetime import UTC, datetime
from typing import IO, Any, Literal

from forklift._jobs import lifecycle
from forklift._jobs.lifecycle import job_fields

__all__ = ["FIELDS", "Format", "JsonFormatter", "attach", "configure", "current_worker",
           "job_fields"]

Format = Literal["text", "json"]
FIELDS = ("worker_id", "job_id", "kind", "queue", "attempt", "fence", "tenant", "enqueued_by",
          "state", "code")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

#: The worker whose task is running, if any (set once as the worker starts).
current_worker: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "forklift_worker", default=None)

job_log = logging.getLogger("forklift.job")


class JsonFormatter(logging.Formatter):
    """One JSON object per record (see the module docstring for the keys)."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        worker = current_worker.get()
        if worker is not None:
            out["worker_id"] = worker
        for key in FIELDS:
            value = record.__dict__.get(key)
            if value is not None:
                out[key] = value
        if record.exc_info and record.exc_info[1] is not None:
            out["error"] = _error(record.exc_info[1])
        return json.dumps(out, default=str, ensure_ascii=False)


def _error(exc: BaseException) -> dict[str, Any]:
    from forklift._base.scrub import error_entry

    entry = error_entry(exc, code="error", attempt=0)
    return {"type": entry.get("type"), "message": entry.get("message"),
            "traceback": entry.get("traceback")}


def configure(
    format: Format = "json", level: int | str = "INFO", stream: IO[str] | None = None
) -> logging.Handler:
    """Send every log record to ``stream`` (default stderr), as JSON lines or as text.

    Replaces the handlers of the root logger, like ``logging.basicConfig(force=True)``.
    """
    if format not in ("text", "json"):
        from forklift._base.errors import ConfigError

        raise ConfigError(f"log format must be 'text' or 'json', not {format!r}")
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if format == "json" else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
        old.close()
    root.addHandler(handler)
    root.setLevel(level.upper() if isinstance(level, str) else level)
    return handler


# -- the worker's side ----------------------------------------------------------------------------
def attach(life: lifecycle.Lifecycle) -> None:
    """Tag the worker's lines with its id; per-attempt lines when ``forklift.job`` is at DEBUG.

    Called once as the worker starts, in the context its services are created from, so every
    task of theirs (and every attempt's task) inherits the worker id.
    """
    current_worker.set(life.worker.id)
    if job_log.isEnabledFor(logging.DEBUG):
        life.on_start.append(_started)
        life.on_settle.append(_settled)


def _started(rec: lifecycle.Attempt) -> None:
    job_log.debug("job %s started", rec.job.id, extra=job_fields(rec.job))


def _settled(rec: lifecycle.Attempt, outcome: lifecycle.Settled) -> None:
    job_log.debug("job %s settled: %s", rec.job.id, outcome.next,
                  extra={**job_fields(rec.job), "state": outcome.next, "code": outcome.code})


lifecycle.observe(attach)
