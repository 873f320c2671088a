"""The payload of an outbound delivery job: one event for one endpoint."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Event"]


@dataclass(frozen=True)
class Event:
    """``id`` is the ``webhook-id`` every attempt carries (the receiver's idempotency key);
    ``body`` is the JSON text sent, fixed when the event is made so every attempt signs and
    sends the same bytes."""

    id: str
    type: str
    body: str
