"""Backfills for operators: start, pause, resume, cancel, change the rate, watch the pace.

Every action is audited in its own transaction with the change it records. Runs are read from
the database, so listing needs no app; starting needs the backfill's definition, which the
leader records (or pass ``definition=`` from a loaded app, as ``--app`` does).

A run's ``state`` here is what an operator needs to know, derived from the run row and its job:
``running``, ``paused``, ``failed`` (a page exhausted its retries, or the job died), ``stalled``
(running, but its job is gone: resume it), ``completed`` or ``cancelled``; ``never_run`` for a
declared backfill without runs.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from forklift import _backfill as bf
from forklift import _enqueue as _enq
from forklift._sqltext import render
from forklift.ops import audit
from forklift.ops.context import OpsContext
from forklift.ops.errors import InvalidFilter
from forklift.ops.schedules import audited, required_name
from forklift.ops.shape import Shape

__all__ = [
    "MAX_RATE",
    "MIN_SCALED_RATE",
    "BackfillInfo",
    "BackfillNotFound",
    "BackfillNotLive",
    "InvalidRate",
    "StartResult",
    "cancel",
    "format_eta",
    "get_backfill",
    "history",
    "list_backfills",
    "pause",
    "resume",
    "scale_rate",
    "set_rate",
    "start",
]

#: The fastest pace a backfill may be given, in pages per second.
MAX_RATE = bf.MAX_RATE
BackfillNotFound = bf.BackfillNotFound
BackfillNotLive = bf.BackfillNotLive
InvalidRate = bf.InvalidRate
_REFUSALS = (bf.BackfillError,)

_LIVE = "('running', 'paused', 'failed')"
_JOB_LIVE = ("scheduled", "available", "running", "retryable")

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
    ORDER BY x.state IN """ + _LIVE + """ DESC, x.id DESC LIMIT 1
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
DEFINITION_SQL = """
SELECT code_hash, page_size, rate, queue, max_attempts, retry FROM {s}.backfills
WHERE name = %s FOR UPDATE
"""
LIVE_RUN_SQL = """
SELECT r.id, r.state, r.job_id, j.state FROM {s}.backfill_runs r
LEFT JOIN {s}.jobs j ON j.id = r.job_id
WHERE r.name = %s AND r.state IN """ + _LIVE + " FOR UPDATE OF r"
LAST_COMPLETED_SQL = """
SELECT id, code_hash FROM {s}.backfill_runs WHERE name = %s AND state = 'completed'
ORDER BY id DESC LIMIT 1
"""
INSERT_RUN_SQL = """
INSERT INTO {s}.backfill_runs (name, cursor, start_cursor, rate, page_size, code_hash, started_by)
VALUES (%s, %s, %s, %s, %s, %s, %s) RETURNING id
"""
SET_JOB_SQL = "UPDATE {s}.backfill_runs SET job_id = %s, updated_at = now() WHERE id = %s"
SET_STATE_SQL = """
UPDATE {s}.backfill_runs SET state = %(state)s, updated_at = now(),
    finished_at = CASE WHEN %(state)s IN ('completed', 'cancelled') THEN now() END,
    paused_by = CASE WHEN %(state)s = 'paused' THEN %(actor)s END,
    paused_at = CASE WHEN %(state)s = 'paused' THEN now() END
WHERE id = %(id)s
"""
SET_RATE_SQL = "UPDATE {s}.backfill_runs SET rate = %s, updated_at = now() WHERE id = %s"
RATE_SQL = "SELECT rate FROM {s}.backfill_runs WHERE id = %s"
# A job whose run moved on (paused, cancelled, handed to a new job) should run now and find
# that out, rather than sit in the queue until its snooze or backoff ends.
NUDGE_SQL = """
UPDATE {s}.jobs SET run_at = now()
WHERE id = %s AND state = ANY(%s::text[]) AND run_at > now()
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


def _effective(state: str, job_state: str | None) -> str:
    if state != "running" or job_state in _JOB_LIVE:
        return state
    return "failed" if job_state == "dead" else "stalled"


def _info(row: tuple[Any, ...]) -> BackfillInfo:
    (name, def_hash, _def_rate, _def_page, completed_hash, now, run_id, state, cursor,
     start_cursor, rate, page_size, pages_done, items_done, total, pace, last_error, error_count,
     run_hash, job_id, started_by, paused_by, paused_at, created_at, updated_at, finished_at,
     created_epoch, job_state) = row
    changed = def_hash is not None and completed_hash is not None and def_hash != completed_hash
    if run_id is None:
        return BackfillInfo(name=name, declared=def_hash is not None, changed=changed,
                            state="never_run", code_hash=def_hash)
    effective = _effective(state, job_state)
    items_s, pages_s = bf.pace_rates(pace or [], now, created_epoch)
    eta_seconds = None
    if effective == "running" and total is not None and items_s > 0:
        eta_seconds = max(0.0, (total - items_done) / items_s)
    fraction = None
    if total:
        fraction = min(1.0, items_done / total)
    elif effective == "completed":
        fraction = 1.0
    return BackfillInfo(
        name=name, declared=def_hash is not None, changed=changed,
        state=effective, run_id=run_id, cursor=cursor, start_cursor=start_cursor, rate=rate,
        page_size=page_size, pages_done=pages_done, items_done=items_done, total=total,
        fraction=fraction, items_per_s=items_s, pages_per_s=pages_s, eta_seconds=eta_seconds,
        eta=format_eta(eta_seconds), last_error=last_error, error_count=error_count,
        job_id=job_id, job_state=job_state, started_by=started_by, paused_by=paused_by,
        paused_at=paused_at, created_at=created_at, updated_at=updated_at,
        finished_at=finished_at, code_hash=run_hash,
        pace=bf.pace_series(pace or [], now),
    )


def _name(name: str) -> str:
    return required_name(name, "backfill")


def list_backfills(conn: psycopg.Connection[Any], ctx: OpsContext) -> list[BackfillInfo]:
    """Every declared or run backfill with its live (else latest) run."""
    rows = conn.execute(render(LIST_SQL, ctx.schema), {"name": None}).fetchall()
    return [_info(r) for r in rows]


def get_backfill(conn: psycopg.Connection[Any], ctx: OpsContext, name: str) -> BackfillInfo:
    name = _name(name)
    row = conn.execute(render(LIST_SQL, ctx.schema), {"name": name}).fetchone()
    if row is None:
        raise _not_found(conn, ctx, name)
    return _info(row)


def history(
    conn: psycopg.Connection[Any], ctx: OpsContext, name: str, limit: int = 10
) -> list[BackfillInfo]:
    """The backfill's runs, newest first."""
    rows = conn.execute(render(HISTORY_SQL, ctx.schema), (_name(name), max(1, min(limit, 100))))
    return [_info(r) for r in rows.fetchall()]


def _not_found(conn: psycopg.Connection[Any], ctx: OpsContext, name: str) -> bf.BackfillNotFound:
    known = [r[0] for r in conn.execute(
        render("SELECT name FROM {s}.backfills ORDER BY name LIMIT 20", ctx.schema))]
    hint = (f" (declared: {', '.join(known)})" if known else
            " (none recorded: pass --app, or run a worker of the app once)")
    return bf.BackfillNotFound(f"no backfill named {name!r}{hint}", backfill=name)


def _enqueue_runner(c: psycopg.Connection[Any], ctx: OpsContext, run_id: int, name: str) -> int:
    d = c.execute(render(DEFINITION_SQL, ctx.schema), (name,)).fetchone()
    if d is None:
        raise bf.BackfillNotFound(f"backfill {name!r} is not declared", backfill=name)
    _hash, _page, _rate, queue, max_attempts, retry = d
    row = bf.runner_row(run_id, name, queue, max_attempts,
                        json.dumps(retry) if retry is not None else None)
    job = _enq.insert_one(c, ctx.schema, row, "return_existing")
    c.execute(render(SET_JOB_SQL, ctx.schema), (job.id, run_id))
    return job.id


def _nudge(c: psycopg.Connection[Any], ctx: OpsContext, job_id: int | None,
           states: tuple[str, ...] = ("scheduled", "retryable")) -> None:
    if job_id is not None:
        c.execute(render(NUDGE_SQL, ctx.schema), (job_id, list(states)))


def start(
    conn: psycopg.Connection[Any],
    ctx: OpsContext,
    name: str,
    *,
    from_cursor: Any = None,
    rate: float | None = None,
    force: bool = False,
    definition: bf.Backfill | None = None,
    reason: str | None = None,
) -> StartResult:
    """Start a run, idempotently: one live run per backfill.

    A live run (running, paused or failed) is returned as it is (``existing``; ``force`` then
    replaces a failed one only), except that a ``rate`` given is applied to it (audited as
    ``existing: rate 4 -> 1``): starting at a pace yields that pace. A backfill that completed before is not run again without
    ``force`` (``completed``). ``changed`` says whether its code differs from that last
    completed run's. ``from_cursor`` is where the first page starts (None: the beginning).
    """
    name, reason = _name(name), audit.clean_reason(reason)
    if rate is not None:
        rate = bf.check_rate(rate)
    if definition is not None and definition.name != name:
        raise InvalidFilter(f"the definition given is {definition.name!r}, not {name!r}")
    target: dict[str, Any] = {"backfill": name, "force": force}
    if rate is not None:
        target["rate"] = rate
    if from_cursor is not None:
        target["from"] = from_cursor

    def body(c: psycopg.Connection[Any]) -> tuple[tuple[str, bool, str], str]:
        if definition is not None:
            bf.sync_definitions_now(c, definition.app, ctx.schema, only=definition.name)
        d = c.execute(render(DEFINITION_SQL, ctx.schema), (name,)).fetchone()
        if d is None:
            raise _not_found(c, ctx, name)
        code_hash, page_size, default_rate = d[0], d[1], d[2]
        last = c.execute(render(LAST_COMPLETED_SQL, ctx.schema), (name,)).fetchone()
        changed = last is not None and last[1] != code_hash
        live = c.execute(render(LIVE_RUN_SQL, ctx.schema), (name,)).fetchone()
        if live is not None:
            run = _Run(*live)
            state = _effective(run.state, run.job_state)
            stuck = state in ("failed", "stalled")
            if not (force and stuck):
                hint = " (resume it, or start with --force to replace it)" if stuck else ""
                message = f"run {run.id} is already {state}{hint}"
                was = c.execute(render(RATE_SQL, ctx.schema), (run.id,)).fetchone()
                if rate is not None and was is not None and was[0] != rate:
                    # Asked for a pace: the live run takes it, as `backfills rate` would.
                    c.execute(render(SET_RATE_SQL, ctx.schema), (rate, run.id))
                    _nudge(c, ctx, run.job_id, ("scheduled",))
                    target["rate_was"] = was[0]
                    return (("existing", changed,
                             f"{message}; its rate is now {rate:g}/s (was {was[0]:g}/s)"),
                            f"existing: rate {was[0]:g} -> {rate:g}")
                return ("existing", changed, message), "noop: existing"
            _set_state(c, ctx, run, "cancelled")
            _nudge(c, ctx, run.job_id)
        elif last is not None and not force:
            note = "; its code changed since" if changed else ""
            return ("completed", changed,
                    f"run {last[0]} completed it{note}: pass --force to run it again"), "refused: completed"
        cursor = Jsonb(from_cursor) if from_cursor is not None else None
        inserted = c.execute(
            render(INSERT_RUN_SQL, ctx.schema),
            (name, cursor, cursor, rate or default_rate, page_size, code_hash, ctx.actor),
        ).fetchone()
        assert inserted is not None
        run_id = inserted[0]
        _enqueue_runner(c, ctx, run_id, name)
        target["run"] = run_id
        return ("started", changed, f"run {run_id} started"), audit.OUTCOME_DONE

    outcome, changed, message = audited(conn, ctx, "backfill.start", target, reason, body,
                                        _REFUSALS)
    return StartResult(outcome=outcome, changed=changed, backfill=get_backfill(conn, ctx, name),
                       message=message)


@dataclass(frozen=True)
class _Run:
    id: int
    state: str
    job_id: int | None
    job_state: str | None


def _live_run(c: psycopg.Connection[Any], ctx: OpsContext, name: str, verb: str) -> _Run:
    live = c.execute(render(LIVE_RUN_SQL, ctx.schema), (name,)).fetchone()
    if live is None:
        if c.execute(render("SELECT 1 FROM {s}.backfills WHERE name = %s", ctx.schema),
                     (name,)).fetchone() is None and c.execute(
                render("SELECT 1 FROM {s}.backfill_runs WHERE name = %s LIMIT 1", ctx.schema),
                (name,)).fetchone() is None:
            raise _not_found(c, ctx, name)
        raise bf.BackfillNotLive(
            f"cannot {verb} {name!r}: it has no running, paused or failed run"
            f" (start one with `forklift backfills start {name}`)", backfill=name)
    return _Run(*live)


def _on_live_run(
    conn: psycopg.Connection[Any],
    ctx: OpsContext,
    name: str,
    reason: str | None,
    verb: str,
    step: Callable[[psycopg.Connection[Any], _Run], str],
    **target: Any,
) -> BackfillInfo:
    """``step`` on the live run, audited as ``backfill.<verb>``; the backfill as it is after."""
    name, reason = _name(name), audit.clean_reason(reason)

    def body(c: psycopg.Connection[Any]) -> tuple[None, str]:
        return None, step(c, _live_run(c, ctx, name, verb))

    audited(conn, ctx, f"backfill.{verb}", {"backfill": name, **target}, reason, body, _REFUSALS)
    return get_backfill(conn, ctx, name)


def _set_state(c: psycopg.Connection[Any], ctx: OpsContext, run: _Run, state: str) -> None:
    c.execute(render(SET_STATE_SQL, ctx.schema), {"state": state, "actor": ctx.actor, "id": run.id})


def pause(
    conn: psycopg.Connection[Any], ctx: OpsContext, name: str, *, reason: str | None = None
) -> BackfillInfo:
    """Stop after the page in flight (if any); the cursor stays where it is."""

    def step(c: psycopg.Connection[Any], run: _Run) -> str:
        if run.state != "running":
            return f"noop: {run.state}"
        _set_state(c, ctx, run, "paused")
        _nudge(c, ctx, run.job_id, ("scheduled",))
        return audit.OUTCOME_DONE

    return _on_live_run(conn, ctx, name, reason, "pause", step)


def resume(
    conn: psycopg.Connection[Any], ctx: OpsContext, name: str, *, reason: str | None = None
) -> BackfillInfo:
    """Continue a paused, failed or stalled run from its checkpoint, on a fresh job."""

    def step(c: psycopg.Connection[Any], run: _Run) -> str:
        if run.state == "running" and run.job_state in _JOB_LIVE:
            return "noop: running"
        _set_state(c, ctx, run, "running")
        # Always a new job: an old one still winding down finds the run is no longer its own.
        _nudge(c, ctx, run.job_id)
        _enqueue_runner(c, ctx, run.id, _name(name))
        return audit.OUTCOME_DONE

    return _on_live_run(conn, ctx, name, reason, "resume", step)


def cancel(
    conn: psycopg.Connection[Any], ctx: OpsContext, name: str, *, reason: str | None = None
) -> BackfillInfo:
    """End the live run for good; a page in flight is rolled back. Start anew to run again."""

    def step(c: psycopg.Connection[Any], run: _Run) -> str:
        _set_state(c, ctx, run, "cancelled")
        _nudge(c, ctx, run.job_id)
        return audit.OUTCOME_DONE

    return _on_live_run(conn, ctx, name, reason, "cancel", step)


def set_rate(
    conn: psycopg.Connection[Any],
    ctx: OpsContext,
    name: str,
    rate: float,
    *,
    reason: str | None = None,
) -> BackfillInfo:
    """Change the pace (pages per second) of the live run; it applies from the next page."""
    value = bf.check_rate(rate)

    def step(c: psycopg.Connection[Any], run: _Run) -> str:
        c.execute(render(SET_RATE_SQL, ctx.schema), (value, run.id))
        _nudge(c, ctx, run.job_id, ("scheduled",))
        return audit.OUTCOME_DONE

    return _on_live_run(conn, ctx, name, reason, "rate", step, rate=value)


#: The slowest pace :func:`scale_rate` goes to, in pages per second (one page a minute and a bit).
MIN_SCALED_RATE = 0.01


def scale_rate(
    conn: psycopg.Connection[Any],
    ctx: OpsContext,
    name: str,
    factor: float,
    *,
    reason: str | None = None,
) -> BackfillInfo:
    """Multiply the live run's pace by ``factor`` from whatever it is when the change lands
    (the run's row is locked), so two quick "twice as fast" presses double it twice; kept
    between MIN_SCALED_RATE and MAX_RATE. The audit's outcome says from what to what."""
    value = float(factor)
    if not 0 < value < float("inf") or value == 1:
        raise bf.InvalidRate(f"a rate factor must be above 0 and not 1, not {factor!r}", rate=factor)

    def step(c: psycopg.Connection[Any], run: _Run) -> str:
        row = c.execute(render(RATE_SQL, ctx.schema), (run.id,)).fetchone()
        old = float(row[0]) if row else 0.0
        new = min(bf.MAX_RATE, max(MIN_SCALED_RATE, round(old * value, 4)))
        if new == old:
            return f"noop: rate already {old:g}/s"
        c.execute(render(SET_RATE_SQL, ctx.schema), (new, run.id))
        _nudge(c, ctx, run.job_id, ("scheduled",))
        return f"done: rate {old:g}/s -> {new:g}/s"

    return _on_live_run(conn, ctx, name, reason, "rate", step, factor=value)
