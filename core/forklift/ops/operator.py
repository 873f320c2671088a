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

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from forklift.ops import stats as _stats
from forklift.ops._operator_actions import OperatorActions

if TYPE_CHECKING:
    from forklift._features.batches import Batch
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
    from forklift.ops import queues as _queues
    from forklift.ops import rates as _rates
    from forklift.ops import retention as _retention
    from forklift.ops import schedules as _schedules
    from forklift.ops import workers as _workers
    from forklift.ops.filters import JobFilter, Sort
else:
    # Each module loads on the first call that needs it (forklift.ops._lazy).
    from forklift.ops._lazy import lazy_modules

    (_audit, _backfills, _batches, _dead, _events, _explain, _health, _horizon, _jobs, _keys,
     _locks, _outbox, _queues, _rates, _retention, _schedules, _workers) = lazy_modules(
        "audit", "backfills", "batches", "dead", "events", "explain", "health", "horizon", "jobs",
        "keys", "locks", "outbox", "queues", "rates", "retention", "schedules", "workers")

__all__ = ["Operator"]


class Operator(OperatorActions):
    """Operator calls against one database and schema, as ``actor``.

    ``dsn``: ``--dsn`` > FORKLIFT_DSN > DATABASE_URL > the embedded server. ``actor``: else
    FORKLIFT_ACTOR, else the OS user. ``read_only``: or FORKLIFT_READ_ONLY; every mutating call
    then raises :class:`forklift._base.errors.ReadOnly`, and the session itself is opened read-only.
    ``conn``: use this connection instead of opening one (it is not closed by :meth:`close`).

    One connection serves every call; calls from several threads are serialised
    (:mod:`forklift.ops._operator_session`). The calls that change something are in
    :mod:`forklift.ops._operator_actions`; the reads are here.
    """

    # -- reading -------------------------------------------------------------------------------
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

    # -- durable workflows: the outbox and events (forklift.ops.outbox, forklift.ops.events) ---
    def outbox_messages(self, **filters: Any) -> list[_outbox.OutboxMessage]:
        return self._run(_outbox.messages, **filters)  # type: ignore[no-any-return]

    def outbox_topics(self) -> list[_outbox.TopicInfo]:
        return self._run(_outbox.topics)  # type: ignore[no-any-return]

    def events(self, **filters: Any) -> list[_events.EventInfo]:
        return self._run(_events.list_events, **filters)  # type: ignore[no-any-return]

    def event_waits(self, **filters: Any) -> list[_events.WaitInfo]:
        return self._run(_events.waits, **filters)  # type: ignore[no-any-return]

    # -- flow control: keys, rates, fair share (forklift.ops.keys, forklift.ops.rates) ---------
    def keys(self) -> list[_keys.KeyInfo]:
        return self._run(_keys.list_keys)  # type: ignore[no-any-return]

    def key(self, name: str, *, limit: int = 200) -> _keys.KeyDetail:
        return self._run(_keys.show_key, name, limit=limit)  # type: ignore[no-any-return]

    def flow_queues(self) -> list[_rates.FlowQueue]:
        """Queues claimed through the flow claim: limits, rates, fair share, backlog."""
        return self._run(_rates.flow_queues)  # type: ignore[no-any-return]

    def queue_flow(self, queue: str) -> _rates.QueueFlow:
        return self._run(_rates.queue_flow, queue)  # type: ignore[no-any-return]

    # -- audit, health, retention --------------------------------------------------------------
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

    def retention(self) -> _retention.Retention:
        """Retention windows per state, for every queue and per queue (ops.retention)."""
        return self._run(_retention.show)  # type: ignore[no-any-return]

    # -- dead letters (forklift.ops.dead) ------------------------------------------------------
    def dead_groups(
        self, *, queue: str | None = None, kind: str | None = None, limit: int = 100
    ) -> _dead.DeadGroups:
        """Every dead job grouped by kind, error code and message shape (all of them)."""
        return self._run(_dead.groups, queue=queue, kind=kind, limit=limit)  # type: ignore[no-any-return]

    def dead_group(self, group: str) -> _dead.DeadGroup:
        return self._run(_dead.get_group, group)  # type: ignore[no-any-return]

    # -- batches (see forklift.ops.batches) ----------------------------------------------------
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

    # -- schedules and backfills (forklift.ops.schedules, forklift.ops.backfills) --------------
    def schedules(self) -> list[_schedules.ScheduleInfo]:
        return self._run(_schedules.list_schedules)  # type: ignore[no-any-return]

    def schedule(self, name: str) -> _schedules.ScheduleInfo:
        return self._run(_schedules.get_schedule, name)  # type: ignore[no-any-return]

    def backfills(self) -> list[_backfills.BackfillInfo]:
        return self._run(_backfills.list_backfills)  # type: ignore[no-any-return]

    def backfill(self, name: str) -> _backfills.BackfillInfo:
        return self._run(_backfills.get_backfill, name)  # type: ignore[no-any-return]

    def backfill_runs(self, name: str, limit: int = 10) -> list[_backfills.BackfillInfo]:
        return self._run(_backfills.history, name, limit)  # type: ignore[no-any-return]
