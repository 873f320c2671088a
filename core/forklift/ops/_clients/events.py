"""``op.events``: durable workflows' events and the waits on them; publish one."""

from __future__ import annotations

from typing import Any

from forklift.ops import events as _events
from forklift.ops._clients.client import FeatureClient

__all__ = ["EventsClient"]


class EventsClient(FeatureClient):
    __slots__ = ()

    def __call__(
        self, *, name: str | None = None, limit: int = 50, before_id: int | None = None
    ) -> list[_events.EventInfo]:
        """Deprecated: use ``op.events.list()``."""
        return self.list(name=name, limit=limit, before_id=before_id)

    def waits(self, *, name: str | None = None, limit: int = 50) -> list[_events.WaitInfo]:
        return self._session.read(_events.waits, name=name, limit=limit)

    def publish(self, name: str, data: Any, *, reason: str | None = None) -> _events.EventInfo:
        return self._session.run(_events.publish, name, data, reason=reason)

    # Last: below this definition, ``list`` in an annotation would name the method.
    def list(
        self, *, name: str | None = None, limit: int = 50, before_id: int | None = None
    ) -> list[_events.EventInfo]:
        return self._session.read(_events.list_events, name=name, limit=limit,
                                 before_id=before_id)
