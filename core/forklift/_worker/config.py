"""A worker's configuration: what ``Worker(app, ...)`` was given, checked once, then fixed.

Every service reads its settings from one :class:`WorkerConfig`; nothing changes it while the
worker runs (what does change, the kinds it claims among them, is in
:class:`~forklift._worker.state.WorkerState`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

__all__ = ["PREFETCH_HORIZON", "PREFETCH_MAX", "WorkerConfig"]

PREFETCH_MAX = 1000  # most claimed-but-not-started jobs a worker keeps
PREFETCH_HORIZON = 0.05  # seconds of work (at the recent completion rate) to keep buffered


@dataclass(frozen=True)
class WorkerConfig:
    """The settings of one worker (see :class:`~forklift.Worker` for each one's meaning)."""

    schema: str
    #: The queues it claims from, sorted (the app's kinds' queues unless named).
    queues: tuple[str, ...]
    concurrency: int = 10
    lease: float = 30.0
    poll_interval: float = 1.0
    drain_timeout: float = 30.0
    drain_grace: float = 5.0
    final_timeout: float = 5.0
    release_hold: float = 10.0
    leader_interval: float = 1.0
    flush_interval: float = 0.005
    progress_interval: float = 0.25
    listen_health: float = 5.0
    #: Behind a transaction pooler LISTEN needs a direct connection (forklift._db.pooler).
    listen_dsn: str | None = None
    prefetch_max: int = PREFETCH_MAX
    prefetch_horizon: float = PREFETCH_HORIZON
    #: None: the database's windows (forklift retention); a mapping overrides them per state.
    retention: dict[str, float] | None = None
    worker_id: str | None = None
    lead: bool = True

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if self.lease < 1:
            raise ValueError("lease must be at least 1 second")
        object.__setattr__(self, "prefetch_max", max(0, self.prefetch_max))

    @classmethod
    def of(cls, schema: str, app_queues: Iterable[str], *,
           queues: Iterable[str] | None = None, **settings: Any) -> WorkerConfig:
        """The configuration of a worker of an app whose kinds use ``app_queues``: ``queues``
        None claims from those (``default`` when the app has none)."""
        named = sorted(set(queues or set(app_queues) or {"default"}))
        return cls(schema=schema, queues=tuple(named), **settings)

    @property
    def beat_timeout(self) -> float:
        """The heartbeat session's statement bound: well inside a lease."""
        return max(1.0, min(5.0, self.lease / 3))
