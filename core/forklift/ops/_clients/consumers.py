"""``op.consumers``: consumers with their lag and failure streak; pause, resume, move a cursor."""

from __future__ import annotations

from typing import Any

from forklift.ops import consumers as _consumers
from forklift.ops._clients.client import FeatureClient

__all__ = ["ConsumersClient"]


class ConsumersClient(FeatureClient):
    __slots__ = ()

    def show(self, name: str) -> _consumers.ConsumerInfo:
        return self._session.read(_consumers.get_consumer, name)

    def pause(self, name: str, *, reason: str | None = None) -> _consumers.ConsumerInfo:
        return self._session.run(_consumers.pause, name, reason=reason)

    def resume(self, name: str, *, reason: str | None = None) -> _consumers.ConsumerInfo:
        return self._session.run(_consumers.resume, name, reason=reason)

    def reset_cursor(self, name: str, *, cursor: Any = None,
                     reason: str | None = None) -> _consumers.ConsumerInfo:
        return self._session.run(_consumers.reset_cursor, name, cursor=cursor, reason=reason)

    # Last: below this definition, ``list`` in an annotation would name the method.
    def list(self) -> list[_consumers.ConsumerInfo]:
        return self._session.read(_consumers.list_consumers)
