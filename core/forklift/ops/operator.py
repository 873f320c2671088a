"""The :class:`Operator`: every operator call, for the CLI, the console and scripts alike,
grouped in typed feature clients that share one session.

    from forklift.ops import Operator, JobFilter

    with Operator(actor="alice") as op:
        print(op.stats.get().totals.counts)
        report = op.jobs.requeue_many(JobFilter.build(states="dead", queues="mail"), dry_run=True)
        print(report.matched, report.sample_ids)

Each call returns a dataclass whose ``to_json()`` gives the documented JSON shape. The module
functions (``forklift.ops.stats.stats(conn, ctx)`` ...) take a connection and an
:class:`OpsContext` instead, for callers that bring their own connection.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from functools import cached_property
from types import TracebackType
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, Self, TypeVar

import psycopg

from forklift.ops import limits
from forklift.ops._operator_session import OperatorSession
from forklift.ops.context import OpsContext
from forklift.ops.replica import DEFAULT_MAX_LAG

if TYPE_CHECKING:
    from forklift.ops import actions as _actions
    from forklift.ops import backfills as _backfills
    from forklift.ops import batches as _batches
    from forklift.ops import charts as _charts
    from forklift.ops import dead as _dead
    from forklift.ops import events as _events
    from forklift.ops import explain as _explain
    from forklift.ops import horizon as _horizon
    from forklift.ops import jobs as _jobs
    from forklift.ops import keys as _keys
    from forklift.ops import kinds as _kinds
    from forklift.ops import outbox as _outbox
    from forklift.ops import prune as _prune
    from forklift.ops import queues as _queues
    from forklift.ops import rates as _rates
    from forklift.ops import retention as _retention
    from forklift.ops import schedules as _schedules
    from forklift.ops._clients.audit import AuditClient
    from forklift.ops._clients.backfills import BackfillsClient
    from forklift.ops._clients.batches import BatchesClient
    from forklift.ops._clients.consumers import ConsumersClient
    from forklift.ops._clients.dead import DeadClient
    from forklift.ops._clients.events import EventsClient
    from forklift.ops._clients.health import HealthClient
    from forklift.ops._clients.jobs import JobsClient
    from forklift.ops._clients.keys import KeysClient
    from forklift.ops._clients.kinds import KindsClient
    from forklift.ops._clients.locks import LocksClient
    from forklift.ops._clients.outbox import OutboxClient
    from forklift.ops._clients.queues import QueuesClient
    from forklift.ops._clients.retention import RetentionClient
    from forklift.ops._clients.schedules import SchedulesClient
    from forklift.ops._clients.stats import StatsClient
    from forklift.ops._clients.webhooks import WebhooksClient
    from forklift.ops._clients.workers import WorkersClient
    from forklift.ops._clients.workflows import WorkflowsClient
    from forklift.ops.filters import JobFilter

__all__ = ["Operator"]

T = TypeVar("T")
P = ParamSpec("P")


class Operator:
    """Operator calls against one database and schema, as ``actor``, in feature clients:

    ============== =========================================================================
    ``jobs``       list, show, explain; requeue, cancel, delete, run now (one, or ``*_many``
                   and ``bulk`` on a filter)
    ``queues``     list, explain; pause, resume, concurrency, rate, fair share; flow view
    ``dead``       dead-letter groups; requeue or delete a group
    ``batches``    list, show, live count; cancel, retry the failed targets
    ``backfills``  list, show, runs; start, pause, resume, cancel, set or scale the rate
    ``schedules``  list, show; pause, resume, run now
    ``workers``    list
    ``stats``      get (per queue and totals), kinds, charts
    ``audit``      list
    ``keys``       list, show; set limit or rate, reset
    ``locks``      list
    ``outbox``     messages, topics; retry
    ``events``     list, waits; publish
    ``health``     get, horizon; set a threshold
    ``retention``  show; set or reset a window; prune
    ``consumers``  list, show; pause, resume, reset the cursor
    ``webhooks``   endpoints, attempts; enable, disable an endpoint
    ``workflows``  replay from a step; pause, resume a workflow; the pauses in force
    ``kinds``      pause, resume every job of a kind
    ============== =========================================================================

    ::

        with Operator(actor="alice") as op:
            page = op.jobs.list(JobFilter.build(states="dead"), limit=20)
            op.queues.pause("mail", for_="30m", reason="provider outage")
            after = op.dry_run(lambda o: o.queues.resume("mail"))

    The flat names of earlier versions (``op.jobs(...)``, ``op.pause(...)``,
    ``op.dead_groups()`` ...) remain as deprecated aliases of the client calls; a client whose
    name was a call (``op.jobs``, ``op.queues``, ``op.stats`` ...) still answers it when called.

    ``dsn``: ``--dsn`` > FORKLIFT_DSN > DATABASE_URL > the embedded server. ``actor``: else
    FORKLIFT_ACTOR, else the OS user. ``read_only``: or FORKLIFT_READ_ONLY; every mutating call
    then raises :class:`forklift._base.errors.ReadOnly`, and the session itself is opened read-only.
    ``conn``: use this connection instead of opening one (it is not closed by :meth:`close`).

    ``replica_dsn``: a streaming replica for the calls that only read (lists, shows, stats,
    charts, explain, audit...). Every change, its audit row and every claim stay on the
    primary, and so do reads of the primary server's own state (``op.health``). A read goes to
    the primary instead while the replica lags more than ``replica_max_lag`` seconds, cannot be
    reached (tried again after ``replica_retry`` seconds), is not a standby, or has not yet
    replayed a change this Operator made; ``op.session.replica`` says where the last read went
    and why, and ``op.session.check_replica()`` refuses a replica that is not a standby. The
    replica never makes a read fail. Scripts opt in here; the CLI and the console also read
    ``--replica-dsn`` / FORKLIFT_REPLICA_DSN.

    One connection to the primary serves every call of every client (and one to the replica,
    if given, its reads); calls from several threads are serialised (:class:`forklift.ops._operator_session.OperatorSession`). Each client's module
    loads when the client is first named, so a script that reads the stats loads no action.
    """

    def __init__(
        self,
        dsn: str | None = None,
        *,
        schema: str | None = None,
        actor: str | None = None,
        read_only: bool | None = None,
        conn: psycopg.Connection[Any] | None = None,
        replica_dsn: str | None = None,
        replica_max_lag: float = DEFAULT_MAX_LAG,
        replica_retry: float = 10.0,
    ) -> None:
        #: The one session every client's calls run on.
        self.session = OperatorSession(
            dsn, schema=schema, actor=actor, read_only=read_only, conn=conn,
            replica_dsn=replica_dsn, replica_max_lag=replica_max_lag,
            replica_retry=replica_retry,
        )

    # -- the feature clients --------------------------------------------------------------------
    @cached_property
    def jobs(self) -> JobsClient:
        from forklift.ops._clients.jobs import JobsClient

        return JobsClient(self.session)

    @cached_property
    def queues(self) -> QueuesClient:
        from forklift.ops._clients.queues import QueuesClient

        return QueuesClient(self.session)

    @cached_property
    def dead(self) -> DeadClient:
        from forklift.ops._clients.dead import DeadClient

        return DeadClient(self.session)

    @cached_property
    def batches(self) -> BatchesClient:
        from forklift.ops._clients.batches import BatchesClient

        return BatchesClient(self.session)

    @cached_property
    def backfills(self) -> BackfillsClient:
        from forklift.ops._clients.backfills import BackfillsClient

        return BackfillsClient(self.session)

    @cached_property
    def schedules(self) -> SchedulesClient:
        from forklift.ops._clients.schedules import SchedulesClient

        return SchedulesClient(self.session)

    @cached_property
    def workers(self) -> WorkersClient:
        from forklift.ops._clients.workers import WorkersClient

        return WorkersClient(self.session)

    @cached_property
    def stats(self) -> StatsClient:
        from forklift.ops._clients.stats import StatsClient

        return StatsClient(self.session)

    @cached_property
    def audit(self) -> AuditClient:
        from forklift.ops._clients.audit import AuditClient

        return AuditClient(self.session)

    @cached_property
    def keys(self) -> KeysClient:
        from forklift.ops._clients.keys import KeysClient

        return KeysClient(self.session)

    @cached_property
    def locks(self) -> LocksClient:
        from forklift.ops._clients.locks import LocksClient

        return LocksClient(self.session)

    @cached_property
    def outbox(self) -> OutboxClient:
        from forklift.ops._clients.outbox import OutboxClient

        return OutboxClient(self.session)

    @cached_property
    def webhooks(self) -> WebhooksClient:
        from forklift.ops._clients.webhooks import WebhooksClient

        return WebhooksClient(self.session)

    @cached_property
    def events(self) -> EventsClient:
        from forklift.ops._clients.events import EventsClient

        return EventsClient(self.session)

    @cached_property
    def health(self) -> HealthClient:
        from forklift.ops._clients.health import HealthClient

        return HealthClient(self.session)

    @cached_property
    def retention(self) -> RetentionClient:
        from forklift.ops._clients.retention import RetentionClient

        return RetentionClient(self.session)

    @cached_property
    def consumers(self) -> ConsumersClient:
        from forklift.ops._clients.consumers import ConsumersClient

        return ConsumersClient(self.session)

    @cached_property
    def kinds(self) -> KindsClient:
        from forklift.ops._clients.kinds import KindsClient

        return KindsClient(self.session)

    @cached_property
    def workflows(self) -> WorkflowsClient:
        from forklift.ops._clients.workflows import WorkflowsClient

        return WorkflowsClient(self.session)

    # -- the session ----------------------------------------------------------------------------
    @property
    def ctx(self) -> OpsContext:
        """Schema, actor and read-only mode (inside :meth:`dry_run`, on its thread, writable)."""
        return self.session.ctx

    @ctx.setter
    def ctx(self, value: OpsContext) -> None:
        self.session.ctx = value

    @property
    def schema(self) -> str:
        return self.session.schema

    @property
    def actor(self) -> str:
        return self.session.actor

    @property
    def read_only(self) -> bool:
        return self.session.read_only

    @property
    def conn(self) -> psycopg.Connection[Any]:
        return self.session.conn

    def abort(self) -> None:
        """Cut off a call that hangs (a server that stopped answering): shut this operator's
        session's socket, so the waiting call fails like a dropped connection and the next
        call reconnects. Safe from another thread; opens nothing; never raises."""
        self.session.abort()

    def check_role(self) -> bool:
        """Connect now and say whether this Operator is read-only (asked for, or because its
        database role may not write)."""
        return self.session.check_role()

    def close(self) -> None:
        self.session.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _run(
        self,
        fn: Callable[Concatenate[psycopg.Connection[Any], OpsContext, P], T],
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        """A module function on this Operator's session (:meth:`OperatorSession.run`)."""
        return self.session.run(fn, *args, **kwargs)

    def dry_run(self, fn: Callable[[Self], T]) -> T:
        """Rehearse ``fn(self)``: its calls run for real inside one transaction that is always
        rolled back, so the result (and any refusal) is exactly what acting would give, and
        nothing changes: no row, no audit entry, no NOTIFY. Works in read-only mode too (the
        rehearsal may write; it can never commit). Sequences (ids, fences) still advance.

            after = op.dry_run(lambda o: o.queues.pause("mail", for_="30m"))   # a QueueInfo
        """
        return self.session.rehearse(lambda: fn(self))

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[None]:
        """Calls made inside share one read-only snapshot (REPEATABLE READ), so figures read
        by several calls agree (the stats and the list of running jobs the console shows
        beside them). Other threads' calls wait until it ends."""
        with self.session.snapshot():
            yield

    # -- deprecated flat names: each calls its client ------------------------------------------
    def kind_stats(self, *, window: timedelta = timedelta(hours=1)) -> _kinds.KindStats:
        """Deprecated: use ``op.stats.kinds()``."""
        return self.stats.kinds(window=window)

    def charts(
        self,
        *,
        window: timedelta = timedelta(hours=1),
        bucket: timedelta = timedelta(minutes=1),
        queue: str | None = None,
    ) -> _charts.ChartSeries:
        """Deprecated: use ``op.stats.charts()``."""
        return self.stats.charts(window=window, bucket=bucket, queue=queue)

    def job(self, job_id: int) -> _jobs.JobDetail:
        """Deprecated: use ``op.jobs.show()``."""
        return self.jobs.show(job_id)

    def explain(self, job_id: int) -> _explain.Explanation:
        """Deprecated: use ``op.jobs.explain()``."""
        return self.jobs.explain(job_id)

    def requeue(self, job_id: int, *, reason: str | None = None) -> _actions.ActionResult:
        """Deprecated: use ``op.jobs.requeue()``."""
        return self.jobs.requeue(job_id, reason=reason)

    def cancel(self, job_id: int, *, reason: str | None = None) -> _actions.ActionResult:
        """Deprecated: use ``op.jobs.cancel()``."""
        return self.jobs.cancel(job_id, reason=reason)

    def delete(self, job_id: int, *, reason: str | None = None) -> _actions.ActionResult:
        """Deprecated: use ``op.jobs.delete()``."""
        return self.jobs.delete(job_id, reason=reason)

    def run_now(self, job_id: int, *, reason: str | None = None) -> _actions.ActionResult:
        """Deprecated: use ``op.jobs.run_now()``."""
        return self.jobs.run_now(job_id, reason=reason)

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
        """Deprecated: use ``op.jobs.bulk()``."""
        return self.jobs.bulk(action, flt, dry_run=dry_run, cap=cap, batch_size=batch_size,
                              reason=reason)

    def requeue_many(self, flt: JobFilter, **kw: Any) -> _actions.BulkReport:
        """Deprecated: use ``op.jobs.requeue_many()``."""
        return self.jobs.requeue_many(flt, **kw)

    def cancel_many(self, flt: JobFilter, **kw: Any) -> _actions.BulkReport:
        """Deprecated: use ``op.jobs.cancel_many()``."""
        return self.jobs.cancel_many(flt, **kw)

    def delete_many(self, flt: JobFilter, **kw: Any) -> _actions.BulkReport:
        """Deprecated: use ``op.jobs.delete_many()``."""
        return self.jobs.delete_many(flt, **kw)

    def run_now_many(self, flt: JobFilter, **kw: Any) -> _actions.BulkReport:
        """Deprecated: use ``op.jobs.run_now_many()``."""
        return self.jobs.run_now_many(flt, **kw)

    def explain_queue(self, name: str) -> _explain.Explanation:
        """Deprecated: use ``op.queues.explain()``."""
        return self.queues.explain(name)

    def pause(
        self,
        queue: str,
        *,
        reason: str | None = None,
        until: str | datetime | None = None,
        for_: str | float | timedelta | None = None,
        create: bool = False,
    ) -> _queues.QueueInfo:
        """Deprecated: use ``op.queues.pause()``."""
        return self.queues.pause(queue, reason=reason, until=until, for_=for_, create=create)

    def resume(self, queue: str, *, reason: str | None = None) -> _queues.QueueInfo:
        """Deprecated: use ``op.queues.resume()``."""
        return self.queues.resume(queue, reason=reason)

    def set_concurrency(
        self, queue: str, limit: int | None, *, reason: str | None = None, create: bool = False
    ) -> _queues.QueueInfo:
        """Deprecated: use ``op.queues.set_concurrency()``."""
        return self.queues.set_concurrency(queue, limit, reason=reason, create=create)

    def set_queue_rate(self, queue: str, rate: str | None, *, burst: int | None = None,
                       reason: str | None = None, create: bool = False) -> _queues.QueueInfo:
        """Deprecated: use ``op.queues.set_rate()``."""
        return self.queues.set_rate(queue, rate, burst=burst, reason=reason, create=create)

    def set_fair(self, queue: str, fair: bool, *, reason: str | None = None,
                 create: bool = False) -> _queues.QueueInfo:
        """Deprecated: use ``op.queues.set_fair()``."""
        return self.queues.set_fair(queue, fair, reason=reason, create=create)

    def flow_queues(self) -> list[_rates.FlowQueue]:
        """Deprecated: use ``op.queues.flows()``."""
        return self.queues.flows()

    def queue_flow(self, queue: str) -> _rates.QueueFlow:
        """Deprecated: use ``op.queues.flow()``."""
        return self.queues.flow(queue)

    def dead_groups(
        self, *, queue: str | None = None, kind: str | None = None, limit: int = 100
    ) -> _dead.DeadGroups:
        """Deprecated: use ``op.dead.groups()``."""
        return self.dead.groups(queue=queue, kind=kind, limit=limit)

    def dead_group(self, group: str) -> _dead.DeadGroup:
        """Deprecated: use ``op.dead.group()``."""
        return self.dead.group(group)

    def requeue_dead_group(self, group: str, **kw: Any) -> _actions.BulkReport:
        """Deprecated: use ``op.dead.requeue_group()``."""
        return self.dead.requeue_group(group, **kw)

    def delete_dead_group(self, group: str, **kw: Any) -> _actions.BulkReport:
        """Deprecated: use ``op.dead.delete_group()``."""
        return self.dead.delete_group(group, **kw)

    def batch(
        self,
        batch_id: int,
        *,
        states: list[str] | None = None,
        after_index: int = -1,
        limit: int = 100,
    ) -> _batches.BatchDetail:
        """Deprecated: use ``op.batches.show()``."""
        return self.batches.show(batch_id, states=states, after_index=after_index, limit=limit)

    def live_batches(self) -> int:
        """Deprecated: use ``op.batches.live()``."""
        return self.batches.live()

    def cancel_batch(self, batch_id: int, *, reason: str | None = None) -> bool:
        """Deprecated: use ``op.batches.cancel()``."""
        return self.batches.cancel(batch_id, reason=reason)

    def retry_batch(self, batch_id: int, *, reason: str | None = None) -> int:
        """Deprecated: use ``op.batches.retry()``."""
        return self.batches.retry(batch_id, reason=reason)

    def backfill(self, name: str) -> _backfills.BackfillInfo:
        """Deprecated: use ``op.backfills.show()``."""
        return self.backfills.show(name)

    def backfill_runs(self, name: str, limit: int = 10) -> list[_backfills.BackfillInfo]:
        """Deprecated: use ``op.backfills.runs()``."""
        return self.backfills.runs(name, limit)

    def start_backfill(self, name: str, **kw: Any) -> _backfills.StartResult:
        """Deprecated: use ``op.backfills.start()``."""
        return self.backfills.start(name, **kw)

    def pause_backfill(self, name: str, *, reason: str | None = None) -> _backfills.BackfillInfo:
        """Deprecated: use ``op.backfills.pause()``."""
        return self.backfills.pause(name, reason=reason)

    def resume_backfill(self, name: str, *, reason: str | None = None) -> _backfills.BackfillInfo:
        """Deprecated: use ``op.backfills.resume()``."""
        return self.backfills.resume(name, reason=reason)

    def cancel_backfill(self, name: str, *, reason: str | None = None) -> _backfills.BackfillInfo:
        """Deprecated: use ``op.backfills.cancel()``."""
        return self.backfills.cancel(name, reason=reason)

    def set_backfill_rate(
        self, name: str, rate: float, *, reason: str | None = None
    ) -> _backfills.BackfillInfo:
        """Deprecated: use ``op.backfills.set_rate()``."""
        return self.backfills.set_rate(name, rate, reason=reason)

    def scale_backfill_rate(
        self, name: str, factor: float, *, reason: str | None = None
    ) -> _backfills.BackfillInfo:
        """Deprecated: use ``op.backfills.scale_rate()``."""
        return self.backfills.scale_rate(name, factor, reason=reason)

    def schedule(self, name: str) -> _schedules.ScheduleInfo:
        """Deprecated: use ``op.schedules.show()``."""
        return self.schedules.show(name)

    def pause_schedule(self, name: str, *, reason: str | None = None) -> _schedules.ScheduleInfo:
        """Deprecated: use ``op.schedules.pause()``."""
        return self.schedules.pause(name, reason=reason)

    def resume_schedule(self, name: str, *, reason: str | None = None) -> _schedules.ScheduleInfo:
        """Deprecated: use ``op.schedules.resume()``."""
        return self.schedules.resume(name, reason=reason)

    def run_schedule_now(self, name: str, *, reason: str | None = None) -> _schedules.RunNow:
        """Deprecated: use ``op.schedules.run_now()``."""
        return self.schedules.run_now(name, reason=reason)

    def key(self, name: str, *, limit: int = 200) -> _keys.KeyDetail:
        """Deprecated: use ``op.keys.show()``."""
        return self.keys.show(name, limit=limit)

    def set_key_limit(self, name: str, limit: int | None, *, reason: str | None = None
                      ) -> _keys.KeyInfo:
        """Deprecated: use ``op.keys.set_limit()``."""
        return self.keys.set_limit(name, limit, reason=reason)

    def set_key_rate(self, name: str, rate: str | None, *, burst: int | None = None,
                     reason: str | None = None) -> _keys.KeyInfo:
        """Deprecated: use ``op.keys.set_rate()``."""
        return self.keys.set_rate(name, rate, burst=burst, reason=reason)

    def reset_key(self, name: str, *, reason: str | None = None) -> _keys.KeyInfo:
        """Deprecated: use ``op.keys.reset()``."""
        return self.keys.reset(name, reason=reason)

    def outbox_messages(self, **filters: Any) -> list[_outbox.OutboxMessage]:
        """Deprecated: use ``op.outbox.messages()``."""
        return self.outbox.messages(**filters)

    def outbox_topics(self) -> list[_outbox.TopicInfo]:
        """Deprecated: use ``op.outbox.topics()``."""
        return self.outbox.topics()

    def retry_outbox(self, **what: Any) -> list[int]:
        """Deprecated: use ``op.outbox.retry()``."""
        return self.outbox.retry(**what)

    def event_waits(self, **filters: Any) -> list[_events.WaitInfo]:
        """Deprecated: use ``op.events.waits()``."""
        return self.events.waits(**filters)

    def publish_event(self, name: str, data: Any, *, reason: str | None = None
                      ) -> _events.EventInfo:
        """Deprecated: use ``op.events.publish()``."""
        return self.events.publish(name, data, reason=reason)

    def horizon(self, *, limit: int = 5) -> list[_horizon.HorizonHolder]:
        """Deprecated: use ``op.health.horizon()``."""
        return self.health.horizon(limit=limit)

    def set_health_threshold(
        self, name: str, value: float | None, *, reason: str | None = None
    ) -> dict[str, float]:
        """Deprecated: use ``op.health.set_threshold()``."""
        return self.health.set_threshold(name, value, reason=reason)

    def set_retention(self, state: str, window: str | float | None, **kw: Any
                      ) -> _retention.Retention:
        """Deprecated: use ``op.retention.set_window()``."""
        return self.retention.set_window(state, window, **kw)

    def reset_retention(self, state: str, **kw: Any) -> _retention.Retention:
        """Deprecated: use ``op.retention.reset_window()``."""
        return self.retention.reset_window(state, **kw)

    def prune(self, **kw: Any) -> _prune.PruneReport:
        """Deprecated: use ``op.retention.prune()``."""
        return self.retention.prune(**kw)
