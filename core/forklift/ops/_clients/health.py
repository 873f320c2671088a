"""``op.health``: table, index, connection, lock and xmin-horizon health with alerts; the
horizon's holders; alert thresholds."""

from __future__ import annotations

from forklift.ops import health as _health
from forklift.ops import horizon as _horizon
from forklift.ops._clients.client import FeatureClient

__all__ = ["HealthClient"]


class HealthClient(FeatureClient):
    __slots__ = ()

    def __call__(self, *, overrides: dict[str, float] | None = None) -> _health.Health:
        """Deprecated: use ``op.health.get()``."""
        return self.get(overrides=overrides)

    def get(self, *, overrides: dict[str, float] | None = None) -> _health.Health:
        """Table, index, connection, lock and xmin-horizon health with alerts (ops.health)."""
        return self._session.read_primary(_health.health, overrides=overrides)

    def horizon(self, *, limit: int = 5) -> list[_horizon.HorizonHolder]:
        """The oldest holders of the xmin horizon first."""
        return self._session.read_primary(_horizon.holders, limit)

    def set_threshold(
        self, name: str, value: float | None, *, reason: str | None = None
    ) -> dict[str, float]:
        return self._session.run(_health.set_threshold, name, value, reason=reason)
