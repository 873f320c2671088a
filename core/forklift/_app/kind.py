"""A declared job kind: its handler, payload and result types, defaults, and enqueue calls."""

from __future__ import annotations

import collections.abc
import inspect
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import (
    TYPE_CHECKING,
    Any,
    Generic,
    Literal,
    Protocol,
    TypeVar,
    Union,
    get_args,
    get_origin,
    get_type_hints,
)

from forklift import hooks as _hooks
from forklift import otel as _otel
from forklift._base.backpressure import Enqueued, OnFull, check_on_full
from forklift._base.debounce import Debounce
from forklift._base.errors import (
    ConfigError,
    ForkliftError,
    InvalidOption,
    TenantMismatch,
    TenantRequired,
)
from forklift._base.names import check_name, check_tags, shown
from forklift._base.retry import Backoff
from forklift._features.flow import keys as _keys
from forklift._jobs import insert as _enq
from forklift._jobs.attempt_log import DEFAULT_BYTES, DEFAULT_LINES, check_caps
from forklift._jobs.debounce import debounce_steps
from forklift._jobs.job import Job
from forklift._jobs.payload import Codec, to_json_text
from forklift._jobs.payload_versions import AHEAD_CODE, UPCAST_CODE, PayloadVersions, Upcaster

if TYPE_CHECKING:
    import psycopg

    from forklift._app.backpressure import Gate
    from forklift._app.context import JobContext
    from forklift._app.enqueue import Enqueuer
    from forklift._db.steps import Steps
    from forklift._features.flow.keys import Key, Rate

__all__ = ["ErrorsMode", "Extra", "JobKind", "KindApp", "TenantOf"]

P = TypeVar("P")
R = TypeVar("R")

ErrorsMode = Literal["full", "codes"]
#: How a kind derives a job's tenant from its validated payload: a function of the payload, or
#: the name of a payload field (a key of a dict payload, an attribute of any other).
TenantOf = Callable[[Any], Any] | str
#: What enqueue does with payload fields the payload type does not declare.
Extra = Literal["forbid", "ignore"]
_CODE = re.compile(r"[a-z][a-z0-9_]{0,63}")
_CODE_SHAPE = "lower-case snake case, e.g. 'card_declined'"
_RESERVED_CODES = frozenset(
    {"error", "unknown_kind", "invalid_payload", "invalid_result", "timeout", "lease_expired",
     "lease_lost", "interrupted", "cancelled", "internal_error", "handler_exit", "worker_lost",
     "lock_lost", "expired", "invalid_batch_result", UPCAST_CODE, AHEAD_CODE}
)
#: The most jobs one call of a batch handler may take.
MAX_BATCH = 10_000


def as_delay(delay: float | timedelta | None) -> float | None:
    if delay is None:
        return None
    return delay.total_seconds() if isinstance(delay, timedelta) else float(delay)


def _as_utc(at: datetime | None) -> datetime | None:
    if at is None:
        return None
    if not isinstance(at, datetime) or at.tzinfo is None:
        raise InvalidOption("at= must be a timezone-aware datetime (e.g. datetime.now(UTC))",
                            field="at")
    return at.astimezone(UTC)


def _no_bulk_debounce() -> InvalidOption:
    return InvalidOption("debounce= takes one job at a time (enqueue or enqueue_async), not a"
                         " bulk enqueue or a prepared row", field="debounce")


def _debounced(debounce: object, options: dict[str, Any], after: Iterable[Any]
               ) -> dict[str, Any]:
    """The options of a debounced enqueue: the debounce decides when the job is due (its
    wait), and holds the one waiting job of its key, so neither a time of the caller's, a
    unique key nor dependencies go with it."""
    if not isinstance(debounce, Debounce):
        raise InvalidOption(f"debounce must be a Debounce(key, wait, max_wait), not"
                            f" {debounce!r}", field="debounce")
    for name in ("delay", "at", "unique_key"):
        if options.get(name) is not None:
            raise InvalidOption(f"debounce= cannot be combined with {name}= (the debounce"
                                " decides when the job is due, and keeps one waiting job of"
                                " its key)", field="debounce")
    if after:
        raise InvalidOption("debounce= cannot be combined with after=", field="debounce")
    return {**options, "delay": debounce.wait_seconds}


def shed_job(row: _enq.Row, rule: str) -> Job:
    """What an enqueue returns for a job it shed: never stored (id 0, state ``cancelled``),
    ``shed`` naming the rule that dropped it."""
    now = datetime.now(UTC)
    return Job(id=0, queue=row.queue, kind=row.kind, args=json.loads(row.args),
               state="cancelled", priority=row.priority, attempt=0,
               max_attempts=row.max_attempts, run_at=now, created_at=now, tenant=row.tenant,
               enqueued_by=row.enqueued_by, shed=rule)


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


def _item_type(tp: Any, name: str, what: str) -> Any:
    """The element type of a batch handler's ``list[...]`` payloads or results (Any when not
    annotated); a ConfigError for any other annotation."""
    if tp is Any:
        return Any
    if get_origin(tp) not in (list, collections.abc.Sequence):
        raise ConfigError(f"the {what} of batch handler {name} must be annotated list[...],"
                          f" not {tp!r}", field=what)
    args = get_args(tp)
    return args[0] if args else Any


def _result_type(tp: Any, name: str) -> Any:
    """The result type of one job of a batch handler: the element type of its ``list[...]``
    return annotation, less the exceptions it may hold in a job's place."""
    item = _item_type(tp, name, "return")
    members = get_args(item) if get_origin(item) in (Union, type(int | str)) else (item,)
    kept = [m for m in members if not (isinstance(m, type) and issubclass(m, BaseException))]
    if not kept:
        return type(None)
    return kept[0] if len(kept) == 1 else Union[tuple(kept)]  # noqa: UP007


def _check_batch(name: str, batch_max: int, batch_wait: float) -> None:
    if isinstance(batch_max, bool) or not isinstance(batch_max, int) \
            or not 1 <= batch_max <= MAX_BATCH:
        raise ConfigError(f"max= of batch kind {name} must be a whole number from 1 to"
                          f" {MAX_BATCH}, not {batch_max!r}", field="max")
    if isinstance(batch_wait, bool) or not isinstance(batch_wait, (int, float)) \
            or not 0 <= batch_wait <= 60:
        raise ConfigError(f"wait= of batch kind {name} must be 0 to 60 seconds (or a"
                          f" timedelta), not {batch_wait!r}", field="wait")


def _codec(tp: Any, name: str, what: str) -> Codec:
    try:
        return Codec(tp, what=what)
    except ForkliftError:
        raise  # already says what to do, with its own code
    except Exception as exc:  # pydantic refuses some types only when asked to build a schema
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError(f"the {what} type of handler {name} cannot be validated: {first}") from None


class KindApp(Protocol):
    """What a kind needs of the app that declared it (``Forklift`` is one): its schema and
    payload cap, the enqueuer that stores its jobs (private to the app layer), the actor of
    the current scope, and the app's bulk enqueue."""

    schema: str
    payload_limit: int

    _enqueuer: Enqueuer
    _gate: Gate

    @property
    def actor(self) -> str | None:
        """Who enqueues in the current scope (``Forklift.acting_as``), or None."""

    def enqueue_rows(
        self, rows: list[_enq.Row], *, conn: psycopg.Connection[Any] | None = None,
        on_full: OnFull | None = None,
    ) -> Enqueued: ...

    async def enqueue_rows_async(
        self, rows: list[_enq.Row], *, conn: psycopg.AsyncConnection[Any] | None = None,
        on_full: OnFull | None = None,
    ) -> Enqueued: ...


class JobKind(Generic[P, R]):
    """A declared kind of job: its handler, payload and result types and its defaults."""

    def __init__(
        self,
        app: KindApp,
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
        batch_max: int | None = None,
        batch_wait: float = 0.0,
        on_full: OnFull = "raise",
        version: int | None = None,
        upcasters: Mapping[int, Upcaster] | None = None,
        weight: int = 1,
    ) -> None:
        self.app = app
        self.fn = fn
        self.name = check_name(name, "kind", field="name")
        self.queue = queue
        self.priority = priority
        self.max_attempts = max_attempts
        self.retry = retry
        self.timeout = timeout
        self.errors: ErrorsMode = errors
        if isinstance(lease_expiries, bool) or not isinstance(lease_expiries, int) \
                or lease_expiries < 1:
            raise ConfigError(
                f"lease_expiries of {name} must be a whole number of at least 1, not"
                f" {lease_expiries!r}")
        #: Attempts in a row that may end by lease expiry before the job is ``worker_lost``
        #: (registered on the worker's row, read by the leader's rescue).
        self.lease_expiries = lease_expiries
        if extra not in ("forbid", "ignore"):
            raise ConfigError(f"extra must be 'forbid' or 'ignore', not {extra!r}")
        self.extra: Extra = extra
        for code in failure_codes:
            if not isinstance(code, str) or not _CODE.fullmatch(code):
                raise ConfigError(f"failure code {code!r} of {name} must be {_CODE_SHAPE}")
            if code in _RESERVED_CODES:
                raise ConfigError(f"failure code {code!r} of {name} is reserved for forklift")
        self.failure_codes = frozenset(failure_codes)
        #: The kind's keys (forklift._features.flow.keys), or None: its jobs then carry no key values.
        self.flow = _keys.declare(self.name, concurrency, rate)
        if not isinstance(tenant_required, bool):
            raise ConfigError(f"tenant_required of {name} must be True or False, not"
                              f" {tenant_required!r}", field="tenant_required")
        if tenant is not None and not callable(tenant) and not (
                isinstance(tenant, str) and tenant.isidentifier()):
            raise ConfigError(f"tenant= of {name} is a function of the payload or the name of a"
                              f" payload field, not {tenant!r}", field="tenant")
        #: Whether an enqueue without a tenant (given, or derived by ``tenant_of``) is refused.
        self.tenant_required = tenant_required
        #: How the tenant is derived from the payload, or None: then only the enqueue names it.
        self.tenant_of: TenantOf | None = tenant
        if expires is not None and (not isinstance(expires, timedelta)
                                    or expires <= timedelta(0)):
            raise ConfigError(f"expires= of {name} must be a positive timedelta (how long after"
                              f" it is due a job may still start), not {expires!r}",
                              field="expires")
        #: The start-by deadline of the kind's jobs, counted from when each is due; None: none.
        self.expires = expires
        if not isinstance(capture_logs, bool):
            raise ConfigError(f"capture_logs= of {name} must be True or False, not"
                              f" {capture_logs!r}", field="capture_logs")
        check_caps(name, log_lines, log_bytes)
        #: Whether ``logging`` records emitted while a handler runs go to its attempt's log.
        self.capture_logs = capture_logs
        #: An attempt's log caps: lines, bytes (forklift._jobs.attempt_log).
        self.log_caps = (log_lines, log_bytes)
        try:
            #: What an enqueue does when its queue is past a ceiling (forklift._app.backpressure).
            self.on_full: OnFull = check_on_full(on_full)
        except ForkliftError as exc:
            raise ConfigError(f"on_full= of {name}: {exc.message}", field="on_full") from None
        #: The payload versions the kind writes and reads (forklift._jobs.payload_versions),
        #: or None: version 1, and its jobs carry no version.
        self.versions = PayloadVersions.declare(self.name, version, upcasters)
        try:
            #: The slots each job of the kind takes (an enqueue's ``weight=`` overrides it), as
            #: stored: None for one (forklift._features.flow.claim).
            self.weight = _enq.check_weight(weight)
        except ForkliftError as exc:
            raise ConfigError(f"weight= of {name}: {exc.message}", field="weight") from None
        self.is_async = inspect.iscoroutinefunction(fn)
        params = _handler_params(fn, name)
        try:
            hints = get_type_hints(fn)
        except Exception as exc:
            raise ConfigError(
                f"the annotations of handler {name} cannot be resolved: {exc}"
            ) from None
        if batch_max is not None:
            _check_batch(name, batch_max, batch_wait)
        #: The most jobs one call of the handler takes, or None: one job a call (an ordinary
        #: kind). A batch handler takes ``(BatchContext, list[payload])`` and returns one
        #: outcome per job (docs: how-to/batch-handlers.md).
        self.batch_max = batch_max
        #: Seconds a batch call waits for more jobs before it starts (at most ``batch_max``).
        self.batch_wait = float(batch_wait)
        payload_type = hints.get(params[1], Any)
        result_type = hints.get("return", Any)
        if batch_max is not None:
            payload_type = _item_type(payload_type, name, "payload")
            result_type = _result_type(result_type, name)
        self.payload = _codec(payload_type, name, "payload")
        self.result = _codec(result_type, name, "result")
        _enq.check_options(
            priority=priority, max_attempts=max_attempts, delay=None, at=None, queue=queue
        )

    def __repr__(self) -> str:
        return f"<JobKind {self.name} queue={self.queue}>"

    def __call__(self, ctx: JobContext, payload: P) -> Any:
        """Call the handler directly (tests); forklift's worker does more around it."""
        return self.fn(ctx, payload)

    # -- rows: validated, serialised jobs, ready to store -------------------------------------
    def row(self, args: P | dict[str, Any], **options: Any) -> _enq.Row:
        """Validate and serialise one job; raises an EnqueueRefused subclass, stores nothing.

        ``options`` are :meth:`_row_options`'s.
        """
        if "debounce" in options:
            raise _no_bulk_debounce()
        keys = derived = None
        if self.tenant_of is not None:
            text, keys, derived = self._derived_payload(args)
        elif self.flow is not None:
            text, keys = self._keyed_payload(args)
        else:
            text = self._payload_text(args)
        fields = self._row_options(**options)
        if keys is not None:
            fields["keys"] = keys
        if self.tenant_of is not None or self.tenant_required:
            fields["tenant"] = self._tenant(fields["tenant"], derived)
        if _otel.tracer() is not None:  # a producer span, its traceparent on the row
            fields["traceparent"] = _otel.enqueue_traceparent(
                self.name, fields["queue"], tenant=fields["tenant"],
                enqueued_by=fields["enqueued_by"])
        return _enq.Row(args=text, **fields)

    def _payload_text(self, args: P | dict[str, Any]) -> str:
        """The payload validated and serialised as it is stored."""
        value = self.payload.validate(args, kind=self.name, forbid_unknown=self.extra == "forbid")
        return self.payload.to_text(value, kind=self.name, limit=self.app.payload_limit)

    def _keyed_payload(self, args: P | dict[str, Any]) -> tuple[str, list[str]]:
        """The stored payload and its key values (computed from the validated payload)."""
        assert self.flow is not None
        value = self.payload.validate(args, kind=self.name, forbid_unknown=self.extra == "forbid")
        keys = self.flow.values(value)
        return self.payload.to_text(value, kind=self.name, limit=self.app.payload_limit), keys

    def _derived_payload(self, args: P | dict[str, Any]
                         ) -> tuple[str, list[str] | None, str | None]:
        """The stored payload, its key values (None for an unkeyed kind) and the tenant the
        kind derives from it (None when the payload names none)."""
        value = self.payload.validate(args, kind=self.name, forbid_unknown=self.extra == "forbid")
        keys = self.flow.values(value) if self.flow is not None else None
        text = self.payload.to_text(value, kind=self.name, limit=self.app.payload_limit)
        return text, keys, self._tenant_of_payload(value)

    def _tenant_of_payload(self, value: Any) -> str | None:
        of = self.tenant_of
        try:
            if isinstance(of, str):
                got = value.get(of) if isinstance(value, dict) else getattr(value, of, None)
            else:
                assert of is not None
                got = of(value)
        except Exception as exc:
            raise InvalidOption(f"the tenant function of {self.name} raised"
                                f" {type(exc).__name__}: {exc}", field="tenant",
                                kind=self.name) from exc
        if got is None:
            return None
        if isinstance(got, int) and not isinstance(got, bool):
            got = str(got)  # an organisation's numeric id
        if not isinstance(got, str):
            raise InvalidOption(f"the tenant {self.name} derives from its payload must be a"
                                f" string, not {type(got).__name__}", field="tenant",
                                kind=self.name)
        return check_name(got, "tenant")

    def _tenant(self, given: str | None, derived: str | None) -> str | None:
        """The job's tenant from the one the enqueue gave and the one the payload yields."""
        if given is not None and derived is not None and given != derived:
            raise TenantMismatch(
                f"tenant {shown(given)} differs from the tenant {shown(derived)} of the"
                f" {self.name} payload", field="tenant", kind=self.name, given=given,
                derived=derived)
        tenant = derived if given is None else given
        if tenant is None and self.tenant_required:
            how = " or in the payload" if self.tenant_of is not None else ""
            raise TenantRequired(f"{self.name} requires a tenant: name it with tenant=...{how}",
                                 field="tenant", kind=self.name)
        return tenant

    def _row_options(
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
        tenant: str | None = None,
        enqueued_by: str | None = None,
        expires: timedelta | datetime | None = None,
        weight: int | None = None,
    ) -> dict[str, Any]:
        """Every field of a Row but its payload, checked (the same for all rows of a bulk)."""
        limit = self.app.payload_limit
        if meta is not None and not isinstance(meta, dict):
            raise InvalidOption("meta must be a dict of JSON values", field="meta")
        meta_text = to_json_text(meta, what="meta", kind=self.name, limit=limit) if meta else "{}"
        try:
            seconds = as_delay(delay)
        except (TypeError, ValueError):
            raise InvalidOption(f"delay must be seconds or a timedelta, not {delay!r}",
                                field="delay") from None
        when = _as_utc(at)
        prio = self.priority if priority is None else priority
        attempts = self.max_attempts if max_attempts is None else max_attempts
        q = self.queue if queue is None else queue
        _enq.check_options(priority=prio, max_attempts=attempts, delay=seconds, at=when, queue=q)
        if retry is not None and not isinstance(retry, Backoff):
            raise InvalidOption("retry must be a Backoff", field="retry")
        return dict(
            queue=q,
            kind=self.name,
            priority=prio,
            max_attempts=attempts,
            at=when,
            delay=seconds or 0.0,
            unique_key=None if unique_key is None else check_name(unique_key, "unique_key"),
            tags=check_tags(tags) if tags else [],
            meta=meta_text,
            retry=json.dumps(retry.to_json()) if retry is not None else None,
            tenant=None if tenant is None else check_name(tenant, "tenant"),
            payload_version=None if self.versions is None else self.versions.current,
            weight=self.weight if weight is None else self._weight(weight),
            # the enqueue's own, else the app's acting_as scope (checked when it opened)
            enqueued_by=self.app.actor if enqueued_by is None
            else check_name(enqueued_by, "enqueued_by"),
            expires_at=None if expires is None and self.expires is None
            else self._deadline(expires, seconds or 0.0, when),
        )

    def _weight(self, weight: object) -> int | None:
        """An enqueue's ``weight=``, checked (None: one slot)."""
        if self.batch_max is not None:
            raise InvalidOption(f"weight= is refused for batch kind {self.name}: each of its"
                                " jobs takes one slot", field="weight", kind=self.name)
        return _enq.check_weight(weight)

    def _deadline(self, expires: timedelta | datetime | None, delay: float,
                  at: datetime | None) -> datetime | None:
        """The start-by deadline of a job due at ``at`` (or ``delay`` seconds from now): the
        enqueue's ``expires`` (a timedelta counts from when the job is due; a datetime is the
        deadline), else the kind's; None when neither names one. A deadline that has passed,
        or that comes before the job is even due, is refused: the job could never start."""
        if expires is None:
            if self.expires is None:
                return None
            expires = self.expires
        now = datetime.now(UTC)
        due = at if at is not None else now + timedelta(seconds=delay)
        if isinstance(expires, timedelta):
            if expires <= timedelta(0):
                raise InvalidOption(f"expires must be a positive timedelta, not {expires!r}",
                                    field="expires")
            return due + expires
        if not isinstance(expires, datetime) or expires.tzinfo is None:
            raise InvalidOption("expires must be a timedelta or a timezone-aware datetime (e.g."
                                f" datetime.now(UTC) + timedelta(minutes=5)), not {expires!r}",
                                field="expires")
        deadline = expires.astimezone(UTC)
        if deadline <= now:
            raise InvalidOption(f"expires {deadline.isoformat()} has passed: the job could"
                                " never start", field="expires")
        if deadline <= due:
            raise InvalidOption(f"expires {deadline.isoformat()} comes before the job is due"
                                f" ({due.isoformat()}): it could never start", field="expires")
        return deadline

    def rows(self, many: Iterable[P | dict[str, Any]], **options: Any) -> list[_enq.Row]:
        """Rows for many payloads sharing one set of options, which are checked once."""
        if "debounce" in options:
            raise _no_bulk_debounce()
        items = list(many)
        if not items:
            return []
        fields = self._row_options(**options)
        if _otel.tracer() is not None:  # one producer span for the bulk, on every row
            # The bulk's one span names the tenant the enqueue gave (rows may derive others).
            fields["traceparent"] = _otel.enqueue_traceparent(
                self.name, fields["queue"], bulk=True, tenant=fields["tenant"],
                enqueued_by=fields["enqueued_by"])
        if self.tenant_of is not None:
            given = fields["tenant"]
            return _enq.Row.many_each(fields, (
                {"args": text, "keys": keys, "tenant": self._tenant(given, derived)}
                for text, keys, derived in map(self._derived_payload, items)))
        if self.tenant_required and fields["tenant"] is None:
            self._tenant(None, None)  # refused: no tenant for any of them
        if self.flow is not None:
            return _enq.Row.many_keyed(fields, map(self._keyed_payload, items))
        return _enq.Row.many(fields, map(self._payload_text, items))

    # -- enqueueing -------------------------------------------------------------------------------
    def enqueue(
        self,
        args: P | dict[str, Any],
        *,
        conn: psycopg.Connection[Any] | None = None,
        on_conflict: _enq.OnConflict = "return_existing",
        after: Iterable[int | Job] = (),
        if_dependency_fails: str = "cancel",
        debounce: Debounce | None = None,
        on_full: OnFull | None = None,
        **options: Any,
    ) -> Job:
        """Store one job and return it.

        With ``conn=`` the insert runs on the caller's connection, inside whatever transaction
        it has open: the job exists exactly when that transaction commits. With ``after=``
        (jobs or ids) it waits until they all completed (see :mod:`forklift._features.durable.deps`).
        With ``debounce=Debounce(key, wait, max_wait)`` a job of this kind still waiting under
        that key takes this payload and a later start instead (see :mod:`forklift._jobs.debounce`).
        ``on_full`` overrides the kind's: what to do when the queue is past a ceiling
        (``"raise"``, ``Wait(timeout)``, ``Shed(...)``; see :mod:`forklift._app.backpressure`).
        """
        if debounce is not None:
            options = _debounced(debounce, options, after)
        row = self.row(args, **options)
        shed = self.app._gate.admit(row.queue, row.priority, self._on_full(on_full), conn)
        if shed is not None:
            return shed_job(row, shed)
        job: Job = self.app._enqueuer.store(
            self._one(row, on_conflict, after, if_dependency_fails, debounce), [row], bulk=False,
            conn=conn)
        if _hooks.of(self.app) is not None:
            _hooks.emit_enqueued(self.app, job)
        return job

    async def enqueue_async(
        self,
        args: P | dict[str, Any],
        *,
        conn: psycopg.AsyncConnection[Any] | None = None,
        on_conflict: _enq.OnConflict = "return_existing",
        after: Iterable[int | Job] = (),
        if_dependency_fails: str = "cancel",
        debounce: Debounce | None = None,
        on_full: OnFull | None = None,
        **options: Any,
    ) -> Job:
        """:meth:`enqueue` for asyncio (a ``Wait`` waits without blocking the loop)."""
        if debounce is not None:
            options = _debounced(debounce, options, after)
        row = self.row(args, **options)
        shed = await self.app._gate.admit_async(row.queue, row.priority,
                                                self._on_full(on_full), conn)
        if shed is not None:
            return shed_job(row, shed)
        job: Job = await self.app._enqueuer.store_async(
            self._one(row, on_conflict, after, if_dependency_fails, debounce), [row], bulk=False,
            conn=conn)
        if _hooks.of(self.app) is not None:
            _hooks.emit_enqueued(self.app, job)
        return job

    def _on_full(self, given: object) -> OnFull:
        return self.on_full if given is None else check_on_full(given)

    def _one(self, row: _enq.Row, on_conflict: Any, after: Iterable[int | Job],
             if_dependency_fails: str, debounce: Debounce | None = None) -> Steps[Job]:
        if debounce is not None:
            return debounce_steps(self.app.schema, row, debounce)
        policy = _enq.check_on_conflict(on_conflict)
        if after:
            from forklift._features.durable import deps

            return deps.insert_steps(self.app.schema, row,
                                     deps.check(after, if_dependency_fails, row),
                                     if_dependency_fails)
        return _enq.one_steps(self.app.schema, row, policy)

    def enqueue_many(
        self,
        many: Iterable[P | dict[str, Any]],
        *,
        conn: psycopg.Connection[Any] | None = None,
        on_full: OnFull | None = None,
        **options: Any,
    ) -> Enqueued:
        """Store many jobs of this kind in one round trip; returns their ids in order (an
        :class:`~forklift.Enqueued` list, which also names any refused or shed when the
        queue is full)."""
        return self.app.enqueue_rows(self.rows(many, **options), conn=conn,
                                     on_full=self._on_full(on_full))

    async def enqueue_many_async(
        self,
        many: Iterable[P | dict[str, Any]],
        *,
        conn: psycopg.AsyncConnection[Any] | None = None,
        on_full: OnFull | None = None,
        **options: Any,
    ) -> Enqueued:
        """:meth:`enqueue_many` for asyncio."""
        return await self.app.enqueue_rows_async(self.rows(many, **options), conn=conn,
                                                 on_full=self._on_full(on_full))
