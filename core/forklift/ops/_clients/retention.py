"""``op.retention``: how long finished jobs are kept, per state, for every queue and per
queue; setting a window; pruning what is past it."""

from __future__ import annotations

from datetime import timedelta

from forklift.ops import prune as _prune
from forklift.ops import retention as _retention
from forklift.ops._clients.client import FeatureClient

__all__ = ["RetentionClient"]


class RetentionClient(FeatureClient):
    __slots__ = ()

    def __call__(self) -> _retention.Retention:
        """Deprecated: use ``op.retention.show()``."""
        return self.show()

    def show(self) -> _retention.Retention:
        """Retention windows per state, for every queue and per queue (ops.retention)."""
        return self._session.read(_retention.show)

    def set_window(
        self,
        state: str,
        window: str | float | timedelta | None,
        *,
        queue: str | None = None,
        create: bool = False,
        reason: str | None = None,
    ) -> _retention.Retention:
        """See :func:`forklift.ops.retention.set_window`."""
        return self._session.run(_retention.set_window, state, window, queue=queue,
                                 create=create, reason=reason)

    def reset_window(
        self, state: str, *, queue: str | None = None, reason: str | None = None
    ) -> _retention.Retention:
        return self._session.run(_retention.reset_window, state, queue=queue, reason=reason)

    def prune(
        self,
        *,
        completed_older_than: str | float | timedelta | None = None,
        dead_older_than: str | float | timedelta | None = None,
        cancelled_older_than: str | float | timedelta | None = None,
        dry_run: bool = False,
        max_rows: int = _prune.DEFAULT_MAX_ROWS,
        batch_size: int = _prune.DEFAULT_BATCH,
        reason: str | None = None,
    ) -> _prune.PruneReport:
        """Delete finished jobs older than their window; see :func:`forklift.ops.prune.prune`."""
        return self._session.run(
            _prune.prune, completed_older_than=completed_older_than,
            dead_older_than=dead_older_than, cancelled_older_than=cancelled_older_than,
            dry_run=dry_run, max_rows=max_rows, batch_size=batch_size, reason=reason,
        )
