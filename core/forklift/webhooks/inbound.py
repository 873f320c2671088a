"""The payload of a job the receiver enqueues: one verified delivery."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Inbound"]


@dataclass(frozen=True)
class Inbound:
    """``id`` is the sender's delivery id (also the job's unique key), ``timestamp`` the
    sender's (unix seconds), ``receiver`` the receiver's name and ``body`` the parsed JSON."""

    id: str
    timestamp: int
    receiver: str
    body: Any
