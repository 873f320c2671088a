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
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from forklift._db.sqltext import render
from forklift._features.backfill import backfill as bf
from forklift._jobs import insert as _enq
from forklift.ops import audit
from forklift.ops._backfill_info import (
    JOB_LIVE,
    LIVE,
    BackfillInfo,
    StartResult,
    backfill_name,
    effective_state,
    format_eta,
    get_backfill,
    history,
    list_backfills,
    not_found,
)
from forklift.ops.context import OpsContext
from forklift.ops.errors import InvalidFilter
from forklift.ops.schedules import audited

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

DEFINITION_SQL = """
SELECT code_hash, page_size, rate, queue, max_attempts, retry FROM {s}.backfills
WHERE name = %s FOR UPDATE
"""
LIVE_RUN_SQL = """
SELECT r.id, r.state, r.job_id, j.state FROM {s}.backfill_runs r
LEFT JOIN {s}.jobs j ON j.id = r.job_id
WHERE r.name = %s AND r.state IN """ + LIVE + " FOR UPDATE OF r"
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
    name, reason = backfill_name(name), audit.clean_reason(reason)
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
            raise not_found(c, ctx, name)
        code_hash, page_size, default_rate = d[0], d[1], d[2]
        last = c.execute(render(LAST_COMPLETED_SQL, ctx.schema), (name,)).fetchone()
        changed = last is not None and last[1] != code_hash
        live = c.execute(render(LIVE_RUN_SQL, ctx.schema), (name,)).fetchone()
        if live is not None:
            run = _Run(*live)
            state = effective_state(run.state, run.job_state)
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
            raise not_found(c, ctx, name)
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
    name, reason = backfill_name(name), audit.clean_reason(reason)

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
        if run.state == "running" and run.job_state in JOB_LIVE:
            return "noop: running"
        _set_state(c, ctx, run, "running")
        # Always a new job: an old one still winding down finds the run is no longer its own.
        _nudge(c, ctx, run.job_id)
        _enqueue_runner(c, ctx, run.id, backfill_name(name))
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
