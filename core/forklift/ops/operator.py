"""The :class:`Operator`: one object with every operator call, for the CLI, the console and
scripts alike.

    from forklift.ops import Operator, JobFilter

    with Operator(actor="alice") as op:
        print(op.stats().totals.counts)
        report = op.requeue_many(JobFilter.build(states="dead", queues="mail"), dry_run=True)
        print(report.matched, report.sample_ids)

Each call returns a dataclass whose ``to_json()`` gives the documented JSON shape. The module
functions (``forklift.ops.stats.stats(conn, ctx)`` ...) take a connection and an
:class:`OpsContext` instead, for callers that bring their own connection.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import threading
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import datetime, timedelta
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from forklift import _config as config
from forklift import _pooler as pooler
from forklift._db import connect, connect_kwargs, unavailable
from forklift.ops import limits
from forklift.ops import stats as _stats
from forklift.ops.context import OpsContext

if TYPE_CHECKING:
    from forklift._batches import Batch
    from forklift.ops import actions as _actions
    from forklift.ops import audit as _audit
    from forklift.ops import backfills as _backfills
    from forklift.ops import batches as _batches
    from forklift.ops import charts as _charts
    from forklift.ops import dead as _dead
    from forklift.ops import events as _events
    from forklift.ops import explain as _explain
    from forklift.ops import health as _health
    from forklift.ops import horizon as _horizon
    from forklift.ops import jobs as _jobs
    from forklift.ops import keys as _keys
    from forklift.ops import kinds as _kinds
    from forklift.ops import locks as _locks
    from forklift.ops import outbox as _outbox
    from forklift.ops import prune as _prune
    from forklift.ops import queues as _queues
    from forklift.ops import rates as _rates
    from forklift.ops import retention as _retention
    from forklift.ops import roles as _roles
    from forklift.ops import schedules as _schedules
    from forklift.ops import workers as _workers
    from forklift.ops.filters import JobFilter, Sort
else:
    # Each module loads on the first call that needs it: `forklift stats --json` loads the
    # stats alone, not the actions, batches, backfills, schedules, health or roles.
    class _Module:
        def __init__(self, name: str) -> None:
            self._name = f"forklift.ops.{name}"

        def __getattr__(self, attr: str) -> Any:
            return getattr(importlib.import_module(self._name), attr)

    (_actions, _audit, _backfills, _batches, _dead, _events, _explain, _health, _horizon, _jobs,
     _keys, _locks, _outbox, _prune, _queues, _rates, _retention, _roles, _schedules,
     _workers) = (
        _Module(n) for n in ("actions", "audit", "backfills", "batches", "dead", "events",
                             "explain", "health", "horizon", "jobs", "keys", "locks", "outbox",
                             "prune", "queues", "rates", "retention", "roles", "schedules",
                             "workers"))

__all__ = ["Operator"]

T = TypeVar("T")


class Operator:
    """Operator calls against one database and schema, as ``actor``.

    ``dsn``: ``--dsn`` > FORKLIFT_DSN > DATABASE_URL > the embedded server. ``actor``: else
    FORKLIFT_ACTOR, else the OS user. ``read_only``: or FORKLIFT_READ_ONLY; every mutating call
    then raises :class:`forklift._errors.ReadOnly`, and the session itself is opened read-only.
    ``conn``: use this connection instead of opening one (it is not closed by :meth:`close`).

    One connection serves every call; calls from several threads are serialised.
    """

    def __init__(
        self,
        dsn: str | None = None,
        *,
        schema: str | None = None,
        actor: str | None = None,
        read_only: bool | None = None,
        conn: psycopg.Connection[Any] | None = None,
    ) -> None:
        self._ctx = OpsContext.from_env(schema=schema, actor=actor, read_only=read_only)
        self._dsn = dsn
        self._conn = conn
        self._own = conn is None
        self._lock = threading.RLock()
        self._window = _stats.WindowCache()
        #: Inside dry_run(), on the thread running it: the context its calls act with.
        self._rehearsal = threading.local()

    # -- connection -------------------------------------------------------------------------
    @property
    def ctx(self) -> OpsContext:
        """Schema, actor and read-only mode (inside :meth:`dry_run`, on its thread, writable)."""
        return getattr(self._rehearsal, "ctx", None) or self._ctx

    @ctx.setter
    def ctx(self, value: OpsContext) -> None:
        self._ctx = value

    @property
    def schema(self) -> str:
        return self.ctx.schema

    @property
    def actor(self) -> str:
        return self.ctx.actor

    @property
    def read_only(self) -> bool:
        return self.ctx.read_only

    @property
    def conn(self) -> psycopg.Connection[Any]:
        if self._conn is None or self._conn.closed or self._conn.broken:
            target = config.resolve(self._dsn, schema=self.ctx.schema).dsn
            if self.ctx.read_only and not pooler.pooled(target):
                # Belt and braces: the session refuses writes even if a code path forgot to ask
                # (a startup option: not behind a transaction pooler, which refuses them).
                kwargs = connect_kwargs(target, "ops")
                params = conninfo_to_dict(kwargs["conninfo"])
                params["options"] = f"{params.get('options', '')} -c default_transaction_read_only=on"
                kwargs["conninfo"] = make_conninfo(**params)  # type: ignore[arg-type]
                try:
                    self._conn = psycopg.Connection.connect(**kwargs)
                except psycopg.OperationalError as exc:
                    if not pooler.refused_options(exc):
                        raise unavailable(target, exc) from None
                    pooler.learn(target)
                    self._conn = connect(target, "ops")
            else:
                self._conn = connect(target, "ops")
                self._check_role(self._conn)
            self._own = True
        return self._conn

    def abort(self) -> None:
        """Cut off a call that hangs (a server that stopped answering): shut this operator's
        session's socket, so the waiting call fails like a dropped connection and the next
        call reconnects. Safe from another thread; opens nothing; never raises."""
        conn = self._conn
        if conn is not None:
            from forklift._session import shut_socket

            shut_socket(conn)

    def _check_role(self, conn: psycopg.Connection[Any]) -> None:
        # A role that may not write (forklift roles: the console's) makes this Operator
        # read-only, so the console disables its actions and says why.
        if not _roles.can_write(conn, self.ctx.schema):
            role = conn.info.parameter_status("session_authorization") or "this role"
            self.ctx = dataclasses.replace(
                self.ctx, read_only=True,
                read_only_reason=f"the database role {role} may not write forklift's tables",
            )

    def check_role(self) -> bool:
        """Connect now and say whether this Operator is read-only (asked for, or because its
        database role may not write)."""
        self.conn  # noqa: B018 - connecting is the check
        return self.ctx.read_only

    def close(self) -> None:
        if self._own and self._conn is not None:
            self._conn.close()
        self._conn = None if self._own else self._conn

    def __enter__(self) -> Operator:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _run(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            conn = self.conn
            try:
                return fn(conn, self.ctx, *args, **kwargs)
            except _roles.REFUSED as exc:
                raise _roles.refusal(exc, getattr(fn, "__name__", "write")) or exc from None
            except psycopg.OperationalError:
                if self._own and conn.closed:
                    self._conn = None  # reopened on the next call
                raise

    def dry_run(self, fn: Callable[[Operator], T]) -> T:
        """Rehearse ``fn(self)``: its calls run for real inside one transaction that is always
        rolled back, so the result (and any refusal) is exactly what acting would give, and
        nothing changes: no row, no audit entry, no NOTIFY. Works in read-only mode too (the
        rehearsal may write; it can never commit). Sequences (ids, fences) still advance.

            after = op.dry_run(lambda o: o.pause("mail", for_="30m"))   # a QueueInfo
        """
        with self._lock:
            conn = self.conn
            try:
                with conn.transaction(force_rollback=True):
                    if self._ctx.read_only:
                        conn.execute("SET TRANSACTION READ WRITE")
                    self._rehearsal.ctx = replace(self._ctx, read_only=False)
                    return fn(self)
            finally:
                self._rehearsal.ctx = None

    # -- reading ----------------------------------------------------------------------------
    @contextlib.contextmanager
    def snapshot(self) -> Iterator[None]:
        """Calls made inside share one read-only snapshot (REPEATABLE READ), so figures read
        by several calls agree (the stats and the list of running jobs the console shows
        beside them). Other threads' calls wait until it ends."""
        with self._lock:
            conn = self.conn
            with conn.transaction():
                conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                yield

    def stats(
        self,
        *,
        window: timedelta = _stats.DEFAULT_WINDOW,
        bucket: timedelta = _stats.DEFAULT_BUCKET,
    ) -> _stats.Stats:
        """Successive calls on one Operator read only the window's newest buckets."""
        return self._run(  # type: ignore[no-any-return]
            _stats.stats, window=window, bucket=bucket, cache=self._window
        )

    def kind_stats(self, *, window: timedelta = timedelta(hours=1)) -> _kinds.KindStats:
        """Per queue and kind: completed, dead, run time p50/p95 in ``window``; live now."""
        from forklift.ops import kinds

        return self._run(kinds.kind_stats, window=window)  # type: ignore[no-any-return]

    def charts(
        self,
        *,
        window: timedelta = timedelta(hours=1),
        bucket: timedelta = timedelta(minutes=1),
        queue: str | None = None,
    ) -> _charts.ChartSeries:
        """Per bucket, for ``queue`` or all: completed, failed attempts, died, pickup lag and
        run time p50/p95 (forklift.ops.charts), in one statement."""
        from forklift.ops import charts

        return self._run(  # type: ignore[no-any-return]
            charts.chart_series, window=window, bucket=bucket, queue=queue
        )

    def jobs(
        self,
        flt: JobFilter | None = None,
        *,
        sort: Sort | str | None = None,
        limit: int = 50,
        cursor: str | None = None,
        count: bool = True,
    ) -> _jobs.JobPage:
        return self._run(  # type: ignore[no-any-return]
            _jobs.list_jobs, flt, sort=sort, limit=limit, cursor=cursor, count=count
        )

    # -- durable workflows: the outbox and events (forklift.ops.outbox, forklift.ops.events) ----
    def outbox_messages(self, **filters: Any) -> list[_outbox.OutboxMessage]:
        return self._run(_outbox.messages, **filters)  # type: ignore[no-any-return]

    def outbox_topics(self) -> list[_outbox.TopicInfo]:
        return self._run(_outbox.topics)  # type: ignore[no-any-return]

    def retry_outbox(self, **what: Any) -> list[int]:
        return self._run(_outbox.retry, **what)  # type: ignore[no-any-return]

    def events(self, **filters: Any) -> list[_events.EventInfo]:
        return self._run(_events.list_events, **filters)  # type: ignore[no-any-return]

    def event_waits(self, **filters: Any) -> list[_events.WaitInfo]:
        return self._run(_events.waits, **filters)  # type: ignore[no-any-return]

    def publish_event(self, name: str, data: Any, *, reason: str | None = None
                      ) -> _events.EventInfo:
        return self._run(_events.publish, name, data, reason=reason)  # type: ignore[no-any-return]

    def job(self, job_id: int) -> _jobs.JobDetail:
        return self._run(_jobs.show, job_id)  # type: ignore[no-any-return]

    def explain(self, job_id: int) -> _explain.Explanation:
        return self._run(_explain.explain_job, job_id)  # type: ignore[no-any-return]

    def explain_queue(self, name: str) -> _explain.Explanation:
        return self._run(_explain.explain_queue, name)  # type: ignore[no-any-return]

    def queues(self) -> list[_queues.QueueInfo]:
        return self._run(_queues.list_queues)  # type: ignore[no-any-return]

    def workers(self) -> list[_workers.WorkerInfo]:
        return self._run(_workers.list_workers)  # type: ignore[no-any-return]

    def locks(self, *, prefix: str | None = None, limit: int = 500) -> list[_locks.LockInfo]:
        """Locks with fencing tokens, held or expired (forklift.ops.locks)."""
        return self._run(_locks.list_locks, prefix=prefix, limit=limit)  # type: ignore[no-any-return]

    # -- flow control: keys, rates, fair share (forklift.ops.keys, forklift.ops.rates) ----------
    def keys(self) -> list[_keys.KeyInfo]:
        return self._run(_keys.list_keys)  # type: ignore[no-any-return]

    def key(self, name: str, *, limit: int = 200) -> _keys.KeyDetail:
        return self._run(_keys.show_key, name, limit=limit)  # type: ignore[no-any-return]

    def set_key_limit(self, name: str, limit: int | None, *, reason: str | None = None
                      ) -> _keys.KeyInfo:
        return self._run(_keys.set_limit, name, limit, reason=reason)  # type: ignore[no-any-return]

    def set_key_rate(self, name: str, rate: str | None, *, burst: int | None = None,
                     reason: str | None = None) -> _keys.KeyInfo:
        """``rate``: ``100/s``, ``10/5s``... or None to lift it."""
        parsed = _rates.parse_rate(rate, burst) if rate is not None else None
        return self._run(_keys.set_rate, name, parsed, reason=reason)  # type: ignore[no-any-return]

    def reset_key(self, name: str, *, reason: str | None = None) -> _keys.KeyInfo:
        return self._run(_keys.reset, name, reason=reason)  # type: ignore[no-any-return]

    def flow_queues(self) -> list[_rates.FlowQueue]:
        """Queues claimed through the flow claim: limits, rates, fair share, backlog."""
        return self._run(_rates.flow_queues)  # type: ignore[no-any-return]

    def queue_flow(self, queue: str) -> _rates.QueueFlow:
        return self._run(_rates.queue_flow, queue)  # type: ignore[no-any-return]

    def set_queue_rate(self, queue: str, rate: str | None, *, burst: int | None = None,
                       reason: str | None = None, create: bool = False) -> _queues.QueueInfo:
        parsed = _rates.parse_rate(rate, burst) if rate is not None else None
        return self._run(  # type: ignore[no-any-return]
            _rates.set_queue_rate, queue, parsed, reason=reason, create=create)

    def set_fair(self, queue: str, fair: bool, *, reason: str | None = None,
                 create: bool = False) -> _queues.QueueInfo:
        return self._run(  # type: ignore[no-any-return]
            _rates.set_fair, queue, fair, reason=reason, create=create)

    def audit(
        self,
        *,
        limit: int = 50,
        actor: str | None = None,
        action: str | None = None,
        since: str | datetime | None = None,
        before_id: int | None = None,
    ) -> list[_audit.AuditEntry]:
        return self._run(  # type: ignore[no-any-return]
            _audit.entries, limit=limit, actor=actor, action=action, since=since,
            before_id=before_id,
        )

    def health(self, *, overrides: dict[str, float] | None = None) -> _health.Health:
        """Table, index, connection, lock and xmin-horizon health with alerts (ops.health)."""
        return self._run(_health.health, overrides=overrides)  # type: ignore[no-any-return]

    def horizon(self, *, limit: int = 5) -> list[_horizon.HorizonHolder]:
        return self._run(_horizon.holders, limit)  # type: ignore[no-any-return]

    def set_health_threshold(
        self, name: str, value: float | None, *, reason: str | None = None
    ) -> dict[str, float]:
        return self._run(  # type: ignore[no-any-return]
            _health.set_threshold, name, value, reason=reason
        )

    def retention(self) -> _retention.Retention:
        """Retention windows per state, for every queue and per queue (ops.retention)."""
        return self._run(_retention.show)  # type: ignore[no-any-return]

    def set_retention(self, state: str, window: str | float | None, **kw: Any) -> _retention.Retention:
        """``queue``, ``create``, ``reason``: see :func:`forklift.ops.retention.set_window`."""
        return self._run(_retention.set_window, state, window, **kw)  # type: ignore[no-any-return]

    def reset_retention(self, state: str, **kw: Any) -> _retention.Retention:
        return self._run(_retention.reset_window, state, **kw)  # type: ignore[no-any-return]

    # -- acting on jobs ---------------------------------------------------------------------
    def requeue(self, job_id: int, *, reason: str | None = None) -> _actions.ActionResult:
        """A finished job runs again: fresh attempts, new fence, error history kept."""
        return self._run(_actions.act, "requeue", job_id, reason=reason)  # type: ignore[no-any-return]

    def cancel(self, job_id: int, *, reason: str | None = None) -> _actions.ActionResult:
        """Waiting jobs end cancelled at once; a running job's worker is told to stop it."""
        return self._run(_actions.act, "cancel", job_id, reason=reason)  # type: ignore[no-any-return]

    def delete(self, job_id: int, *, reason: str | None = None) -> _actions.ActionResult:
        return self._run(_actions.act, "delete", job_id, reason=reason)  # type: ignore[no-any-return]

    def run_now(self, job_id: int, *, reason: str | None = None) -> _actions.ActionResult:
        """A scheduled or retryable job becomes available now (attempts and errors kept)."""
        return self._run(_actions.act, "run_now", job_id, reason=reason)  # type: ignore[no-any-return]

    def bulk(
        self,
        action: str,
        flt: JobFilter,
        *,
        dry_run: bool = False,
        cap: int = limits.DEFAULT_CAP,
        batch_size: int = limits.DEFAULT_BATCH,
        reason: str | None = None,
    ) -> _actions.BulkReport:
        """``action`` is requeue, cancel, delete or run_now; see :func:`forklift.ops.actions.bulk`."""
        return self._run(  # type: ignore[no-any-return]
            _actions.bulk, action, flt, dry_run=dry_run, cap=cap, batch_size=batch_size,
            reason=reason,
        )

    def requeue_many(self, flt: JobFilter, **kw: Any) -> _actions.BulkReport:
        return self.bulk("requeue", flt, **kw)

    def cancel_many(self, flt: JobFilter, **kw: Any) -> _actions.BulkReport:
        return self.bulk("cancel", flt, **kw)

    def delete_many(self, flt: JobFilter, **kw: Any) -> _actions.BulkReport:
        return self.bulk("delete", flt, **kw)

    def run_now_many(self, flt: JobFilter, **kw: Any) -> _actions.BulkReport:
        return self.bulk("run_now", flt, **kw)

    def prune(self, **kw: Any) -> _prune.PruneReport:
        """See :func:`forklift.ops.prune.prune` for the arguments."""
        return self._run(_prune.prune, **kw)  # type: ignore[no-any-return]

    # -- dead letters (forklift.ops.dead) -----------------------------------------------------
    def dead_groups(
        self, *, queue: str | None = None, kind: str | None = None, limit: int = 100
    ) -> _dead.DeadGroups:
        """Every dead job grouped by kind, error code and message shape (all of them)."""
        return self._run(_dead.groups, queue=queue, kind=kind, limit=limit)  # type: ignore[no-any-return]

    def dead_group(self, group: str) -> _dead.DeadGroup:
        return self._run(_dead.get_group, group)  # type: ignore[no-any-return]

    def requeue_dead_group(self, group: str, **kw: Any) -> _actions.BulkReport:
        """``dry_run``, ``cap``, ``batch_size``, ``reason``: as :meth:`bulk`."""
        return self._run(_dead.act_on_group, "requeue", group, **kw)  # type: ignore[no-any-return]

    def delete_dead_group(self, group: str, **kw: Any) -> _actions.BulkReport:
        return self._run(_dead.act_on_group, "delete", group, **kw)  # type: ignore[no-any-return]

    # -- queues -----------------------------------------------------------------------------
    def pause(
        self,
        queue: str,
        *,
        reason: str | None = None,
        until: str | datetime | None = None,
        for_: str | float | timedelta | None = None,
        create: bool = False,
    ) -> _queues.QueueInfo:
        return self._run(  # type: ignore[no-any-return]
            _queues.pause, queue, reason=reason, until=until, for_=for_, create=create
        )

    def resume(self, queue: str, *, reason: str | None = None) -> _queues.QueueInfo:
        return self._run(_queues.resume, queue, reason=reason)  # type: ignore[no-any-return]

    def set_concurrency(
        self, queue: str, limit: int | None, *, reason: str | None = None, create: bool = False
    ) -> _queues.QueueInfo:
        return self._run(  # type: ignore[no-any-return]
            _queues.set_concurrency, queue, limit, reason=reason, create=create
        )

    # -- batches (see forklift.ops.batches) ---------------------------------------------------
    def batches(
        self,
        *,
        state: str | None = None,
        caller: str | None = None,
        limit: int = 50,
        before_id: int | None = None,
    ) -> list[Batch]:
        return self._run(  # type: ignore[no-any-return]
            _batches.list_batches, state=state, caller=caller, limit=limit, before_id=before_id
        )

    def batch(
        self,
        batch_id: int,
        *,
        states: list[str] | None = None,
        after_index: int = -1,
        limit: int = 100,
    ) -> _batches.BatchDetail:
        """Progress, rate, ETA and a page of targets (with result or error)."""
        return self._run(  # type: ignore[no-any-return]
            _batches.show, batch_id, states=states, after_index=after_index, limit=limit
        )

    def live_batches(self) -> int:
        return self._run(_batches.count_live)  # type: ignore[no-any-return]

    def cancel_batch(self, batch_id: int, *, reason: str | None = None) -> bool:
        """Waiting targets end at once; in-flight ones finish. False if unknown or finished."""
        return self._run(_batches.cancel, batch_id, reason=reason)  # type: ignore[no-any-return]

    def retry_batch(self, batch_id: int, *, reason: str | None = None) -> int:
        """Requeue the batch's failed targets; returns how many."""
        return self._run(_batches.retry_failed, batch_id, reason=reason)  # type: ignore[no-any-return]

    # -- schedules and backfills (forklift.ops.schedules, forklift.ops.backfills) ---------------
    def schedules(self) -> list[_schedules.ScheduleInfo]:
        return self._run(_schedules.list_schedules)  # type: ignore[no-any-return]

    def schedule(self, name: str) -> _schedules.ScheduleInfo:
        return self._run(_schedules.get_schedule, name)  # type: ignore[no-any-return]

    def pause_schedule(self, name: str, *, reason: str | None = None) -> _schedules.ScheduleInfo:
        return self._run(_schedules.pause, name, reason=reason)  # type: ignore[no-any-return]

    def resume_schedule(self, name: str, *, reason: str | None = None) -> _schedules.ScheduleInfo:
        return self._run(_schedules.resume, name, reason=reason)  # type: ignore[no-any-return]

    def run_schedule_now(self, name: str, *, reason: str | None = None) -> _schedules.RunNow:
        return self._run(_schedules.run_now, name, reason=reason)  # type: ignore[no-any-return]

    def backfills(self) -> list[_backfills.BackfillInfo]:
        return self._run(_backfills.list_backfills)  # type: ignore[no-any-return]

    def backfill(self, name: str) -> _backfills.BackfillInfo:
        return self._run(_backfills.get_backfill, name)  # type: ignore[no-any-return]

    def backfill_runs(self, name: str, limit: int = 10) -> list[_backfills.BackfillInfo]:
        return self._run(_backfills.history, name, limit)  # type: ignore[no-any-return]

    def start_backfill(self, name: str, **kw: Any) -> _backfills.StartResult:
        """``from_cursor``, ``rate``, ``force``, ``definition``, ``reason``: see ops.backfills.start."""
        return self._run(_backfills.start, name, **kw)  # type: ignore[no-any-return]

    def pause_backfill(self, name: str, *, reason: str | None = None) -> _backfills.BackfillInfo:
        return self._run(_backfills.pause, name, reason=reason)  # type: ignore[no-any-return]

    def resume_backfill(self, name: str, *, reason: str | None = None) -> _backfills.BackfillInfo:
        return self._run(_backfills.resume, name, reason=reason)  # type: ignore[no-any-return]

    def cancel_backfill(self, name: str, *, reason: str | None = None) -> _backfills.BackfillInfo:
        return self._run(_backfills.cancel, name, reason=reason)  # type: ignore[no-any-return]

    def set_backfill_rate(
        self, name: str, rate: float, *, reason: str | None = None
    ) -> _backfills.BackfillInfo:
        return self._run(_backfills.set_rate, name, rate, reason=reason)  # type: ignore[no-any-return]

    def scale_backfill_rate(
        self, name: str, factor: float, *, reason: str | None = None
    ) -> _backfills.BackfillInfo:
        """Multiply the live run's rate by ``factor``, from its value when the change lands."""
        return self._run(_backfills.scale_rate, name, factor, reason=reason)  # type: ignore[no-any-return]
