"""``op.outbox``: durable workflows' outbox messages and topics; retry failed messages."""

from __future__ import annotations

from forklift.ops import outbox as _outbox
from forklift.ops._clients.client import FeatureClient

__all__ = ["OutboxClient"]


class OutboxClient(FeatureClient):
    __slots__ = ()

    def messages(
        self,
        *,
        state: str | None = None,
        topic: str | None = None,
        limit: int = 50,
        before_id: int | None = None,
    ) -> list[_outbox.OutboxMessage]:
        return self._session.read(_outbox.messages, state=state, topic=topic, limit=limit,
                                 before_id=before_id)

    def topics(self) -> list[_outbox.TopicInfo]:
        return self._session.read(_outbox.topics)

    def retry(
        self, *, ids: list[int] | None = None, topic: str | None = None, reason: str | None = None
    ) -> list[int]:
        """Send the chosen failed messages again; returns their ids."""
        return self._session.run(_outbox.retry, ids=ids, topic=topic, reason=reason)
