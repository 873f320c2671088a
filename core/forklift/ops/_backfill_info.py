"""What a backfill run looks like to an operator: its row, its pace and ETA (read side).

:mod:`forklift.ops.backfills` re-exports what is public here, beside the actions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import psycopg

from forklift._db.sqltext import render
from forklift._features.backfill import backfill as bf
from forklift.ops.context import OpsContext
from forklift.ops.schedules import required_name
from forklift.ops.shape import Shape

LIVE = "('running', 'paused', 'failed')"
JOB_LIVE = ("scheduled", "available", "running", "retryable")

_RUN_COLUMNS = """
r.id, r.state, r.cursor, r.start_cursor, r.rate, r.page_size, r.pages_done, r.items_done,
r.total, r.pace, r.last_error, r.error_count, r.code_hash, r.job_id, r.started_by, r.paused_by,
r.paused_at, r.created_at, r.updated_at, r.finished_at, extract(epoch FROM r.created_at)::float8,
j.state
"""
LIST_SQL = """
WITH names AS (SELECT name FROM {s}.backfills UNION SELECT DISTINCT name FROM {s}.backfill_runs)
SELECT n.name, d.code_hash, d.rate, d.page_size, c.code_hash, extract(epoch FROM now())::float8,
""" + _RUN_COLUMNS + """
FROM names n
LEFT JOIN {s}.backfills d ON d.name = n.name
LEFT JOIN LATERAL (
    SELECT * FROM {s}.backfill_runs x WHERE x.name = n.name
    ORDER BY x.state IN """ + LIVE + """ DESC, x.id DESC LIMIT 1
) r ON true
LEFT JOIN LATERAL (
    SELECT y.code_hash FROM {s}.backfill_runs y WHERE y.name = n.name AND y.state = 'completed'
    ORDER BY y.id DESC LIMIT 1
) c ON true
LEFT JOIN {s}.jobs j ON j.id = r.job_id
WHERE %(name)s::text IS NULL OR n.name = %(name)s
ORDER BY n.name
"""
HISTORY_SQL = """
SELECT r.name, NULL::text, NULL::float8, NULL::int, NULL::text, extract(epoch FROM now())::float8,
""" + _RUN_COLUMNS + """
FROM {s}.backfill_runs r LEFT JOIN {s}.jobs j ON j.id = r.job_id
WHERE r.name = %s ORDER BY r.id DESC LIMIT %s
"""


@dataclass(frozen=True)
class BackfillInfo(Shape):
    name: str
    #: Whether an app declared it (and so whether it can be started without --app).
    declared: bool
    #: The declared definition's code differs from the code of its last completed run.
    changed: bool
    state: str
    run_id: int | None = None
    cursor: Any = None
    start_cursor: Any = None
    rate: float | None = None
    page_size: int | None = None
    pages_done: int = 0
    items_done: int = 0
    total: int | None = None
    #: items_done / total, 0..1, when a total is known.
    fraction: float | None = None
    items_per_s: float = 0.0
    pages_per_s: float = 0.0
    eta_seconds: float | None = None
    #: The ETA for people: "4m 10s", or "—" when unknown.
    eta: str = "—"
    last_error: dict[str, Any] | None = None
    error_count: int = 0
    job_id: int | None = None
    job_state: str | None = None
    started_by: str | None = None
    paused_by: str | None = None
    paused_at: datetime | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    finished_at: datetime | None = None
    code_hash: str | None = None
    #: Items per second in 2-second buckets over the last minute, oldest first (a sparkline).
    pace: list[float] = field(default_factory=list)


@dataclass(frozen=True)
class StartResult(Shape):
    #: ``started`` (a new run), ``existing`` (a live run already holds the name: nothing was
    #: done) or ``completed`` (it ran to the end before; refused without ``force``).
    outcome: str
    changed: bool
    backfill: BackfillInfo
    message: str


def format_eta(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    s = round(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m {s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h {s % 3600 // 60:02d}m"
    return f"{s // 86400}d {s % 86400 // 3600:02d}h"


def effective_state(state: str, job_state: str | None) -> str:
    if state != "running" or job_state in JOB_LIVE:
        return state
    return "failed" if job_state == "dead" else "stalled"


def info_of(row: tuple[Any, ...]) -> BackfillInfo:
    (name, def_hash, _def_rate, _def_page, completed_hash, now, run_id, state, cursor,
     start_cursor, rate, page_size, pages_done, items_done, total, pace, last_error, error_count,
     run_hash, job_id, started_by, paused_by, paused_at, created_at, updated_at, finished_at,
     created_epoch, job_state) = row
    changed = def_hash is not None and completed_hash is not None and def_hash != completed_hash
    if run_id is None:
        return BackfillInfo(name=name, declared=def_hash is not None, changed=changed,
                            state="never_run", code_hash=def_hash)
    state_now = effective_state(state, job_state)
    items_s, pages_s = bf.pace_rates(pace or [], now, created_epoch)
    eta_seconds = None
    if state_now == "running" and total is not None and items_s > 0:
        eta_seconds = max(0.0, (total - items_done) / items_s)
    fraction = None
    if total:
        fraction = min(1.0, items_done / total)
    elif state_now == "completed":
        fraction = 1.0
    return BackfillInfo(
        name=name, declared=def_hash is not None, changed=changed,
        state=state_now, run_id=run_id, cursor=cursor, start_cursor=start_cursor, rate=rate,
        page_size=page_size, pages_done=pages_done, items_done=items_done, total=total,
        fraction=fraction, items_per_s=items_s, pages_per_s=pages_s, eta_seconds=eta_seconds,
        eta=format_eta(eta_seconds), last_error=last_error, error_count=error_count,
        job_id=job_id, job_state=job_state, started_by=started_by, paused_by=paused_by,
        paused_at=paused_at, created_at=created_at, updated_at=updated_at,
        finished_at=finished_at, code_hash=run_hash,
        pace=bf.pace_series(pace or [], now),
    )


def backfill_name(name: str) -> str:
    return required_name(name, "backfill")


def list_backfills(conn: psycopg.Connection[Any], ctx: OpsContext) -> list[BackfillInfo]:
    """Every declared or run backfill with its live (else latest) run."""
    rows = conn.execute(render(LIST_SQL, ctx.schema), {"name": None}).fetchall()
    return [info_of(r) for r in rows]


def get_backfill(conn: psycopg.Connection[Any], ctx: OpsContext, name: str) -> BackfillInfo:
    name = backfill_name(name)
    row = conn.execute(render(LIST_SQL, ctx.schema), {"name": name}).fetchone()
    if row is None:
        raise not_found(conn, ctx, name)
    return info_of(row)


def history(
    conn: psycopg.Connection[Any], ctx: OpsContext, name: str, limit: int = 10
) -> list[BackfillInfo]:
    """The backfill's runs, newest first."""
    rows = conn.execute(render(HISTORY_SQL, ctx.schema), (backfill_name(name), max(1, min(limit, 100))))
    return [info_of(r) for r in rows.fetchall()]


def not_found(conn: psycopg.Connection[Any], ctx: OpsContext, name: str) -> bf.BackfillNotFound:
    known = [r[0] for r in conn.execute(
        render("SELECT name FROM {s}.backfills ORDER BY name LIMIT 20", ctx.schema))]
    hint = (f" (declared: {', '.join(known)})" if known else
            " (none recorded: pass --app, or run a worker of the app once)")
    return bf.BackfillNotFound(f"no backfill named {name!r}{hint}", backfill=name)
