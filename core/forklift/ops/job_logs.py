"""A job's attempt logs for operators: each attempt's lines (``ctx.log``, and the ``logging``
records of a kind that captures them), as the worker stored them with the attempt's outcome,
already scrubbed (forklift._jobs.attempt_log). Read by ``forklift jobs show`` (and its
``--json``) and the console's job detail."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg

from forklift._db.sqltext import render
from forklift.ops.shape import Shape

__all__ = ["MAX_ATTEMPTS", "JobLog", "line_text", "read"]

#: The most attempts' logs read for one job (the latest ones).
MAX_ATTEMPTS = 100

LOGS_SQL = """
SELECT attempt, written_at, lines FROM (
    SELECT id, attempt, written_at, lines FROM {s}.job_logs WHERE job_id = %s
    ORDER BY id DESC LIMIT %s
) l ORDER BY id
"""


@dataclass(frozen=True)
class JobLog(Shape):
    """One attempt's log."""

    attempt: int
    #: when the attempt's outcome (and this log with it) was written
    written_at: datetime
    #: ``{"at", "level", "message"}`` each, with ``logger`` (a captured record), ``fields``
    #: (``ctx.log``'s keywords) and ``capped`` (the last line, once a cap was hit) when set
    lines: list[dict[str, Any]]


def read(conn: psycopg.Connection[Any], schema: str, job_id: int) -> list[JobLog]:
    """The job's attempt logs, oldest attempt first."""
    rows = conn.execute(render(LOGS_SQL, schema), (job_id, MAX_ATTEMPTS)).fetchall()
    return [JobLog(r[0], r[1], list(r[2])) for r in rows]


def line_text(line: dict[str, Any]) -> str:
    """One line as plain text: time of day, level, logger, message, then ``key=value`` fields
    (what ``forklift jobs show`` and the console print; markup is the caller's to escape)."""
    at = str(line.get("at") or "")
    clock = at[11:23] if len(at) >= 23 else at
    level = str(line.get("level") or "").upper()
    logger = f" {line['logger']}:" if line.get("logger") else ""
    fields = line.get("fields") or {}
    extra = "".join(f" {k}={v}" for k, v in fields.items()) if isinstance(fields, dict) else ""
    return f"{clock} {level:<7}{logger} {line.get('message', '')}{extra}"
