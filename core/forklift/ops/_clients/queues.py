"""``op.queues``: list and explain queues; pause, resume, concurrency limit, rate and fair
share; the flow claim's view of them (limits, rates, fair share, backlog); the autoscaling
signal (how many workers each needs)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from forklift.ops import aging as _aging
from forklift.ops import ceiling as _ceiling
from forklift.ops import explain as _explain
from forklift.ops import queues as _queues
from forklift.ops import rates as _rates
from forklift.ops import scale as _scale
from forklift.ops._clients.client import FeatureClient

__all__ = ["QueuesClient"]


class QueuesClient(FeatureClient):
    __slots__ = ()

    def __call__(self) -> list[_queues.QueueInfo]:
        """Deprecated: use ``op.queues.list()``."""
        return self.list()

    def explain(self, name: str) -> _explain.Explanation:
        """Why the queue is not moving, in plain words."""
        return self._session.read(_explain.explain_queue, name)

    def pause(
        self,
        queue: str,
        *,
        reason: str | None = None,
        until: str | datetime | None = None,
        for_: str | float | timedelta | None = None,
        create: bool = False,
    ) -> _queues.QueueInfo:
        return self._session.run(
            _queues.pause, queue, reason=reason, until=until, for_=for_, create=create
        )

    def resume(self, queue: str, *, reason: str | None = None) -> _queues.QueueInfo:
        return self._session.run(_queues.resume, queue, reason=reason)

    def set_concurrency(
        self, queue: str, limit: int | None, *, reason: str | None = None, create: bool = False
    ) -> _queues.QueueInfo:
        return self._session.run(
            _queues.set_concurrency, queue, limit, reason=reason, create=create
        )

    def set_rate(self, queue: str, rate: str | None, *, burst: int | None = None,
                 reason: str | None = None, create: bool = False) -> _queues.QueueInfo:
        """``rate``: ``100/s``, ``10/5s``... or None to lift it."""
        parsed = _rates.parse_rate(rate, burst) if rate is not None else None
        return self._session.run(
            _rates.set_queue_rate, queue, parsed, reason=reason, create=create)

    def set_fair(self, queue: str, fair: bool, *, reason: str | None = None,
                 create: bool = False) -> _queues.QueueInfo:
        return self._session.run(_rates.set_fair, queue, fair, reason=reason, create=create)

    def set_aging(self, queue: str, every: str | float | timedelta | None, *, top: int = 0,
                  reason: str | None = None, create: bool = False) -> _queues.QueueInfo:
        """Raise the queue's waiting jobs one priority step every ``every`` (``30s``...),
        never past ``top``; None turns aging off (forklift.ops.aging)."""
        return self._session.run(_aging.set_aging, queue, every, top=top, reason=reason,
                                 create=create)

    def set_ceiling(self, queue: str, *, depth: int | None = None,
                    age: str | float | timedelta | None = None, off: bool = False,
                    reason: str | None = None, create: bool = False) -> _queues.QueueInfo:
        """Backpressure: past ``depth`` jobs waiting or an oldest wait of ``age`` (``5m``...),
        enqueues are refused, wait or shed as their kind declares; ``off=True`` lifts the
        ceiling (forklift.ops.ceiling)."""
        return self._session.run(_ceiling.set_ceiling, queue, depth=depth, age=age, off=off,
                                 reason=reason, create=create)

    def get(self, name: str) -> _queues.QueueInfo | None:
        """One queue's settings and state (its ceiling and whether it is full), or None."""
        return self._session.read(_queues.get_queue, name)

    def flows(self) -> list[_rates.FlowQueue]:
        """Queues claimed through the flow claim: limits, rates, fair share, backlog."""
        return self._session.read(_rates.flow_queues)

    def flow(self, queue: str) -> _rates.QueueFlow:
        return self._session.read(_rates.queue_flow, queue)

    def scale(
        self,
        queues: Sequence[str] | None = None,
        *,
        per_worker: int | None = None,
        max_workers: int = _scale.DEFAULT_MAX,
        target: float = _scale.DEFAULT_TARGET,
    ) -> list[_scale.QueueScale]:
        """The autoscaling signal per queue (default: every queue with a row or a live worker):
        workers wanted, from the SQL function a KEDA scaler queries (forklift.ops.scale)."""
        return self._session.run(_scale.scale, None if queues is None else [*queues],
                                 per_worker=per_worker, max_workers=max_workers, target=target)

    # Last: below this definition, ``list`` in an annotation would name the method.
    def list(self) -> list[_queues.QueueInfo]:
        return self._session.read(_queues.list_queues)
