"""Running one attempt and classifying what happened into an Outcome.

Nothing a handler does escapes this module: every exception, including BaseException other than
the worker's own cancellation, becomes an outcome with a failure code.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
from concurrent.futures import Executor
from typing import Any

from forklift._app.app import JobKind
from forklift._app.context import JobContext
from forklift._base.errors import ForkliftError, LockLost
from forklift._base.retry import Backoff, Fail, Retry, Snooze
from forklift._base.scrub import error_entry
from forklift._features.durable.errors import HandlerRefusal, Park
from forklift._jobs.log_capture import capturing
from forklift._jobs.payload import to_json_text
from forklift._jobs.payload_versions import (
    AHEAD_CODE,
    AHEAD_WAIT,
    UPCAST_CODE,
    UpcastFailed,
    ahead_message,
    version_of,
)
from forklift._worker.claim import Claimed
from forklift._worker.settle import Outcome


def backoff_for(job: Claimed, kind: JobKind[Any, Any] | None) -> Backoff:
    if job.retry:
        try:
            return Backoff.from_json(job.retry)
        except (ValueError, TypeError):
            pass
    return kind.retry if kind is not None else Backoff()


def _entry(
    job: Claimed,
    ctx: JobContext | None,
    kind: JobKind[Any, Any] | None,
    exc: BaseException | None,
    code: str,
    message: str | None = None,
) -> dict[str, Any]:
    return error_entry(
        exc,
        code=code,
        attempt=job.attempt,
        worker_id=ctx.worker_id if ctx else None,
        message=message,
        codes_only=kind is not None and kind.errors == "codes",
    )


def failed(
    job: Claimed,
    ctx: JobContext | None,
    kind: JobKind[Any, Any] | None,
    exc: BaseException | None,
    code: str,
    *,
    message: str | None = None,
    terminal: bool = False,
    delay: float | None = None,
) -> Outcome:
    """A failed attempt: dead when terminal or out of attempts, else retryable by backoff."""
    entry = _entry(job, ctx, kind, exc, code, message)
    if terminal or job.attempt >= job.max_attempts:
        return Outcome(job.id, job.fence, "dead", error=entry, code=code)
    wait = backoff_for(job, kind).delay(job.attempt) if delay is None else delay
    return Outcome(job.id, job.fence, "retryable", delay=wait, error=entry, code=code)


#: The message of an ``expired`` entry (the leader's sweep writes the same one).
EXPIRED_MESSAGE = "not started by its start-by deadline (expires): the handler did not run"


def expired(job: Claimed, ctx: JobContext | None) -> Outcome:
    """A claimed job whose start-by deadline passed: dead with ``expired``, its handler never
    started and the claim's attempt given back (``refund``), so its count is what it was."""
    entry = error_entry(None, code="expired", attempt=job.attempt - 1,
                        worker_id=ctx.worker_id if ctx else None,
                        message=EXPIRED_MESSAGE)
    return Outcome(job.id, job.fence, "dead", refund=1, error=entry, code="expired")


def ahead(job: Claimed, stored: int, reads: int) -> Outcome:
    """A claimed job newer than this worker reads: put back for a worker that reads it, after
    :data:`AHEAD_WAIT` (this worker would only claim it again), its attempt given back and a
    note saying which version it waits for. Never dead: a newer worker runs it. The note
    names no worker and no time, so the settle keeps one while old workers keep meeting the
    job."""
    entry = error_entry(None, code=AHEAD_CODE, attempt=job.attempt - 1,
                        message=ahead_message(stored, reads))
    # a note, the same at every meeting (no time): the settle keeps one (forklift._worker.settle)
    del entry["at"]
    entry["note"] = True
    return Outcome(job.id, job.fence, "scheduled", delay=AHEAD_WAIT, refund=1, error=entry,
                   code=AHEAD_CODE)


def readable_args(job: Claimed, ctx: JobContext, kind: JobKind[Any, Any]
                  ) -> tuple[Any, Outcome | None]:
    """The job's args as the kind's current payload version (upcast step by step when older),
    or the outcome that ends the attempt instead: the job is newer than the kind reads, or an
    upcast failed (``upcast_failed``, retried by the kind's backoff: a fixed upcaster deployed
    meanwhile may read it)."""
    stored = version_of(job.payload_version)
    reads = 1 if kind.versions is None else kind.versions.current
    if stored == reads:
        return job.args, None
    if stored > reads:
        return None, ahead(job, stored, reads)
    assert kind.versions is not None  # an older version than 1 is never stored
    try:
        return kind.versions.upcast(job.args, stored), None
    except UpcastFailed as exc:
        return None, failed(job, ctx, kind, exc.cause, UPCAST_CODE, message=exc.message)


def classify(
    job: Claimed, ctx: JobContext, kind: JobKind[Any, Any], exc: BaseException
) -> Outcome:
    if isinstance(exc, HandlerRefusal):  # a durable step's refusal: it would repeat every try
        return failed(job, ctx, kind, exc, exc.code, message=exc.message, terminal=True)
    if isinstance(exc, Snooze):
        return Outcome(job.id, job.fence, "scheduled", delay=exc.delay, refund=1, code="snoozed")
    if isinstance(exc, Retry):
        after = min(exc.after, backoff_for(job, kind).max)
        return failed(job, ctx, kind, exc, "error", message=exc.reason, delay=after)
    if isinstance(exc, Fail):
        if exc.code in kind.failure_codes:
            return failed(job, ctx, kind, exc, exc.code, message=exc.message, terminal=True)
        return failed(
            job, ctx, kind, exc, "internal_error",
            message=f"undeclared failure code {exc.code!r}", terminal=True,
        )
    if isinstance(exc, Exception):
        return failed(job, ctx, kind, exc, "error")
    return failed(job, ctx, kind, exc, "handler_exit")


async def run_attempt(
    job: Claimed,
    kind: JobKind[Any, Any] | None,
    ctx: JobContext,
    executor: Executor,
    result_limit: int,
) -> Outcome | None:
    """Run one attempt. Returns None when the lease was lost or the handler parked the job
    (nothing may be written).

    Raises ``CancelledError`` only when the worker itself is being torn down.
    """
    if job.undecodable is not None:
        return failed(job, ctx, kind, None, "invalid_payload", message=job.undecodable,
                      terminal=True)
    if kind is None:
        return failed(
            job, ctx, None, None, "unknown_kind",
            message=f"no handler for kind {job.kind!r} in this worker", terminal=True,
        )
    args = job.args
    if job.payload_version is not None or kind.versions is not None:
        args, refused = readable_args(job, ctx, kind)
        if refused is not None:
            return refused
    try:
        payload = kind.payload.validate(args, kind=kind.name)
    except ForkliftError as exc:
        return failed(job, ctx, kind, None, "invalid_payload", message=exc.message, terminal=True)

    completed: Outcome | None = None
    if kind.capture_logs:
        # The attempt runs in a context of its own (and a sync handler in a copy of it): its
        # logging records go to its log alone (forklift._jobs.log_capture).
        capturing.set(ctx.attempt_log)
    try:
        if kind.is_async:
            value = await kind.fn(ctx, payload)
        else:
            loop = asyncio.get_running_loop()
            # In a copy of the attempt's context, as asyncio.to_thread does: what a start
            # hook set (a trace span) is current in the handler's thread too.
            value = await loop.run_in_executor(
                executor, contextvars.copy_context().run, kind.fn, ctx, payload)
        try:
            if value is None and kind.result.accepts_none:
                text = "null"  # what the three steps below make of None, without them
            else:
                data = kind.result.dump(kind.result.validate(value, kind=kind.name),
                                        kind=kind.name, what="result")
                text = to_json_text(data, what="result", kind=kind.name, limit=result_limit)
        except ForkliftError as exc:
            completed = failed(
                job, ctx, kind, None, "invalid_result", message=exc.message, terminal=True
            )
        else:
            completed = Outcome(job.id, job.fence, "completed", result=text, code="completed")
    except Park:
        return None  # ctx.sleep / wait_for_event parked the job itself: nothing more to write
    except asyncio.CancelledError as exc:
        if ctx.cancel_reason is None:
            task = asyncio.current_task()
            if task is not None and task.cancelling() > 0:
                raise  # the worker itself is being torn down
            # The handler raised CancelledError of its own (an inner task's): a failure.
            return classify(job, ctx, kind, exc)
    except BaseException as exc:
        if ctx.cancel_reason is None:
            return classify(job, ctx, kind, exc)
        if ctx.cancel_reason == "lock_lost" and isinstance(exc, LockLost):
            return failed(job, ctx, kind, exc, "lock_lost", message=exc.message)
    return stopped(job, ctx, kind, completed)


def stopped(
    job: Claimed,
    ctx: JobContext,
    kind: JobKind[Any, Any] | None,
    completed: Outcome | None = None,
    *,
    abandoned: bool = False,
) -> Outcome | None:
    """The outcome of an attempt, given why (if at all) its handler was told to stop.

    Once the worker has signalled the attempt (drain cutoff, cancel, timeout, lease lost), the
    signal decides, whatever the handler then did: a handler that stops when told and returns
    has not finished its work. What it returned is kept as the attempt's partial result.
    ``completed`` is what the handler produced when it returned normally; ``abandoned`` says
    the handler is still running and is being left behind by a draining worker.
    """
    reason = ctx.cancel_reason
    if reason is None:
        assert completed is not None
        return completed
    if reason == "lease_lost":
        return None
    if reason == "lock_lost":  # unless the handler caught LockLost and returned
        return completed or failed(
            job, ctx, kind, None, "lock_lost",
            message="a lock the handler held was lost (its lease ran out or was taken) before"
                    " the handler finished",
        )
    if reason == "cancelled":
        outcome = Outcome(
            job.id, job.fence, "cancelled",
            error=_entry(job, ctx, kind, None, "cancelled", "cancelled by an operator"),
            code="cancelled",
        )
    elif reason == "interrupted":
        # A drain is not the job's fault: the attempt does not count.
        message = "the worker shut down before the job finished"
        if abandoned:
            message += "; the handler ignored the signal and was abandoned with the process"
        outcome = Outcome(
            job.id, job.fence, "retryable", refund=1,
            error=_entry(job, ctx, kind, None, "interrupted", message),
            code="interrupted",
        )
    else:
        timeout = kind.timeout if kind is not None else None
        outcome = failed(
            job, ctx, kind, None, "timeout",
            message=f"the attempt ran longer than its timeout of {timeout}s",
        )
    if completed is not None and completed.next == "completed":
        outcome.partial = completed.result
    return outcome


def with_log(outcome: Outcome, ctx: JobContext, job: Claimed) -> None:
    """Give the outcome the attempt's log, when its handler logged anything: an attempt that
    logged nothing costs its write nothing (forklift._worker.settle)."""
    lines = ctx._log.stored() if ctx._log is not None else None
    if lines is not None:
        outcome.logs = (job.attempt, lines)


def progress_json(value: Any) -> str | None:
    """JSON text PostgreSQL's jsonb accepts, or None when the value is not JSON at all.

    NUL characters are dropped and lone surrogates escaped (jsonb refuses both), so a
    handler's progress note can never make the write that carries it fail.
    """
    try:
        text = json.dumps(value, allow_nan=False, default=str, ensure_ascii=False)
        if "\\u0000" in text or not _encodable(text):
            text = json.dumps(_storable(value), allow_nan=False, default=str, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        return None
    return text if _encodable(text) and "\\u0000" not in text else None


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _text(s: str) -> str:
    return s.replace("\x00", "").encode("utf-8", "backslashreplace").decode("utf-8")


def _storable(value: Any) -> Any:
    if isinstance(value, str):
        return _text(value)
    if isinstance(value, dict):
        return {_text(str(k)): _storable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_storable(v) for v in value]
    return value
