"""The application object: declares job kinds and enqueues them."""

from __future__ import annotations

import inspect
import json
import threading
from collections.abc import Awaitable, Callable, Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar, get_type_hints, overload

import psycopg
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from forklift import _config as config
from forklift import _enqueue as _enq
from forklift._batches import Batch, BatchLimits
from forklift._context import JobContext
from forklift._db import aconnect, connect, connect_kwargs, unavailable
from forklift._errors import (
    ConfigError,
    DatabaseUnavailable,
    InvalidOption,
    KindAlreadyDeclared,
    UnknownKind,
)
from forklift._job import Job
from forklift._payload import Codec, to_json_text
from forklift._retry import Backoff

if TYPE_CHECKING:
    from forklift._backfill import Backfill, Clock, Reader
    from forklift._cron import Policy, Schedule

P = TypeVar("P")
R = TypeVar("R")

ErrorsMode = Literal["full", "codes"]
DEFAULT_PAYLOAD_LIMIT = 1024 * 1024
_CODE_SHAPE = "lower-case snake case, e.g. 'card_declined'"
_RESERVED_CODES = frozenset(
    {"error", "unknown_kind", "invalid_payload", "invalid_result", "timeout", "lease_expired",
     "lease_lost", "interrupted", "cancelled", "internal_error", "handler_exit"}
)


def _as_delay(delay: float | timedelta | None) -> float | None:
    if delay is None:
        return None
    return delay.total_seconds() if isinstance(delay, timedelta) else float(delay)


def _as_utc(at: datetime | None) -> datetime | None:
    if at is None:
        return None
    if at.tzinfo is None:
        raise InvalidOption("at= must be timezone-aware (e.g. datetime.now(timezone.utc))", field="at")
    return at.astimezone(UTC)


def _handler_params(fn: Callable[..., Any], name: str) -> list[str]:
    """The handler's two positional parameters (ctx, payload), or a ConfigError saying why not."""
    if not callable(fn):
        raise ConfigError(f"handler {name} is not callable")
    if inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn):
        raise ConfigError(f"handler {name} is a generator; it must return its result")
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"the signature of handler {name} cannot be read: {exc}") from None
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    params = list(signature.parameters.values())
    required_later = [
        p for p in params[2:]
        if p.default is inspect.Parameter.empty
        and p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    ]
    if len(params) < 2 or any(p.kind not in positional for p in params[:2]) or required_later:
        shown = ", ".join(p.name for p in params)
        raise ConfigError(f"handler {name} must take (ctx, payload); it takes ({shown})")
    return [p.name for p in params[:2]]


def _codec(tp: Any, name: str, what: str) -> Codec:
    try:
        return Codec(tp, what=what)
    except Exception as exc:  # pydantic refuses some types only when asked to build a schema
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError(f"the {what} type of handler {name} cannot be validated: {first}") from None


class JobKind(Generic[P, R]):
    """A declared kind of job: its handler, payload and result types and its defaults."""

    def __init__(
        self,
        app: Forklift,
        fn: Callable[..., Any],
        *,
        name: str,
        queue: str,
        priority: int,
        max_attempts: int,
        retry: Backoff,
        timeout: float | None,
        failure_codes: Sequence[str],
        errors: ErrorsMode,
    ) -> None:
        import re

        self.app = app
        self.fn = fn
        self.name = name
        self.queue = queue
        self.priority = priority
        self.max_attempts = max_attempts
        self.retry = retry
        self.timeout = timeout
        self.errors: ErrorsMode = errors
        for code in failure_codes:
            if not re.fullmatch(r"[a-z][a-z0-9_]{0,63}", code):
                raise ConfigError(f"failure code {code!r} of {name} must be {_CODE_SHAPE}")
            if code in _RESERVED_CODES:
                raise ConfigError(f"failure code {code!r} of {name} is reserved for forklift")
        self.failure_codes = frozenset(failure_codes)
        self.is_async = inspect.iscoroutinefunction(fn)
        params = _handler_params(fn, name)
        try:
            hints = get_type_hints(fn)
        except Exception as exc:
            raise ConfigError(
                f"the annotations of handler {name} cannot be resolved: {exc}"
            ) from None
        self.payload = _codec(hints.get(params[1], Any), name, "payload")
        self.result = _codec(hints.get("return", Any), name, "result")
        _enq.check_options(
            priority=priority, max_attempts=max_attempts, delay=None, at=None, queue=queue
        )

    def __repr__(self) -> str:
        return f"<JobKind {self.name} queue={self.queue}>"

    def __call__(self, ctx: JobContext, payload: P) -> Any:
        """Call the handler directly (tests); forklift's worker does more around it."""
        return self.fn(ctx, payload)

    def row(self, args: P | dict[str, Any], **options: Any) -> _enq.Row:
        """Validate and serialise one job; raises an EnqueueRefused subclass, stores nothing.

        ``options`` are :meth:`row_options`'s.
        """
        text = self.payload_text(args)
        return _enq.Row(args=text, **self.row_options(**options))

    def payload_text(self, args: P | dict[str, Any]) -> str:
        """The payload validated and serialised as it is stored."""
        value = self.payload.validate(args, kind=self.name)
        return self.payload.to_text(value, kind=self.name, limit=self.app.payload_limit)

    def row_options(
        self,
        *,
        delay: float | timedelta | None = None,
        at: datetime | None = None,
        priority: int | None = None,
        queue: str | None = None,
        max_attempts: int | None = None,
        unique_key: str | None = None,
        tags: Iterable[str] = (),
        meta: dict[str, Any] | None = None,
        retry: Backoff | None = None,
    ) -> dict[str, Any]:
        """Every field of a Row but its payload, checked (the same for all rows of a bulk)."""
        limit = self.app.payload_limit
        if meta is not None and not isinstance(meta, dict):
            raise InvalidOption("meta must be a dict of JSON values", field="meta")
        meta_text = to_json_text(meta, what="meta", kind=self.name, limit=limit) if meta else "{}"
        if isinstance(tags, str):  # a lone string would otherwise become one tag per letter
            raise InvalidOption("tags must be a list of strings, not one string", field="tags")
        seconds = _as_delay(delay)
        when = _as_utc(at)
        prio = self.priority if priority is None else priority
        attempts = self.max_attempts if max_attempts is None else max_attempts
        q = self.queue if queue is None else queue
        _enq.check_options(priority=prio, max_attempts=attempts, delay=seconds, at=when, queue=q)
        tag_list = [str(t) for t in tags]
        if any("\x00" in t or "\x1f" in t for t in tag_list):
            raise InvalidOption("tags must not contain control characters", field="tags")
        if unique_key is not None and ("\x00" in unique_key or not unique_key):
            raise InvalidOption("unique_key must be a non-empty string without NUL", field="unique_key")
        return dict(
            queue=q,
            kind=self.name,
            priority=prio,
            max_attempts=attempts,
            at=when,
            delay=seconds or 0.0,
            unique_key=unique_key,
            tags=tag_list,
            meta=meta_text,
            retry=json.dumps(retry.to_json()) if retry is not None else None,
        )

    def enqueue(
        self,
        args: P | dict[str, Any],
        *,
        conn: psycopg.Connection[Any] | None = None,
        on_conflict: _enq.OnConflict = "return_existing",
        **options: Any,
    ) -> Job:
        """Store one job and return it.

        With ``conn=`` the insert runs on the caller's connection, inside whatever transaction
        it has open: the job exists exactly when that transaction commits.
        """
        row = self.row(args, **options)
        if conn is not None:
            return _enq.insert_one(conn, self.app.schema, row, on_conflict)
        with self.app.pool().connection() as own:
            return _enq.insert_one(own, self.app.schema, row, on_conflict)

    async def enqueue_async(
        self,
        args: P | dict[str, Any],
        *,
        conn: psycopg.AsyncConnection[Any] | None = None,
        on_conflict: _enq.OnConflict = "return_existing",
        **options: Any,
    ) -> Job:
        row = self.row(args, **options)
        if conn is not None:
            return await _enq.insert_one_async(conn, self.app.schema, row, on_conflict)
        pool = await self.app.async_pool()
        async with pool.connection() as own:
            return await _enq.insert_one_async(own, self.app.schema, row, on_conflict)

    def enqueue_many(
        self,
        many: Iterable[P | dict[str, Any]],
        *,
        conn: psycopg.Connection[Any] | None = None,
        **options: Any,
    ) -> list[int]:
        """Store many jobs of this kind in one round trip; returns their ids in order."""
        return self.app.enqueue_rows(self.rows(many, **options), conn=conn)

    def rows(self, many: Iterable[P | dict[str, Any]], **options: Any) -> list[_enq.Row]:
        """Rows for many payloads sharing one set of options, which are checked once."""
        items = list(many)
        if not items:
            return []
        fields = self.row_options(**options)
        return _enq.Row.many(fields, map(self.payload_text, items))

    async def enqueue_many_async(
        self,
        many: Iterable[P | dict[str, Any]],
        *,
        conn: psycopg.AsyncConnection[Any] | None = None,
        **options: Any,
    ) -> list[int]:
        return await self.app.enqueue_rows_async(self.rows(many, **options), conn=conn)


class Forklift:
    """A set of job kinds bound to one database and schema.

    ``dsn`` is resolved lazily (``FORKLIFT_DSN``, ``DATABASE_URL``, then the embedded server),
    so an app module can be imported without touching the database.
    """

    def __init__(
        self,
        dsn: str | None = None,
        *,
        schema: str | None = None,
        payload_limit: int = DEFAULT_PAYLOAD_LIMIT,
        pool_size: int = 4,
        batch_limits: BatchLimits | None = None,
    ) -> None:
        self._dsn = dsn
        self.schema = schema or config.schema_from_env()
        self.payload_limit = payload_limit
        self.batch_limits = batch_limits or BatchLimits()
        self.kinds: dict[str, JobKind[Any, Any]] = {}
        self.schedules: dict[str, Schedule] = {}
        self.backfills: dict[str, Backfill] = {}
        self._pool_size = pool_size
        self._pool: ConnectionPool[Any] | None = None
        self._apool: AsyncConnectionPool[Any] | None = None
        self._lock = threading.Lock()

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
        with self._lock:
            if self._pool is None:
                kwargs = connect_kwargs(self.dsn, "enqueue")
                pool: ConnectionPool[Any] = ConnectionPool(
                    kwargs["conninfo"],
                    kwargs={"autocommit": True},
                    min_size=1,
                    max_size=self._pool_size,
                    open=False,
                    timeout=15,
                )
                try:
                    # One plain attempt first: an unreachable database is reported at once,
                    # where the pool would keep retrying until its timeout.
                    connect(self.dsn, "enqueue").close()
                    pool.open(wait=True, timeout=15)
                except DatabaseUnavailable:
                    pool.close()
                    raise
                except Exception as exc:
                    pool.close()
                    raise unavailable(self.dsn, exc) from None
                self._pool = pool
            return self._pool

    async def async_pool(self) -> AsyncConnectionPool[Any]:
        if self._apool is None:
            kwargs = connect_kwargs(self.dsn, "enqueue")
            apool: AsyncConnectionPool[Any] = AsyncConnectionPool(
                kwargs["conninfo"],
                kwargs={"autocommit": True},
                min_size=1,
                max_size=self._pool_size,
                open=False,
                timeout=15,
            )
            try:
                await (await aconnect(self.dsn, "enqueue")).close()
                await apool.open(wait=True, timeout=15)
            except DatabaseUnavailable:
                await apool.close()
                raise
            except Exception as exc:
                await apool.close()
                raise unavailable(self.dsn, exc) from None
            self._apool = apool
        return self._apool

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    async def aclose(self) -> None:
        if self._apool is not None:
            await self._apool.close()
            self._apool = None
        self.close()

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
    ) -> Any:
        """Declare a job kind. Use as ``@app.job`` or ``@app.job(queue="mail", ...)``.

        The handler takes ``(ctx, payload)``; the payload's annotation (a dataclass, TypedDict,
        pydantic model or any type pydantic validates) is enforced at enqueue and at run time,
        and so is the return annotation for the result.
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
                timeout=_as_delay(timeout),
                failure_codes=failure_codes,
                errors=errors,
            )
            self.kinds[kind_name] = kind
            return kind

        return declare(fn) if fn is not None else declare

    def kind(self, name: str) -> JobKind[Any, Any]:
        try:
            return self.kinds[name]
        except KeyError:
            raise UnknownKind(f"no job kind named {name!r} is declared", kind=name) from None

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
        ``max_catch_up``). See :mod:`forklift._cron`.
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
        from forklift import _cron as _cron

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
        See :mod:`forklift._backfill`.
        """
        from forklift import _backfill as _backfill

        def attach(target: Any) -> Backfill:
            return _backfill.declare(self, name, target, read=read, total=total,
                                     page_size=page_size, rate=rate, max_attempts=max_attempts,
                                     retry=retry, clock=clock)

        return attach

    # -- enqueueing by name -----------------------------------------------------------------
    def enqueue(self, kind: str, args: Any, **options: Any) -> Job:
        """Enqueue by kind name (validates against the declared kind)."""
        return self.kind(kind).enqueue(args, **options)

    async def enqueue_async(self, kind: str, args: Any, **options: Any) -> Job:
        return await self.kind(kind).enqueue_async(args, **options)

    def enqueue_rows(
        self, rows: list[_enq.Row], *, conn: psycopg.Connection[Any] | None = None
    ) -> list[int]:
        if conn is not None:
            return _enq.insert_many(conn, self.schema, rows)
        with self.pool().connection() as own:
            return _enq.insert_many(own, self.schema, rows)

    async def enqueue_rows_async(
        self, rows: list[_enq.Row], *, conn: psycopg.AsyncConnection[Any] | None = None
    ) -> list[int]:
        if conn is not None:
            return await _enq.insert_many_async(conn, self.schema, rows)
        pool = await self.async_pool()
        async with pool.connection() as own:
            return await _enq.insert_many_async(own, self.schema, rows)

    def enqueue_many(
        self, items: Iterable[tuple[str, Any] | tuple[str, Any, dict[str, Any]]],
        *, conn: psycopg.Connection[Any] | None = None,
    ) -> list[int]:
        """Enqueue jobs of several kinds in one round trip: ``(kind, args[, options])`` each."""
        rows = []
        for item in items:
            opts: dict[str, Any] = item[2] if len(item) == 3 else {}
            rows.append(self.kind(item[0]).row(item[1], **opts))
        return self.enqueue_rows(rows, conn=conn)

    # -- batches (see forklift.batches) -----------------------------------------------------
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
        from forklift import _batches as batches

        plan = batches.prepare(
            self, kind, targets, caller=caller, mode=mode, max_parallel=max_parallel, key=key,
            on_complete=on_complete, on_success=on_success, meta=meta,
        )
        if conn is not None:
            return batches.run(conn, plan)
        with self.pool().connection() as own:
            return batches.run(own, plan)

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
        from forklift import _batches as batches

        plan = batches.prepare(
            self, kind, targets, caller=caller, mode=mode, max_parallel=max_parallel, key=key,
            on_complete=on_complete, on_success=on_success, meta=meta,
        )
        if conn is not None:
            return await batches.run_async(conn, plan)
        pool = await self.async_pool()
        async with pool.connection() as own:
            return await batches.run_async(own, plan)

    def get_batch(self, batch_id: int) -> Batch | None:
        from forklift import _batches as batches

        with self.pool().connection() as conn:
            return batches.get(conn, self.schema, batch_id)

    def get_job(self, job_id: int) -> Job | None:
        from forklift._job import JOB_COLUMNS
        from forklift._sqltext import render

        with self.pool().connection() as conn:
            row = conn.execute(
                render("SELECT " + JOB_COLUMNS + " FROM {s}.jobs WHERE id = %s", self.schema),
                (job_id,),
            ).fetchone()
        return Job.from_row(row) if row else None
