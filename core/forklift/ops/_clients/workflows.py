"""``op.workflows``: replay a finished workflow from a named step (a fork into a new job);
pause and resume one workflow; the pauses in force (workflows' and kinds')."""

from __future__ import annotations

from forklift.ops import holds as _holds
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

    def pause(self, job_id: int, *, reason: str | None = None) -> _holds.PauseResult:
        """The workflow is not started again until resumed: held if waiting; if running, it
        parks at its next step boundary."""
        return self._session.run(_holds.pause, "workflow", job_id, reason=reason)

    def resume(self, job_id: int, *, reason: str | None = None) -> _holds.PauseResult:
        """Lift the workflow's pause: it is claimable at once when its time has come."""
        return self._session.run(_holds.resume, "workflow", job_id, reason=reason)

    def pauses(self) -> list[_holds.PauseInfo]:
        """Every pause in force, of workflows and of kinds, oldest first."""
        return self._session.read(_holds.list_pauses)
