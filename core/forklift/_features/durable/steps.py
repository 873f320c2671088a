"""Durable steps: ``await ctx.step("charge", fn, *args)`` (``ctx.step_sync`` in a sync handler).

A step runs ``fn`` once per job: on its first success the result is stored in ``job_steps``,
fenced on the attempt's (job id, fence) in one statement, and every later attempt of the job (a
retry, a rescue after a crash, a requeue) returns the stored result without calling ``fn``. A
step that raises is recorded ``failed`` (scrubbed, like an error entry) and runs again on the
next attempt.

The value a step returns is the same on the first run and on a replay: validated against
``fn``'s return annotation when it has one (a dataclass, a model, ...), else its JSON (a tuple
comes back a list both times). A result that does not validate or serialise fails the step with
``invalid_result``, nothing stored. Within one run a name may be used once (``duplicate_step``);
a name is at most 200 characters of visible text (``invalid_step_name``). Both are refusals
that fail the attempt for good: they would repeat on every try.

The logic is written once, as a generator of :class:`Db` (database calls) and :class:`_Call`
(the step's function), with an async and a sync driver. The job's stored steps are read once per attempt, on the
first step it reaches: a job that uses no steps reads and writes nothing.
"""

from __future__ import annotations

import inspect
import json
import time
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass
from functools import lru_cache, partial
from typing import Any, get_type_hints

import psycopg

from forklift._base.errors import ForkliftError, InvalidName
from forklift._base.names import check_name
from forklift._base.scrub import error_entry
from forklift._db.sqltext import render
from forklift._features.durable import holds
from forklift._features.durable.errors import (
    DuplicateStep,
    InvalidStepName,
    InvalidStepResult,
    Park,
    StepLeaseLost,
)
from forklift._features.durable.runtime import AttemptSteps, Stored
from forklift._jobs.attempt import Attempt
from forklift._jobs.payload import Codec, to_json_text

# One statement per step: fenced on the attempt's lease; a completed step is never overwritten.
WRITE_SQL = """
INSERT INTO {s}.job_steps AS s (job_id, name, state, result, error, fence, attempt, started_at,
                                finished_at)
SELECT j.id, %(name)s, %(state)s, %(result)s::jsonb, %(error)s::jsonb, j.fence, j.attempt,
       now() - make_interval(secs => %(took)s), now()
FROM {s}.jobs j WHERE j.id = %(job)s AND j.fence = %(fence)s AND j.state = 'running'
ON CONFLICT (job_id, name) DO UPDATE SET
    state = EXCLUDED.state, result = EXCLUDED.result, error = EXCLUDED.error,
    fence = EXCLUDED.fence, attempt = EXCLUDED.attempt, started_at = EXCLUDED.started_at,
    finished_at = EXCLUDED.finished_at
WHERE s.state <> 'completed'
RETURNING EXISTS (SELECT FROM {s}.job_holds h WHERE h.job_id = %(job)s)
"""


@dataclass(frozen=True)
class Db:
    """A database call the driver runs on the worker's steps session."""

    op: Callable[[psycopg.AsyncConnection[Any]], Awaitable[Any]]


@dataclass(frozen=True)
class Load:
    """The job's stored steps (read in a batch with other attempts': Runtime.load)."""

    job_id: int


@dataclass(frozen=True)
class _Call:
    fn: Callable[..., Any]
    args: tuple[Any, ...]
    kwargs: dict[str, Any]


Op = Db | Load | _Call
Steps = Generator[Op, Any, Any]


async def _write(conn: psycopg.AsyncConnection[Any], *, schema: str, params: dict[str, Any]
                 ) -> bool:
    return await _store(conn, schema=schema, params=params) is not None


async def _store(conn: psycopg.AsyncConnection[Any], *, schema: str, params: dict[str, Any]
                 ) -> bool | None:
    """Whether the job is held by a pause (forklift._features.durable.holds), or None when
    nothing was stored (the lease is lost)."""
    cur = await conn.execute(render(WRITE_SQL, schema), params)
    row = await cur.fetchone()
    return None if row is None else bool(row[0])


def loaded(ctx: Attempt, state: AttemptSteps) -> Generator[Op, Any, dict[str, Stored]]:
    """The job's stored steps, read once per attempt, on the first step it reaches."""
    if state.stored is None:
        state.stored = yield Load(ctx.job_id)
    assert state.stored is not None
    return state.stored


def claim_name(state: AttemptSteps, name: object, what: str = "step name") -> str:
    """``name`` checked and marked used in this run (refusals: see the module)."""
    try:
        checked = check_name(name, "step", field=what)
    except InvalidName as exc:
        raise InvalidStepName(exc.message, **exc.detail) from None
    if checked in state.used:
        raise DuplicateStep(
            f"step {checked!r} was already used in this run: each step, sleep and wait of a job"
            " needs a name of its own", step=checked)
    state.used.add(checked)
    return checked


@lru_cache(maxsize=512)
def _codec(fn: Callable[..., Any]) -> Codec | None:
    """The codec of ``fn``'s return annotation, or None (plain JSON) when it has none."""
    try:
        hint = get_type_hints(fn).get("return", Any)
    except Exception:
        return None
    if hint is Any or hint is None or hint is type(None):
        return None
    try:
        return Codec(hint, what="step result")
    except Exception:
        return None


def _encode(fn: Callable[..., Any], name: str, value: Any, limit: int) -> tuple[str, Any]:
    """(JSON text to store, the value the step returns), or InvalidStepResult."""
    codec = _codec(fn)
    try:
        if codec is None:
            text = to_json_text(value, what="result", kind=f"step {name}", limit=limit)
            return text, json.loads(text)
        valid = codec.validate(value, kind=f"step {name}")
        data = codec.dump(valid, kind=f"step {name}", what="result")
        return to_json_text(data, what="result", kind=f"step {name}", limit=limit), valid
    except ForkliftError as exc:
        raise InvalidStepResult(exc.message, step=name) from None


def _decode(fn: Callable[..., Any], name: str, stored: Any) -> Any:
    codec = _codec(fn)
    if codec is None:
        return stored
    try:
        return codec.validate(stored, kind=f"step {name}")
    except ForkliftError as exc:  # the annotation changed since the result was stored
        raise InvalidStepResult(exc.message, step=name) from None


def _params(ctx: Attempt, name: str, state: str, took: float, *, result: str | None = None,
            error: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"job": ctx.job_id, "fence": ctx.fence, "name": name, "state": state,
            "result": result, "took": max(0.0, took),
            "error": json.dumps(error, default=str) if error is not None else None}


def _lost(name: str) -> StepLeaseLost:
    return StepLeaseLost(f"step {name!r} could not be stored: this attempt lost its lease",
                         step=name)


def _step(ctx: Attempt, state: AttemptSteps, name: object, fn: Callable[..., Any],
          args: tuple[Any, ...], kwargs: dict[str, Any]) -> Steps:
    checked = claim_name(state, name)
    schema = state.runtime.schema
    stored = yield from loaded(ctx, state)
    done = stored.get(checked)
    if done is not None and done.state == "completed":
        return _decode(fn, checked, done.result)
    began = time.monotonic()
    try:
        value = yield _Call(fn, args, kwargs)
        text, returned = _encode(fn, checked, value, state.runtime.payload_limit)
    except Exception as exc:
        code = exc.code if isinstance(exc, InvalidStepResult) else "error"
        entry = error_entry(exc, code=code, attempt=ctx.attempt, worker_id=ctx.worker_id)
        yield Db(partial(_write, schema=schema,
                         params=_params(ctx, checked, "failed", time.monotonic() - began,
                                        error=entry)))
        raise
    params = _params(ctx, checked, "completed", time.monotonic() - began, result=text)
    held = yield Db(partial(_store, schema=schema, params=params))
    if held is None:
        raise _lost(checked)
    stored[checked] = Stored("completed", json.loads(text))
    if held:  # paused: the step is kept, the attempt parks here (its next boundary)
        row = yield Db(partial(holds.park, schema=schema, job=ctx.job_id, fence=ctx.fence))
        if row is not None:
            raise Park(ctx.job_id, row[0])
    return returned


async def drive(state: AttemptSteps, steps: Steps) -> Any:
    """Run a step generator on the worker's loop (an async handler)."""
    reply: Any = None
    failure: BaseException | None = None
    while True:
        try:
            op = steps.throw(failure) if failure is not None else steps.send(reply)
        except StopIteration as stop:
            return stop.value
        failure = reply = None
        try:
            if isinstance(op, Db):
                reply = await state.runtime.call(op.op)
            elif isinstance(op, Load):
                reply = await state.runtime.load(op.job_id)
            else:
                reply = op.fn(*op.args, **op.kwargs)
                if inspect.isawaitable(reply):
                    reply = await reply
        except Exception as exc:
            failure = exc


def drive_sync(state: AttemptSteps, steps: Steps) -> Any:
    """Run a step generator in a sync handler's thread (database calls on the worker's loop)."""
    reply: Any = None
    failure: BaseException | None = None
    while True:
        try:
            op = steps.throw(failure) if failure is not None else steps.send(reply)
        except StopIteration as stop:
            return stop.value
        failure = reply = None
        try:
            if isinstance(op, Db):
                reply = state.runtime.call_sync(op.op)
            elif isinstance(op, Load):
                reply = state.runtime.load_sync(op.job_id)
            else:
                reply = op.fn(*op.args, **op.kwargs)
                if inspect.isawaitable(reply):
                    raise TypeError("ctx.step_sync takes a plain function; await ctx.step for"
                                    " a coroutine function")
        except Exception as exc:
            failure = exc


# The entry points take the attempt's step state from the context (``attempt_steps``), which
# knows the worker it runs on; a feature sees only the Attempt protocol.
async def step(ctx: Attempt, state: AttemptSteps, name: str, fn: Callable[..., Any],
               args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    return await drive(state, _step(ctx, state, name, fn, args, kwargs))


def step_sync(ctx: Attempt, state: AttemptSteps, name: str, fn: Callable[..., Any],
              args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    return drive_sync(state, _step(ctx, state, name, fn, args, kwargs))
