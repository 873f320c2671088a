"""The Operator's calls that change something: actions on jobs (one, or in bulk on a filter),
dead-letter groups, queues, flow control, health thresholds, retention, the outbox and events,
batches, schedules and backfills. Each refuses in read-only mode and is audited (in the module
it calls); :class:`forklift.ops.operator.Operator` has them all."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from forklift.ops import limits
from forklift.ops._operator_session import OperatorSession

if TYPE_CHECKING:
    from forklift.ops import actions as _actions
    from forklift.ops import backfills as _backfills
    from forklift.ops import batches as _batches
    from forklift.ops import dead as _dead
    from forklift.ops import events as _events
    from forklift.ops import health as _health
    from forklift.ops import keys as _keys
    from forklift.ops import outbox as _outbox
    from forklift.ops import prune as _prune
    from forklift.ops import queues as _queues
    from forklift.ops import rates as _rates
    from forklift.ops import retention as _retention
    from forklift.ops import schedules as _schedules
    from forklift.ops.filters import JobFilter
else:
    # Each module loads on the first call that needs it (forklift.ops._lazy).
    from forklift.ops._lazy import lazy_modules

    (_actions, _backfills, _batches, _dead, _events, _health, _keys, _outbox, _prune, _queues,
     _rates, _retention, _schedules) = lazy_modules(
        "actions", "backfills", "batches", "dead", "events", "health", "keys", "outbox", "prune",
        "queues", "rates", "retention", "schedules")

__all__ = ["OperatorActions"]


class OperatorActions(OperatorSession):
    """What the Operator changes; its reads are in :mod:`forklift.ops.operator`."""

    # -- acting on jobs ------------------------------------------------------------------------
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

    # -- dead letters (forklift.ops.dead) ------------------------------------------------------
    def requeue_dead_group(self, group: str, **kw: Any) -> _actions.BulkReport:
        """``dry_run``, ``cap``, ``batch_size``, ``reason``: as :meth:`bulk`."""
        return self._run(_dead.act_on_group, "requeue", group, **kw)  # type: ignore[no-any-return]

    def delete_dead_group(self, group: str, **kw: Any) -> _actions.BulkReport:
        return self._run(_dead.act_on_group, "delete", group, **kw)  # type: ignore[no-any-return]

    # -- queues --------------------------------------------------------------------------------
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

    # -- flow control: keys, rates, fair share (forklift.ops.keys, forklift.ops.rates) ---------
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

    def set_queue_rate(self, queue: str, rate: str | None, *, burst: int | None = None,
                       reason: str | None = None, create: bool = False) -> _queues.QueueInfo:
        parsed = _rates.parse_rate(rate, burst) if rate is not None else None
        return self._run(  # type: ignore[no-any-return]
            _rates.set_queue_rate, queue, parsed, reason=reason, create=create)

    def set_fair(self, queue: str, fair: bool, *, reason: str | None = None,
                 create: bool = False) -> _queues.QueueInfo:
        return self._run(  # type: ignore[no-any-return]
            _rates.set_fair, queue, fair, reason=reason, create=create)

    # -- health thresholds and retention windows -----------------------------------------------
    def set_health_threshold(
        self, name: str, value: float | None, *, reason: str | None = None
    ) -> dict[str, float]:
        return self._run(  # type: ignore[no-any-return]
            _health.set_threshold, name, value, reason=reason
        )

    def set_retention(self, state: str, window: str | float | None, **kw: Any) -> _retention.Retention:
        """``queue``, ``create``, ``reason``: see :func:`forklift.ops.retention.set_window`."""
        return self._run(_retention.set_window, state, window, **kw)  # type: ignore[no-any-return]

    def reset_retention(self, state: str, **kw: Any) -> _retention.Retention:
        return self._run(_retention.reset_window, state, **kw)  # type: ignore[no-any-return]

    # -- durable workflows: the outbox and events ----------------------------------------------
    def retry_outbox(self, **what: Any) -> list[int]:
        return self._run(_outbox.retry, **what)  # type: ignore[no-any-return]

    def publish_event(self, name: str, data: Any, *, reason: str | None = None
                      ) -> _events.EventInfo:
        return self._run(_events.publish, name, data, reason=reason)  # type: ignore[no-any-return]

    # -- batches (forklift.ops.batches) --------------------------------------------------------
    def cancel_batch(self, batch_id: int, *, reason: str | None = None) -> bool:
        """Waiting targets end at once; in-flight ones finish. False if unknown or finished."""
        return self._run(_batches.cancel, batch_id, reason=reason)  # type: ignore[no-any-return]

    def retry_batch(self, batch_id: int, *, reason: str | None = None) -> int:
        """Requeue the batch's failed targets; returns how many."""
        return self._run(_batches.retry_failed, batch_id, reason=reason)  # type: ignore[no-any-return]

    # -- schedules and backfills (forklift.ops.schedules, forklift.ops.backfills) --------------
    def pause_schedule(self, name: str, *, reason: str | None = None) -> _schedules.ScheduleInfo:
        return self._run(_schedules.pause, name, reason=reason)  # type: ignore[no-any-return]

    def resume_schedule(self, name: str, *, reason: str | None = None) -> _schedules.ScheduleInfo:
        return self._run(_schedules.resume, name, reason=reason)  # type: ignore[no-any-return]

    def run_schedule_now(self, name: str, *, reason: str | None = None) -> _schedules.RunNow:
        return self._run(_schedules.run_now, name, reason=reason)  # type: ignore[no-any-return]

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
