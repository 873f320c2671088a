"""The application object: declares job kinds, binds them to a database, enqueues them.

Light to import: connection pools, batches, cron and backfills load on first use, so an
application that only declares kinds and enqueues pays for none of the rest.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Literal, TypeVar, overload

from forklift import hooks as _hooks
from forklift._app.actor import Actor
from forklift._app.backpressure import Gate
from forklift._app.enqueue import Enqueuer, batch_outcome_unknown
from forklift._app.kind import ErrorsMode, Extra, JobKind, TenantOf, as_delay
from forklift._base.backpressure import Enqueued, OnFull, check_on_full
from forklift._base.errors import (
    ConfigError,
    EnqueueOutcomeUnknown,
    KindAlreadyDeclared,
    QueueFull,
    UnknownKind,
)
from forklift._base.retry import Backoff
from forklift._db import config
from forklift._db.pools import Pools
from forklift._db.steps import Steps, Tx, drive, drive_async
from forklift._jobs import insert as _enq
from forklift._jobs.attempt_log import DEFAULT_BYTES, DEFAULT_LINES
from forklift._jobs.fullness import FullQueues
from forklift._jobs.job import Job
from forklift._jobs.payload_versions import Upcaster

if TYPE_CHECKING:
    import psycopg
    from psycopg_pool import AsyncConnectionPool, ConnectionPool

    from forklift._app.context import JobContext
    from forklift._features.backfill.backfill import Backfill, Clock, Reader
    from forklift._features.consumers.consumer import Consumer, Processor
    from forklift._features.consumers.source import Source
    from forklift._features.cron import Policy, Schedule
    from forklift._features.durable.events import Event
    from forklift._features.durable.outbox import Outbox
    from forklift._features.flow.keys import Key, Rate
    from forklift._features.flow.locks import Lock
    from forklift._jobs.batch import Batch, BatchLimits

__all__ = ["DEFAULT_PAYLOAD_LIMIT", "DEFAULT_POOL_SIZE", "Forklift", "JobKind"]

P = TypeVar("P")
R = TypeVar("R")
T = TypeVar("T")

DEFAULT_PAYLOAD_LIMIT = 1024 * 1024
DEFAULT_POOL_SIZE = 4


class Forklift:
    """A set of job kinds bound to one database and schema.

    ``dsn`` is resolved lazily (``FORKLIFT_DSN``, ``DATABASE_URL``, then the embedded server),
    so an app module can be imported without touching the database. ``pool_size`` is the most
    connections each of the app's two enqueue pools (sync and async) opens; each opens on first
    use with one connection and grows under concurrent enqueues. ``close()`` / ``aclose()``
    close them.
    """

    def __init__(
        self,
        dsn: str | None = None,
        *,
        schema: str | None = None,
        payload_limit: int = DEFAULT_PAYLOAD_LIMIT,
        pool_size: int = DEFAULT_POOL_SIZE,
        batch_limits: BatchLimits | None = None,
    ) -> None:
        if isinstance(pool_size, bool) or not isinstance(pool_size, int) or pool_size < 1:
            raise ConfigError(f"pool_size must be a positive integer, not {pool_size!r}")
        if isinstance(payload_limit, bool) or not isinstance(payload_limit, int) or payload_limit < 1:
            raise ConfigError(f"payload_limit must be a positive number of bytes, not {payload_limit!r}")
        self._dsn = dsn
        self.schema = schema or config.schema_from_env()
        self.payload_limit = payload_limit
        self._batch_limits = batch_limits
        self.kinds: dict[str, JobKind[Any, Any]] = {}
        self.schedules: dict[str, Schedule] = {}
        self.backfills: dict[str, Backfill] = {}
        self.pool_size = pool_size
        #: The queues past a ceiling, as this process knows it (kept by the pools' connections).
        self._full = FullQueues(self.schema)
        self._pools = Pools(pool_size, lambda c, listen: self._full.configure(c, listen=listen),
                            lambda c, listen: self._full.configure_async(c, listen=listen))
        #: Backpressure: what an enqueue to a full queue does (forklift._app.backpressure).
        self._gate = Gate(self._full, self.pool, self.async_pool, self._pools.opened,
                          self._pools.aopened)
        #: Where new jobs are stored (and a lost commit is told apart), on these pools.
        self._enqueuer = Enqueuer(self.pool, self.async_pool, self._gate)
        self._actor = Actor()

    @property
    def batch_limits(self) -> BatchLimits:
        if self._batch_limits is None:
            from forklift._jobs.batch import BatchLimits

            self._batch_limits = BatchLimits()
        return self._batch_limits

    @batch_limits.setter
    def batch_limits(self, limits: BatchLimits) -> None:
        self._batch_limits = limits

    # -- attribution ----------------------------------------------------------------------
    def acting_as(self, actor: str | None) -> AbstractContextManager[None]:
        """A scope whose enqueues name ``actor`` as their ``enqueued_by`` (``user:42``,
        ``import-2026-05``), unless one gives its own: ``with app.acting_as("user:42"): ...``.

        For the thread or task that enters it, sync or async code alike; attribution for the
        people reading a job, never authority (forklift checks nothing by it). ``None`` opens a
        scope that names nobody.
        """
        return self._actor.acting_as(actor)

    @property
    def actor(self) -> str | None:
        """The actor of the innermost :meth:`acting_as` scope open here, or None."""
        return self._actor.current()

    # -- database -------------------------------------------------------------------------
    @property
    def dsn(self) -> str:
        if self._dsn is None:
            self._dsn = config.resolve(None, schema=self.schema).dsn
        return self._dsn

    def use(self, dsn: str) -> None:
        """Point the app at a database (before first use), e.g. from a ``--dsn`` flag."""
        self.close()
        self._dsn = dsn

    def pool(self) -> ConnectionPool[Any]:
        """The app's connection pool for sync enqueues, opened on first use."""
        return self._pools.sync(self.dsn)

    async def async_pool(self) -> AsyncConnectionPool[Any]:
        """The app's connection pool for async enqueues, opened on first use (once, however
        many tasks ask for it at the same moment)."""
        return await self._pools.async_(self.dsn)

    def close(self) -> None:
        """Close the sync pool (the async one needs :meth:`aclose`); reopened on next use."""
        self._pools.close()

    async def aclose(self) -> None:
        """Close both pools; reopened on next use."""
        await self._pools.aclose()

    def _run(self, steps: Steps[T], conn: psycopg.Connection[Any] | None = None,
                  tx: Tx = "none") -> T:
        """Run a unit of work (see :mod:`forklift._db.steps`) on ``conn`` or a pooled connection."""
        if conn is not None:
            return drive(conn, steps, tx)
        with self.pool().connection() as own:
            return drive(own, steps, tx)

    async def _run_async(self, steps: Steps[T],
                              conn: psycopg.AsyncConnection[Any] | None = None,
                              tx: Tx = "none") -> T:
        if conn is not None:
            return await drive_async(conn, steps, tx)
        pool = await self.async_pool()
        async with pool.connection() as own:
            return await drive_async(own, steps, tx)

    # -- declaring --------------------------------------------------------------------------
    @overload
    def job(self, fn: Callable[[JobContext, P], Awaitable[R]], /) -> JobKind[P, R]: ...
    @overload
    def job(self, fn: Callable[[JobContext, P], R], /) -> JobKind[P, R]: ...
    @overload
    def job(
        self,
        fn: None = None,
        /,
        *,
        name: str | None = None,
        queue: str = "default",
        priority: int = 0,
        max_attempts: int = 20,
        retry: Backoff | None = None,
        timeout: float | timedelta | None = None,
        failure_codes: Sequence[str] = (),
        errors: ErrorsMode = "full",
        extra: Extra = "forbid",
        concurrency: Sequence[Key] | None = None,
        rate: Rate | None = None,
        lease_expiries: int = 3,
        tenant_required: bool = False,
        tenant: TenantOf | None = None,
        expires: timedelta | None = None,
        capture_logs: bool = False,
        log_lines: int = DEFAULT_LINES,
        log_bytes: int = DEFAULT_BYTES,
        on_full: OnFull = "raise",
        version: int | None = None,
        upcasters: Mapping[int, Upcaster] | None = None,
        weight: int = 1,
    ) -> Callable[[Callable[..., Any]], JobKind[Any, Any]]: ...

    def job(
        self,
        fn: Callable[..., Any] | None = None,
        /,
        *,
        name: str | None = None,
        queue: str = "default",
        priority: int = 0,
        max_attempts: int = 20,
        retry: Backoff | None = None,
        timeout: float | timedelta | None = None,
        failure_codes: Sequence[str] = (),
        errors: ErrorsMode = "full",
        extra: Extra = "forbid",
        concurrency: Sequence[Key] | None = None,
        rate: Rate | None = None,
        lease_expiries: int = 3,
        tenant_required: bool = False,
        tenant: TenantOf | None = None,
        expires: timedelta | None = None,
        capture_logs: bool = False,
        log_lines: int = DEFAULT_LINES,
        log_bytes: int = DEFAULT_BYTES,
        on_full: OnFull = "raise",
        version: int | None = None,
        upcasters: Mapping[int, Upcaster] | None = None,
        weight: int = 1,
    ) -> Any:
        """Declare a job kind. Use as ``@app.job`` or ``@app.job(queue="mail", ...)``.

        The handler takes ``(ctx, payload)``; the payload's annotation (a dataclass, TypedDict,
        pydantic model or any type pydantic validates) is enforced at enqueue and at run time,
        and so is the return annotation for the result. ``extra="ignore"`` drops payload
        fields the type does not declare instead of refusing them at enqueue.
        ``concurrency=[Key(...)]`` and ``rate=Rate(...)``: limits across the fleet, per key
        value (docs: how-to/flow-control.md).
        ``lease_expiries`` is how many attempts in a row may end by lease expiry (the process
        running the job died) before the job goes ``dead`` with ``worker_lost``.
        ``tenant_required=True`` refuses an enqueue without a tenant (TenantRequired);
        ``tenant=`` (a function of the payload, or a payload field's name) derives the tenant
        from the payload, and an enqueue naming another is refused (TenantMismatch).
        ``expires=timedelta(...)`` gives every job of the kind a start-by deadline that long
        after it is due (an enqueue's ``expires=`` overrides it): a job not started by then
        never starts, it goes ``dead`` with the code ``expired``, its attempt unspent.
        ``capture_logs=True`` adds the ``logging`` records emitted while a handler runs to its
        attempt's log, beside its ``ctx.log`` lines; ``log_lines`` and ``log_bytes`` cap an
        attempt's log (docs: how-to/job-logs.md).
        ``on_full`` is what an enqueue does when the queue is past a ceiling an operator set
        (``forklift queues ceiling``): ``"raise"`` QueueFull, ``Wait(timeout)`` for room, or
        ``Shed(...)`` the job unstored (docs: how-to/backpressure.md).
        ``version=N`` is the version of the payload this code writes, stored with each job;
        ``upcasters={1: v1_to_v2, ...}`` turn an older job's payload (a dict) into the next
        version's before it is validated, one version at a time, and must leave no gap up to
        ``version`` (docs: how-to/payload-versions.md). Without ``version`` the kind is
        version 1 and its jobs carry no version.
        ``weight=N`` makes each job of the kind take N of a worker's slots, N of its queue's
        concurrency limit and of each of its keys' limits, and N tokens of a rate (an
        enqueue's ``weight=`` overrides it; docs: how-to/flow-control.md#weighted-jobs).
        """

        def declare(f: Callable[..., Any]) -> JobKind[Any, Any]:
            kind_name = name or f"{f.__module__}.{f.__qualname__}"
            if kind_name in self.kinds:
                raise KindAlreadyDeclared(f"job kind {kind_name!r} is already declared")
            if errors not in ("full", "codes"):
                raise ConfigError(f"errors must be 'full' or 'codes', not {errors!r}")
            kind: JobKind[Any, Any] = JobKind(
                self,
                f,
                name=kind_name,
                queue=queue,
                priority=priority,
                max_attempts=max_attempts,
                retry=retry or Backoff(),
                timeout=as_delay(timeout),
                failure_codes=failure_codes,
                errors=errors,
                extra=extra,
                concurrency=concurrency,
                rate=rate,
                lease_expiries=lease_expiries,
                tenant_required=tenant_required,
                tenant=tenant,
                expires=expires,
                capture_logs=capture_logs,
                log_lines=log_lines,
                log_bytes=log_bytes,
                on_full=on_full,
                version=version,
                upcasters=upcasters,
                weight=weight,
            )
            self.kinds[kind_name] = kind
            return kind

        return declare(fn) if fn is not None else declare

    def batch_job(
        self,
        *,
        max: int = 100,
        wait: float | timedelta = 0.0,
        name: str | None = None,
        queue: str = "default",
        priority: int = 0,
        max_attempts: int = 20,
        retry: Backoff | None = None,
        timeout: float | timedelta | None = None,
        failure_codes: Sequence[str] = (),
        errors: ErrorsMode = "full",
        extra: Extra = "forbid",
        lease_expiries: int = 3,
        tenant_required: bool = False,
        tenant: TenantOf | None = None,
        expires: timedelta | None = None,
    ) -> Callable[[Callable[..., Any]], JobKind[Any, Any]]:
        """Declare a kind whose handler takes up to ``max`` of its jobs in one call:
        ``@app.batch_job(max=100, wait=0.05)`` over ``handler(ctx, payloads)``.

        The handler takes a :class:`~forklift.BatchContext` and a ``list`` of typed payloads
        and returns a list of the same length: each job's result, or an exception for a job
        that failed (``Retry``, ``Fail`` and ``Snooze`` too); a handler that raises fails every
        job of the call, and a list of another length fails every job with
        ``invalid_batch_result``. Each job keeps its own attempt, retries, error entry, result
        and lease. The jobs of a call are those of the kind the worker claimed together, and
        what more arrives within ``wait`` seconds; each takes one of the worker's slots.
        ``timeout`` applies to the call. The other options are :meth:`job`'s. Enqueue as for
        any kind: ``kind.enqueue(payload)``. See docs/how-to/batch-handlers.md.
        """
        size = max

        def declare(f: Callable[..., Any]) -> JobKind[Any, Any]:
            kind_name = name or f"{f.__module__}.{f.__qualname__}"
            if kind_name in self.kinds:
                raise KindAlreadyDeclared(f"job kind {kind_name!r} is already declared")
            if errors not in ("full", "codes"):
                raise ConfigError(f"errors must be 'full' or 'codes', not {errors!r}")
            try:
                seconds = as_delay(wait)
            except (TypeError, ValueError):
                raise ConfigError(f"wait= of batch kind {kind_name} must be seconds or a"
                                  f" timedelta, not {wait!r}", field="wait") from None
            kind: JobKind[Any, Any] = JobKind(
                self, f, name=kind_name, queue=queue, priority=priority,
                max_attempts=max_attempts, retry=retry or Backoff(), timeout=as_delay(timeout),
                failure_codes=failure_codes, errors=errors, extra=extra,
                lease_expiries=lease_expiries, tenant_required=tenant_required, tenant=tenant,
                expires=expires, batch_max=size, batch_wait=seconds or 0.0,
            )
            self.kinds[kind_name] = kind
            return kind

        return declare

    def kind(self, name: str) -> JobKind[Any, Any]:
        """The kind declared under ``name``; raises UnknownKind."""
        try:
            return self.kinds[name]
        except (KeyError, TypeError):
            raise UnknownKind(f"no job kind named {name!r} is declared", kind=name) from None

    # -- enqueueing by name ---------------------------------------------------------------------
    def enqueue(self, kind: str, args: Any, **options: Any) -> Job:
        """Enqueue by kind name (validates against the declared kind)."""
        return self.kind(kind).enqueue(args, **options)

    async def enqueue_async(self, kind: str, args: Any, **options: Any) -> Job:
        """:meth:`enqueue` for asyncio."""
        return await self.kind(kind).enqueue_async(args, **options)

    def enqueue_rows(
        self, rows: list[_enq.Row], *, conn: psycopg.Connection[Any] | None = None,
        on_full: OnFull | None = None,
    ) -> Enqueued:
        """Store prepared rows (``JobKind.row``/``rows``) in one transaction; their ids (an
        :class:`~forklift.Enqueued`: those a full queue refused or shed are named there).
        ``on_full`` overrides each row's kind's."""
        if not rows:
            return Enqueued([])
        kept, out = self._gated(rows, on_full, conn)
        if not kept:
            return out
        ids: list[int] = self._enqueuer.store(_enq.many_steps(self.schema, kept), kept,
                                              bulk=True, conn=conn, tx="atomic")
        if _hooks.of(self) is not None:
            _hooks.emit_enqueued_rows(self, kept, ids)
        out.extend(ids)
        return out

    async def enqueue_rows_async(
        self, rows: list[_enq.Row], *, conn: psycopg.AsyncConnection[Any] | None = None,
        on_full: OnFull | None = None,
    ) -> Enqueued:
        """:meth:`enqueue_rows` for asyncio."""
        if not rows:
            return Enqueued([])
        kept, out = await self._gated_async(rows, on_full, conn)
        if not kept:
            return out
        ids: list[int] = await self._enqueuer.store_async(
            _enq.many_steps(self.schema, kept), kept, bulk=True, conn=conn, tx="atomic")
        if _hooks.of(self) is not None:
            _hooks.emit_enqueued_rows(self, kept, ids)
        out.extend(ids)
        return out

    def _groups(self, rows: list[_enq.Row], on_full: OnFull | None
                ) -> dict[tuple[str, int, OnFull], list[int]]:
        """Positions of ``rows`` by what backpressure decides on: queue, priority, on_full."""
        groups: dict[tuple[str, int, OnFull], list[int]] = {}
        for i, row in enumerate(rows):
            policy = on_full
            if policy is None:
                kind = self.kinds.get(row.kind)
                policy = kind.on_full if kind is not None else "raise"
            groups.setdefault((row.queue, row.priority, policy), []).append(i)
        return groups

    @staticmethod
    def _sorted(rows: list[_enq.Row], verdicts: list[tuple[list[int], str | QueueFull | None]]
                ) -> tuple[list[_enq.Row], Enqueued]:
        """The rows to store, and the result so far (refused and shed named)."""
        refused: list[int] = []
        shed: list[int] = []
        full: dict[str, QueueFull] = {}
        for at, verdict in verdicts:
            if isinstance(verdict, QueueFull):
                refused.extend(at)
                full[str(verdict.detail["queue"])] = verdict
            elif verdict is not None:
                shed.extend(at)
        if not refused and not shed:
            return rows, Enqueued([], offered=len(rows))
        out = set(refused) | set(shed)
        return ([r for i, r in enumerate(rows) if i not in out],
                Enqueued([], offered=len(rows), refused=sorted(refused), shed=sorted(shed),
                         full=full))

    def _gated(self, rows: list[_enq.Row], on_full: OnFull | None,
               conn: psycopg.Connection[Any] | None) -> tuple[list[_enq.Row], Enqueued]:
        if on_full is not None:
            on_full = check_on_full(on_full)
        verdicts: list[tuple[list[int], str | QueueFull | None]] = []
        for (queue, priority, policy), at in self._groups(rows, on_full).items():
            try:
                verdicts.append((at, self._gate.admit(queue, priority, policy, conn, len(at))))
            except QueueFull as exc:
                verdicts.append((at, exc))
        return self._sorted(rows, verdicts)

    async def _gated_async(self, rows: list[_enq.Row], on_full: OnFull | None,
                           conn: psycopg.AsyncConnection[Any] | None
                           ) -> tuple[list[_enq.Row], Enqueued]:
        if on_full is not None:
            on_full = check_on_full(on_full)
        verdicts: list[tuple[list[int], str | QueueFull | None]] = []
        for (queue, priority, policy), at in self._groups(rows, on_full).items():
            try:
                verdicts.append((at, await self._gate.admit_async(queue, priority, policy, conn,
                                                                  len(at))))
            except QueueFull as exc:
                verdicts.append((at, exc))
        return self._sorted(rows, verdicts)

    def _rows_of(
        self, items: Iterable[tuple[str, Any] | tuple[str, Any, dict[str, Any]]]
    ) -> list[_enq.Row]:
        rows = []
        for item in items:
            opts: dict[str, Any] = item[2] if len(item) == 3 else {}
            rows.append(self.kind(item[0]).row(item[1], **opts))
        return rows

    def enqueue_many(
        self, items: Iterable[tuple[str, Any] | tuple[str, Any, dict[str, Any]]],
        *, conn: psycopg.Connection[Any] | None = None, on_full: OnFull | None = None,
    ) -> Enqueued:
        """Enqueue jobs of several kinds in one round trip: ``(kind, args[, options])`` each;
        ``on_full`` overrides each kind's (a full queue's jobs are named in the result)."""
        return self.enqueue_rows(self._rows_of(items), conn=conn, on_full=on_full)

    async def enqueue_many_async(
        self, items: Iterable[tuple[str, Any] | tuple[str, Any, dict[str, Any]]],
        *, conn: psycopg.AsyncConnection[Any] | None = None, on_full: OnFull | None = None,
    ) -> Enqueued:
        """:meth:`enqueue_many` for asyncio."""
        return await self.enqueue_rows_async(self._rows_of(items), conn=conn, on_full=on_full)

    def get_job(self, job_id: int) -> Job | None:
        """One job by id, or None."""
        return self._run(_enq.get_steps(self.schema, job_id))

    # -- batches (see forklift._features.batches) ------------------------------------------------
    def _batch_steps(self, kind: str | JobKind[Any, Any], targets: Iterable[Any],
                     options: dict[str, Any]
                     ) -> tuple[Steps[tuple[Batch, bool]], Callable[[], EnqueueOutcomeUnknown]]:
        """The submit's unit of work, and the error a lost commit of it raises."""
        from forklift._features import batches as _batches

        plan = _batches.prepare(self, kind, targets, **options)
        return _batches.submit_steps(plan), lambda: batch_outcome_unknown(
            plan.caller, plan.key, len(plan.targets))

    def batch(
        self,
        kind: str | JobKind[Any, Any],
        targets: Iterable[Any],
        *,
        caller: str,
        mode: Literal["serial", "parallel"] = "parallel",
        max_parallel: int | None = None,
        key: str | None = None,
        on_complete: Any = None,
        on_success: Any = None,
        meta: dict[str, Any] | None = None,
        conn: psycopg.Connection[Any] | None = None,
    ) -> tuple[Batch, bool]:
        """Submit many targets of one kind as a batch; returns ``(batch, reused)``.

        Idempotent per (caller, key) within the TTL, then capped; raises a BatchRefused
        subclass (``too_many_targets``, ``caller_busy``, ``busy``) or an EnqueueRefused for a bad
        target, storing nothing. With ``conn=`` it joins the caller's transaction.
        """
        steps, unknown = self._batch_steps(kind, targets, dict(
            caller=caller, mode=mode, max_parallel=max_parallel, key=key,
            on_complete=on_complete, on_success=on_success, meta=meta))
        return self._enqueuer.run(steps, conn, "savepoint", unknown)

    async def batch_async(
        self,
        kind: str | JobKind[Any, Any],
        targets: Iterable[Any],
        *,
        caller: str,
        mode: Literal["serial", "parallel"] = "parallel",
        max_parallel: int | None = None,
        key: str | None = None,
        on_complete: Any = None,
        on_success: Any = None,
        meta: dict[str, Any] | None = None,
        conn: psycopg.AsyncConnection[Any] | None = None,
    ) -> tuple[Batch, bool]:
        """:meth:`batch` for asyncio."""
        steps, unknown = self._batch_steps(kind, targets, dict(
            caller=caller, mode=mode, max_parallel=max_parallel, key=key,
            on_complete=on_complete, on_success=on_success, meta=meta))
        return await self._enqueuer.run_async(steps, conn, "savepoint", unknown)

    def get_batch(self, batch_id: int) -> Batch | None:
        """One batch by id, or None."""
        from forklift._features import batches as _batches

        return self._run(_batches.get_steps(self.schema, batch_id))

    # -- schedules and backfills ----------------------------------------------------------------
    def periodic(
        self,
        cron: str,
        *,
        tz: str = "UTC",
        name: str | None = None,
        args: Any = None,
        policy: Policy = "skip",
        max_catch_up: int | None = None,
    ) -> Callable[[JobKind[P, R]], JobKind[P, R]]:
        """Enqueue a kind on a cron schedule: stack ``@app.periodic(...)`` above ``@app.job``.

        Ticks are computed in ``tz``; ``policy`` says what happens to ticks missed while no
        worker ran (``skip``: run the latest once; ``catch_up``: each, at most
        ``max_catch_up``). See docs/how-to/cron.md.
        """

        def attach(kind: JobKind[P, R]) -> JobKind[P, R]:
            if not isinstance(kind, JobKind):
                raise ConfigError("stack @app.periodic(...) above @app.job(...), not below it")
            self.schedule(kind, cron=cron, tz=tz, name=name, args=args, policy=policy,
                          max_catch_up=max_catch_up)
            return kind

        return attach

    def schedule(
        self,
        kind: JobKind[Any, Any] | str,
        *,
        cron: str,
        tz: str = "UTC",
        name: str | None = None,
        args: Any = None,
        policy: Policy = "skip",
        max_catch_up: int | None = None,
    ) -> Schedule:
        """Declare a schedule for a kind given by object or name (e.g. from configuration)."""
        from forklift._features import cron as _cron

        target = self.kind(kind) if isinstance(kind, str) else kind
        return _cron.declare(self, target, cron=cron, tz=tz, name=name, args=args,
                             policy=policy, max_catch_up=max_catch_up)

    def backfill(
        self,
        name: str,
        *,
        page_size: int = 100,
        rate: float = 1.0,
        read: Reader | None = None,
        total: Callable[..., int | None] | None = None,
        max_attempts: int = 5,
        retry: Backoff | None = None,
        clock: Clock | None = None,
    ) -> Callable[[Any], Backfill]:
        """Declare a paced backfill over ``read(cursor, limit)`` and ``process(items, conn)``.

        Decorate the process function (passing ``read=``), or a class with ``read`` and
        ``process`` (and optionally ``total``) methods. ``rate`` is pages per second.
        See docs/how-to/backfills.md.
        """
        from forklift._features.backfill import backfill as _backfill
        from forklift._features.backfill import run as _run

        def attach(target: Any) -> Backfill:
            declared = _backfill.declare(self, name, target, read=read, total=total,
                                         page_size=page_size, rate=rate,
                                         max_attempts=max_attempts, retry=retry, clock=clock)
            _run.ensure_runner(self)  # the kind that runs every backfill's pages
            return declared

        return attach

    def consumer(
        self,
        name: str,
        *,
        source: Source,
        batch_size: int = 100,
        queue: str = "consumers",
        every: str = "* * * * *",
        retry: Backoff | None = None,
        max_attempts: int = 10,
        slice_seconds: float = 5.0,
    ) -> Callable[[Processor], Consumer]:
        """Declare a consumer over ``process(items, conn)``: a kind named ``name`` whose run
        reads batches from ``source`` and stores the cursor in each batch's transaction, kept
        running by the schedule ``<name>.supervisor`` (cron ``every``). See
        docs/how-to/consumers.md."""
        from forklift._features.consumers import declare as _consumer

        def attach(process: Processor) -> Consumer:
            return _consumer.declare(self, name, process, source=source, batch_size=batch_size,
                                     queue=queue, every=every, retry=retry,
                                     max_attempts=max_attempts, slice_seconds=slice_seconds)

        return attach

    # -- hooks ------------------------------------------------------------------------------
    def on(self, event: str, fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
        """Call ``fn(event)`` on ``"enqueue"``, ``"start"``, ``"settle"`` or ``"dead"``, off the
        job's path and bounded (see :mod:`forklift.hooks`); sync or async. Returns ``fn``."""
        from forklift import hooks

        return hooks.register(self, event, fn)

    def lock(self, key: str, *, ttl: float = 30.0, wait: float = 0.0) -> Lock:
        """A lock on ``key`` with a fencing token, outside jobs: ``with app.lock(k) as token``
        or ``async with``. See :mod:`forklift._features.flow.locks`."""
        from forklift._features.flow.app_locks import app_locks

        return app_locks(self).lock(key, ttl, wait)

    # -- durable workflows (see forklift._features.durable) --------------------------------------------
    def publish_event(
        self, name: str, data: Any = None, *, conn: psycopg.Connection[Any] | None = None,
        ttl: timedelta | float = timedelta(days=1),
    ) -> Event:
        """Publish an event for ``ctx.wait_for_event``; with ``conn=`` in the caller's
        transaction (it wakes its waits when that commits). Expires after ``ttl``."""
        from forklift._features.durable import events

        return self._run(events.publish_steps(self.schema, events.prepare(self, name, data, ttl)),
                         conn)

    async def publish_event_async(
        self, name: str, data: Any = None, *, conn: psycopg.AsyncConnection[Any] | None = None,
        ttl: timedelta | float = timedelta(days=1),
    ) -> Event:
        """:meth:`publish_event` for asyncio."""
        from forklift._features.durable import events

        return await self._run_async(
            events.publish_steps(self.schema, events.prepare(self, name, data, ttl)), conn)

    @property
    def outbox(self) -> Outbox:
        """The transactional outbox: ``app.outbox.publish(topic, payload, conn=...)`` and
        ``app.outbox.sink(topic, kind_or_callable)``."""
        box = self.__dict__.get("_outbox")
        if box is None:
            from forklift._features.durable.outbox import Outbox

            box = self.__dict__["_outbox"] = Outbox(self)
        return box
