"""Running one call of a batch handler and turning it into one outcome per job.

As :mod:`forklift._worker.execute` does for one attempt, nothing the handler does escapes:
a handler that raises fails every job of the call (classified as one job's handler raising
would be: ``Retry``, ``Fail`` and ``Snooze`` included); a returned value that is not a list
of one outcome per job fails every job with ``invalid_batch_result``; an exception in a job's
place fails that job alone, and a value there is that job's result. A job told to stop while
the call ran (an operator's cancel, a lost lease, the call's timeout, a drain) ends as that
signal says, whatever the handler returned for it.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Sequence
from concurrent.futures import Executor
from typing import Any

from forklift._app.batch_context import BatchContext
from forklift._base.errors import ForkliftError
from forklift._jobs.payload import to_json_text
from forklift._worker.batch_call import BatchCall
from forklift._worker.execute import classify, failed, stopped
from forklift._worker.running import Running
from forklift._worker.settle import Outcome

__all__ = ["run_call"]

_NOT_RETURNED = object()  # the handler raised, or was stopped before it returned


async def run_call(call: BatchCall[Running], executor: Executor, result_limit: int, worker_id: str
                   ) -> list[tuple[Running, Outcome | None]]:
    """Run the call's handler once over its jobs whose payloads validate; an outcome for
    every job of the call (None: nothing may be written, its lease was lost).

    Raises ``CancelledError`` only when the worker itself is being torn down.
    """
    kind = call.kind
    ends: list[tuple[Running, Outcome | None]] = []
    live: list[Running] = []
    payloads: list[Any] = []
    for rec in call.recs:
        if rec.ctx.cancel_reason is not None:  # told to stop before the call started
            ends.append((rec, stopped(rec.job, rec.ctx, kind)))
            continue
        if rec.job.undecodable is not None:
            ends.append((rec, failed(rec.job, rec.ctx, kind, None, "invalid_payload",
                                     message=rec.job.undecodable, terminal=True)))
            continue
        try:
            payloads.append(kind.payload.validate(rec.job.args, kind=kind.name))
        except ForkliftError as exc:
            ends.append((rec, failed(rec.job, rec.ctx, kind, None, "invalid_payload",
                                     message=exc.message, terminal=True)))
            continue
        live.append(rec)
    if not live:
        return ends
    call.started = live
    ctx = call.ctx = BatchContext(kind=kind.name, queue=kind.queue, worker_id=worker_id,
                                  jobs=[r.ctx for r in live])
    value: Any = _NOT_RETURNED
    raised: BaseException | None = None
    call.calling = True
    try:
        if kind.is_async:
            value = await kind.fn(ctx, payloads)
        else:
            loop = asyncio.get_running_loop()
            value = await loop.run_in_executor(
                executor, contextvars.copy_context().run, kind.fn, ctx, payloads)
    except asyncio.CancelledError as exc:
        if ctx.cancel_reason is None:
            task = asyncio.current_task()
            if task is not None and task.cancelling() > 0:
                raise  # the worker itself is being torn down
            raised = exc  # the handler's own (an inner task's): a failure
    except BaseException as exc:
        raised = exc
    finally:
        call.calling = False
    size = len(live)
    if raised is None and value is not _NOT_RETURNED and not _fits(value, size):
        message = (f"the batch handler returned {_shape(value)} for {size} jobs: it must return"
                   " a list with one result or exception per job, in the payloads' order")
        for rec in live:
            outcome = stopped(rec.job, rec.ctx, kind) if rec.ctx.cancel_reason else failed(
                rec.job, rec.ctx, kind, None, "invalid_batch_result", message=message,
                terminal=True)
            ends.append((rec, None if outcome is None else _sized(outcome, size)))
        return ends
    for i, rec in enumerate(live):
        if value is _NOT_RETURNED:
            if rec.ctx.cancel_reason is not None:
                outcome = stopped(rec.job, rec.ctx, kind, None)
            else:  # the handler raised (a call stopped as a whole has every job told)
                outcome = classify(rec.job, rec.ctx, kind,
                                   raised if raised is not None else RuntimeError("no outcome"))
        else:
            outcome = _one(rec, kind, value[i], result_limit)
            if rec.ctx.cancel_reason is not None:
                completed = outcome if outcome.next == "completed" else None
                outcome = stopped(rec.job, rec.ctx, kind, completed)
        ends.append((rec, _sized(outcome, size) if outcome is not None else None))
    return ends


def _one(rec: Running, kind: Any, item: Any, result_limit: int) -> Outcome:
    """One job's outcome from its place in the returned list."""
    if isinstance(item, BaseException):
        return classify(rec.job, rec.ctx, kind, item)
    try:
        if item is None and kind.result.accepts_none:
            text = "null"
        else:
            data = kind.result.dump(kind.result.validate(item, kind=kind.name),
                                    kind=kind.name, what="result")
            text = to_json_text(data, what="result", kind=kind.name, limit=result_limit)
    except ForkliftError as exc:
        return failed(rec.job, rec.ctx, kind, None, "invalid_result", message=exc.message,
                      terminal=True)
    return Outcome(rec.job.id, rec.job.fence, "completed", result=text, code="completed")


def _fits(value: Any, size: int) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, (str, bytes, bytearray)) \
        and len(value) == size


def _shape(value: Any) -> str:
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes, bytearray)):
        return f"{len(value)} {'item' if len(value) == 1 else 'items'}"
    return f"a {type(value).__name__}"


def _sized(outcome: Outcome, size: int) -> Outcome:
    """The call's size on the attempt's error entry, so ``jobs show`` says the attempt ran in
    a batch of that many (a completed attempt has no entry: nothing is written for it)."""
    if outcome.error is not None:
        outcome.error["batch"] = size
    return outcome
