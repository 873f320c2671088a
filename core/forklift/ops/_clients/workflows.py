"""``op.workflows``: replay a finished workflow from a named step (a fork into a new job)."""

from __future__ import annotations

from forklift.ops import replay as _replay
from forklift.ops._clients.client import FeatureClient

__all__ = ["WorkflowsClient"]


class WorkflowsClient(FeatureClient):
    __slots__ = ()

    def replay(self, job_id: int, *, from_step: str, reason: str | None = None
               ) -> _replay.ReplayResult:
        """A new job reuses the steps ``job_id`` recorded before ``from_step`` and runs that
        step and the rest again; the original stays as it was."""
        return self._session.run(_replay.replay, job_id, from_step=from_step, reason=reason)
