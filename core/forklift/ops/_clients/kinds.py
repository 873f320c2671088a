"""``op.kinds``: pause and resume every job of one kind (forklift.ops.holds)."""

from __future__ import annotations

from forklift.ops import holds as _holds
from forklift.ops._clients.client import FeatureClient

__all__ = ["KindsClient"]


class KindsClient(FeatureClient):
    __slots__ = ()

    def pause(self, name: str, *, reason: str | None = None) -> _holds.PauseResult:
        """No job of the kind is started until resumed, new ones included; a running workflow
        of the kind parks at its next step boundary."""
        return self._session.run(_holds.pause, "kind", name, reason=reason)

    def resume(self, name: str, *, reason: str | None = None) -> _holds.PauseResult:
        """Lift the kind's pause: its held jobs are claimable at once when their time has come."""
        return self._session.run(_holds.resume, "kind", name, reason=reason)

    def paused(self) -> list[str]:
        """The kinds paused now."""
        return [p.name for p in self._session.read(_holds.list_pauses) if p.target == "kind"]
