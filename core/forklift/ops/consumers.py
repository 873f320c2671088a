"""Consumers for operators: list them with their lag and failure streak; pause, resume, or
move a consumer's cursor.

A consumer's row is recorded by its app (the first supervisor tick or run), so no app needs to
be loaded here. A pause holds from the next batch: a batch in flight finishes and commits, the
run then stops, and no supervisor tick starts another until it is resumed. Resume starts a run
at once (it enqueues the consumer's supervisor job, as ``schedules run-now`` would). Moving the
cursor waits for a batch in flight (the batch holds the consumer's row) and is refused as
``consumer_busy`` when that takes longer than the operator session's lock timeout: pause
first, then move it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from forklift._base.errors import ForkliftError, InvalidOption
from forklift._db.sqltext import render
from forklift._jobs import insert as _enq
from forklift.ops import audit
from forklift.ops.context import OpsContext
from forklift.ops.schedules import audited, required_name
from forklift.ops.shape import Shape

__all__ = [
    "ConsumerBusy", "ConsumerInfo", "ConsumerNotFound", "get_consumer", "list_consumers",
    "pause", "reset_cursor", "resume",
]


class ConsumerNotFound(ForkliftError):
    """No consumer of that name is recorded (a worker of its app records it)."""

    code = "consumer_not_found"


class ConsumerBusy(ForkliftError):
    """A batch in flight held the consumer past the lock timeout: pause it, then try again."""

    code = "consumer_busy"


_COLUMNS = """
c.name, c.kind, c.queue, c.supervisor, c.batch_size, c.cursor, c.cursor_at, c.items_done,
c.batches_done, c.read_at, c.caught_up_at, c.failures, c.last_error, c.failed_at, c.retry_at,
c.paused, c.paused_by, c.paused_at, c.pause_reason, r.id, r.state, now()
FROM {s}.consumers c
LEFT JOIN LATERAL (  -- the live run: its unique key (forklift._features.consumers.consumer)
    SELECT j.id, j.state FROM {s}.jobs j
    WHERE j.unique_key = 'consumer:' || c.name
      AND j.state IN ('scheduled', 'available', 'running', 'retryable')
    ORDER BY j.id DESC LIMIT 1
) r ON true
"""
LIST_SQL = "SELECT " + _COLUMNS + " ORDER BY c.name"
GET_SQL = "SELECT " + _COLUMNS + " WHERE c.name = %s"
LOCK_SQL = "SELECT cursor, paused, supervisor FROM {s}.consumers WHERE name = %s FOR UPDATE"
PAUSE_SQL = """
UPDATE {s}.consumers SET paused = true, paused_by = %s, paused_at = now(), pause_reason = %s,
    updated_at = now()
WHERE name = %s
"""
RESUME_SQL = """
UPDATE {s}.consumers SET paused = false, paused_by = NULL, paused_at = NULL, pause_reason = NULL,
    updated_at = now()
WHERE name = %s
"""
RESET_SQL = """
UPDATE {s}.consumers SET cursor = %s, cursor_at = now(), caught_up_at = NULL, updated_at = now()
WHERE name = %s
"""
SUPERVISOR_SQL = "SELECT kind, queue, args, priority, max_attempts FROM {s}.schedules WHERE name = %s"


@dataclass(frozen=True)
class ConsumerInfo(Shape):
    name: str
    kind: str
    queue: str
    #: The schedule that starts its runs (``<name>.supervisor``).
    supervisor: str | None
    batch_size: int
    #: ``paused``, ``backing_off`` (failed; the next run waits for its back-off), ``failing``
    #: (failed; retrying now), ``running``, ``waiting`` (a run is enqueued) or ``idle``.
    state: str
    #: Where the next read starts (None: the source's start), and when it last moved; its age
    #: is how far behind a consumer that is not caught up has fallen.
    cursor: Any
    cursor_at: datetime | None
    cursor_age_seconds: float | None
    items_done: int
    batches_done: int
    #: The last batch read, and the last read that found nothing new.
    read_at: datetime | None
    caught_up_at: datetime | None
    #: Batches failed in a row (0 after a success), the last error (code, type, message),
    #: when, and when the next run may start.
    failures: int
    last_error: dict[str, Any] | None
    failed_at: datetime | None
    retry_at: datetime | None
    paused: bool
    paused_by: str | None
    paused_at: datetime | None
    pause_reason: str | None
    #: The live run (running, or enqueued), if any.
    run_job_id: int | None
    run_state: str | None


def _state(paused: bool, failures: int, retry_at: datetime | None, run_state: str | None,
           now: datetime) -> str:
    if paused:
        return "paused"
    if failures > 0:
        return "backing_off" if retry_at is not None and retry_at > now else "failing"
    if run_state == "running":
        return "running"
    return "waiting" if run_state is not None else "idle"


def _error(entry: Any) -> dict[str, Any] | None:
    if not isinstance(entry, dict):
        return None
    return {k: entry.get(k) for k in ("code", "type", "message", "attempt", "at")}


def _info(row: tuple[Any, ...]) -> ConsumerInfo:
    (name, kind, queue, supervisor, batch_size, cursor, cursor_at, items_done, batches_done,
     read_at, caught_up_at, failures, last_error, failed_at, retry_at, paused, paused_by,
     paused_at, pause_reason, run_id, run_state, now) = row
    return ConsumerInfo(
        name=name, kind=kind, queue=queue, supervisor=supervisor, batch_size=batch_size,
        state=_state(paused, failures, retry_at, run_state, now), cursor=cursor,
        cursor_at=cursor_at,
        cursor_age_seconds=(now - cursor_at).total_seconds() if cursor_at is not None else None,
        items_done=items_done, batches_done=batches_done, read_at=read_at,
        caught_up_at=caught_up_at, failures=failures, last_error=_error(last_error),
        failed_at=failed_at, retry_at=retry_at, paused=paused, paused_by=paused_by,
        paused_at=paused_at, pause_reason=pause_reason, run_job_id=run_id, run_state=run_state,
    )


def _name(name: str) -> str:
    return required_name(name, "kind")


def list_consumers(conn: psycopg.Connection[Any], ctx: OpsContext) -> list[ConsumerInfo]:
    return [_info(r) for r in conn.execute(render(LIST_SQL, ctx.schema)).fetchall()]


def get_consumer(conn: psycopg.Connection[Any], ctx: OpsContext, name: str) -> ConsumerInfo:
    row = conn.execute(render(GET_SQL, ctx.schema), (_name(name),)).fetchone()
    if row is None:
        raise _not_found(conn, ctx, name)
    return _info(row)


def _not_found(conn: psycopg.Connection[Any], ctx: OpsContext, name: str) -> ConsumerNotFound:
    known = [r[0] for r in conn.execute(
        render("SELECT name FROM {s}.consumers ORDER BY name LIMIT 20", ctx.schema))]
    hint = f" (known: {', '.join(known)})" if known else (
        " (none recorded yet: a worker of the app records each consumer when it first runs)")
    return ConsumerNotFound(f"no consumer named {name!r}{hint}", consumer=name)


def _lock(c: psycopg.Connection[Any], ctx: OpsContext, name: str) -> tuple[Any, ...]:
    """The consumer's row, locked until the action's transaction ends (after a batch in
    flight commits); ConsumerNotFound or ConsumerBusy."""
    try:
        with c.transaction():  # a savepoint: a lock timeout leaves the audit row possible
            got = c.execute(render(LOCK_SQL, ctx.schema), (name,)).fetchone()
    except psycopg.errors.LockNotAvailable:
        raise ConsumerBusy(
            f"consumer {name!r} is in the middle of a batch that holds it: pause it (the batch"
            " finishes, the run stops), then try again", consumer=name) from None
    if got is None:
        raise _not_found(c, ctx, name)
    return tuple(got)


_REFUSALS = (ConsumerNotFound, ConsumerBusy)


def pause(conn: psycopg.Connection[Any], ctx: OpsContext, name: str, *,
          reason: str | None = None) -> ConsumerInfo:
    """Stop a consumer from its next batch (audited); it stays paused across deploys."""
    name, reason = _name(name), audit.clean_reason(reason)

    def body(c: psycopg.Connection[Any]) -> tuple[None, str]:
        _cursor, paused, _supervisor = _lock(c, ctx, name)
        if paused:
            return None, "noop: already paused"
        c.execute(render(PAUSE_SQL, ctx.schema), (ctx.actor, reason, name))
        return None, audit.OUTCOME_DONE

    audited(conn, ctx, "consumer.pause", {"consumer": name}, reason, body, _REFUSALS)
    return get_consumer(conn, ctx, name)


def resume(conn: psycopg.Connection[Any], ctx: OpsContext, name: str, *,
           reason: str | None = None) -> ConsumerInfo:
    """Let a paused consumer run again, starting a run at once (audited)."""
    name, reason = _name(name), audit.clean_reason(reason)

    def body(c: psycopg.Connection[Any]) -> tuple[None, str]:
        _cursor, paused, supervisor = _lock(c, ctx, name)
        if not paused:
            return None, "noop: not paused"
        c.execute(render(RESUME_SQL, ctx.schema), (name,))
        schedule = c.execute(render(SUPERVISOR_SQL, ctx.schema), (supervisor,)).fetchone() \
            if supervisor else None
        if schedule is not None:  # else the supervisor's first tick starts it
            kind, queue, args, priority, max_attempts = schedule
            _enq.insert_one(c, ctx.schema, _enq.Row(
                queue=queue, kind=kind, args=json.dumps(args), priority=priority,
                max_attempts=max_attempts, at=None, delay=0.0, unique_key=None, tags=[],
                meta=json.dumps({"consumer": name, "resumed_by": ctx.actor}), retry=None,
            ), "return_existing")
        return None, audit.OUTCOME_DONE

    audited(conn, ctx, "consumer.resume", {"consumer": name}, reason, body, _REFUSALS)
    return get_consumer(conn, ctx, name)


def reset_cursor(conn: psycopg.Connection[Any], ctx: OpsContext, name: str, *,
                 cursor: Any = None, reason: str | None = None) -> ConsumerInfo:
    """Move a consumer's cursor to ``cursor`` (None: the source's start, so everything is read
    again), audited with the cursor it replaced. Items between the two are read again (moved
    back) or never read (moved forward)."""
    name, reason = _name(name), audit.clean_reason(reason)
    try:
        json.dumps(cursor)
    except (TypeError, ValueError):
        raise InvalidOption(f"a cursor must be a JSON value, not {type(cursor).__name__}",
                            field="cursor") from None
    target: dict[str, Any] = {"consumer": name, "cursor": cursor}

    def body(c: psycopg.Connection[Any]) -> tuple[None, str]:
        old, _paused, _supervisor = _lock(c, ctx, name)
        target["previous"] = old
        if old == cursor:
            return None, "noop: already there"
        c.execute(render(RESET_SQL, ctx.schema), (Jsonb(cursor), name))
        return None, audit.OUTCOME_DONE

    audited(conn, ctx, "consumer.reset_cursor", target, reason, body, _REFUSALS)
    return get_consumer(conn, ctx, name)

