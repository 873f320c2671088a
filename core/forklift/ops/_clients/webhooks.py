"""``op.webhooks``: outbound webhook endpoints' health and attempts; enable, disable."""

from __future__ import annotations

from forklift.ops import webhooks as _webhooks
from forklift.ops._clients.client import FeatureClient

__all__ = ["WebhooksClient"]


class WebhooksClient(FeatureClient):
    __slots__ = ()

    def endpoints(self) -> list[_webhooks.EndpointInfo]:
        return self._session.read(_webhooks.endpoints)

    def attempts(
        self, *, endpoint: str | None = None, limit: int = 50, before_id: int | None = None
    ) -> list[_webhooks.Attempt]:
        return self._session.read(_webhooks.attempts, endpoint=endpoint, limit=limit,
                                  before_id=before_id)

    def enable(self, name: str, *, reason: str | None = None) -> _webhooks.EndpointChange:
        """Enable the endpoint and wake its held deliveries (audited)."""
        return self._session.run(_webhooks.enable, name, reason=reason)

    def disable(self, name: str, *, reason: str | None = None) -> _webhooks.EndpointChange:
        """Hold the endpoint's deliveries until it is enabled again (audited)."""
        return self._session.run(_webhooks.disable, name, reason=reason)
