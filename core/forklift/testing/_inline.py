"""Inline mode for unit tests: enqueue runs the job at once, in the caller, and stores nothing.

This BYPASSES THE QUEUE: no row, no claim, no lease, no retry, no database at all. What stays
real is everything around the handler: the payload is validated and serialised as enqueue does
(refusals raise the same errors), the handler runs through the worker's own attempt runner
(validated again from JSON, sync handlers in a thread, async ones awaited, the result validated
and serialised, exceptions classified into the same outcome and error entry). Use
:func:`forklift.testing.drain` where the queue itself is under test.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import itertools
import json
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from forklift._app.app import Forklift, JobKind
from forklift._app.context import JobContext
from forklift._jobs.insert import Row
from forklift._jobs.job import TERMINAL_STATES, Job


@dataclass
class InlineRuns:
    """Every job run inline so far, in order (ids are negative: they are not rows)."""

    jobs: list[Job] = field(default_factory=list)

    def of(self, kind: str) -> list[Job]:
        return [j for j in self.jobs if j.kind == kind]


class _Runner:
    def __init__(self, app: Forklift, propagate: bool) -> None:
        self.app = app
        self.propagate = propagate
        self.runs = InlineRuns()
        self.ids = itertools.count(-1, -1)
        self.lock = threading.Lock()
        self.pool = ThreadPoolExecutor(4, thread_name_prefix="forklift-inline")

    async def run(self, row: Row) -> Job:
        from forklift._worker.claim import Claimed
        from forklift._worker.execute import run_attempt

        kind = self.app.kind(row.kind)
        with self.lock:
            job_id = next(self.ids)
        args = json.loads(row.args)
        meta = json.loads(row.meta)
        claimed = Claimed(id=job_id, queue=row.queue, kind=row.kind, args=args, attempt=1,
                          max_attempts=row.max_attempts, fence=0,
                          retry=json.loads(row.retry) if row.retry else None, meta=meta,
                          batch_id=None, priority=row.priority,
                          payload_version=row.payload_version)
        raised: list[BaseException] = []
        ctx = JobContext(job_id=job_id, kind=row.kind, queue=row.queue, attempt=1,
                         max_attempts=row.max_attempts, fence=0, worker_id="inline", meta=meta,
                         on_progress=lambda p: None, on_publish=lambda v: None)
        outcome = await run_attempt(claimed, _catching(kind, raised), ctx, self.pool,
                                    self.app.payload_limit)
        assert outcome is not None  # only a lost lease gives none, and there is no lease
        now = datetime.now(UTC)
        job = Job(
            id=job_id, queue=row.queue, kind=row.kind, args=args, state=outcome.next,
            priority=row.priority, attempt=1 - outcome.refund, max_attempts=row.max_attempts,
            run_at=now, created_at=now, attempted_at=now,
            finished_at=now if outcome.next in TERMINAL_STATES else None, worker_id="inline",
            fence=0, errors=[outcome.error] if outcome.error else [],
            result=json.loads(outcome.result) if outcome.result is not None else None,
            tags=list(row.tags), meta=meta, tenant=row.tenant, enqueued_by=row.enqueued_by,
            payload_version=row.payload_version, weight=row.weight,
        )
        self.runs.jobs.append(job)
        if raised and self.propagate and outcome.next != "completed":
            raise raised[0]
        return job

    def run_sync(self, row: Row) -> Job:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.run(row))
        with ThreadPoolExecutor(1) as one:  # called from async code: not on its loop
            return one.submit(asyncio.run, self.run(row)).result()


def _one_of_batch(ctx: JobContext, out: Any) -> Any:
    """One job's outcome from a batch handler's list (it ran over that one job alone)."""
    if not isinstance(out, (list, tuple)) or len(out) != 1:
        raise InlineBatchResult(
            f"the batch handler of {ctx.kind} returned {out!r} for 1 job: it must return a"
            " list with one result or exception per job")
    if isinstance(out[0], BaseException):
        raise out[0]
    return out[0]


class InlineBatchResult(Exception):
    """A batch handler run inline returned something else than one outcome for its one job."""


def _batched(kind: JobKind[Any, Any]) -> Callable[..., Any]:
    """A batch kind's handler as a one-job handler: inline mode runs each job alone, in a
    call of its own (a :class:`BatchContext` of that one job)."""
    from forklift._app.batch_context import BatchContext

    fn = kind.fn

    def call(ctx: JobContext) -> BatchContext:
        return BatchContext(kind=kind.name, queue=ctx.queue, worker_id=ctx.worker_id, jobs=[ctx])

    if kind.is_async:
        async def run_async(ctx: JobContext, payload: Any) -> Any:
            return _one_of_batch(ctx, await fn(call(ctx), [payload]))

        return run_async

    def run(ctx: JobContext, payload: Any) -> Any:
        return _one_of_batch(ctx, fn(call(ctx), [payload]))

    return run


def _catching(kind: JobKind[Any, Any], raised: list[BaseException]) -> JobKind[Any, Any]:
    """The kind with a handler that remembers what it raised, for ``propagate``."""
    fn = kind.fn if kind.batch_max is None else _batched(kind)
    shadow = copy.copy(kind)
    if kind.is_async:
        async def run_async(ctx: JobContext, payload: Any) -> Any:
            try:
                return await fn(ctx, payload)
            except BaseException as exc:
                raised.append(exc)
                raise

        shadow.fn = run_async
    else:
        def run(ctx: JobContext, payload: Any) -> Any:
            try:
                return fn(ctx, payload)
            except BaseException as exc:
                raised.append(exc)
                raise

        shadow.fn = run
    return shadow


@contextlib.contextmanager
def inline(app: Forklift, *, propagate: bool = True) -> Iterator[InlineRuns]:
    """Within the block, every enqueue through ``app`` runs its job at once and stores nothing.

    Covers ``kind.enqueue``/``enqueue_async``/``enqueue_many``/``enqueue_many_async`` and
    ``app.enqueue``/``enqueue_many`` (by name). With ``propagate`` (the default) an exception the
    handler raised comes out of the enqueue call; otherwise the returned job carries the
    outcome (``state``, ``errors``) as the worker would have written it.
    """
    runner = _Runner(app, propagate)

    def ours(target: Any) -> bool:
        return target is app or getattr(target, "app", None) is app

    def patch(cls: type, name: str, make: Callable[[Any], Any]) -> None:
        original = getattr(cls, name)
        stack.callback(setattr, cls, name, original)
        setattr(cls, name, make(original))

    def one(original: Any) -> Any:
        def enqueue(self: JobKind[Any, Any], args: Any, *a: Any, **options: Any) -> Any:
            if not ours(self):
                return original(self, args, *a, **options)
            options.pop("conn", None)
            options.pop("on_conflict", None)
            options.pop("on_full", None)  # nothing is stored, so no queue is ever full
            return runner.run_sync(self.row(args, **options))
        return enqueue

    def one_async(original: Any) -> Any:
        async def enqueue_async(self: JobKind[Any, Any], args: Any, *a: Any, **options: Any) -> Any:
            if not ours(self):
                return await original(self, args, *a, **options)
            options.pop("conn", None)
            options.pop("on_conflict", None)
            options.pop("on_full", None)
            return await runner.run(self.row(args, **options))
        return enqueue_async

    def rows(original: Any) -> Any:
        def enqueue_rows(self: Forklift, batch: list[Row], *a: Any, **kw: Any) -> Any:
            if not ours(self):
                return original(self, batch, *a, **kw)
            return [runner.run_sync(r).id for r in batch]
        return enqueue_rows

    def rows_async(original: Any) -> Any:
        async def enqueue_rows_async(self: Forklift, batch: list[Row], *a: Any, **kw: Any) -> Any:
            if not ours(self):
                return await original(self, batch, *a, **kw)
            return [(await runner.run(r)).id for r in batch]
        return enqueue_rows_async

    with contextlib.ExitStack() as stack:
        stack.callback(runner.pool.shutdown, wait=False)
        patch(JobKind, "enqueue", one)
        patch(JobKind, "enqueue_async", one_async)
        patch(Forklift, "enqueue_rows", rows)
        patch(Forklift, "enqueue_rows_async", rows_async)
        yield runner.runs
