"""Where the operator's reads went: the replica's state as the console header and ``--json``
show it (the ``replica`` object).

``state`` is stable, for scripts to branch on; ``reason`` says it in words:

=============== ============================================================================
``used``        reads went to the replica; its lag is within the limit
``lagging``     its lag is over ``--replica-max-lag``: reads went to the primary
``lag_unknown`` it has replayed nothing since it started and is not streaming: primary
``catching_up`` it has not yet replayed a change this operator made, or what reads on the
                primary showed while it was passed over: primary
``unreachable`` it could not be reached (stopped, refused, dropped): primary
``read_failed`` it cancelled a read (a conflict with recovery): that read went to the primary
``not_standby`` it is not in recovery (a primary, or promoted): primary
``not_asked``   no read has gone to it yet (or the command reads only the primary)
=============== ============================================================================
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["DEFAULT_MAX_LAG", "ReplicaStatus"]

#: Seconds of lag past which reads go back to the primary (``--replica-max-lag``).
DEFAULT_MAX_LAG = 30.0


@dataclass(frozen=True)
class ReplicaStatus:
    """The replica as last seen: ``target`` (``host:port/db``, never the password), whether
    the last read went there, its lag when it was last measured, and why."""

    target: str
    state: str
    reason: str
    max_lag_seconds: float
    lag_seconds: float | None = None

    @property
    def used(self) -> bool:
        return self.state == "used"

    def to_json(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "used": self.used,
            "state": self.state,
            "reason": self.reason,
            "lag_seconds": None if self.lag_seconds is None else round(self.lag_seconds, 3),
            "max_lag_seconds": self.max_lag_seconds,
        }

    def header(self, *, short: bool = False) -> str:
        """A few words for a status line: ``replica lag 0.4s``, ``replica unreachable:
        reading the primary``; ``short``: ``replica 0.4s``, ``replica off: unreachable``."""
        if self.used:
            return f"replica {'' if short else 'lag '}{_seconds(self.lag_seconds or 0.0)}"
        if self.state == "not_asked":
            return "replica not asked yet"
        if short:
            return f"replica off: {self.state.replace('_', ' ')}"
        if self.state == "lagging" and self.lag_seconds is not None:
            what = f"lag {_seconds(self.lag_seconds)} > {_seconds(self.max_lag_seconds)}"
        else:
            what = self.state.replace("_", " ")
        return f"replica {what}: reading the primary"


def _seconds(value: float) -> str:
    return f"{value:.1f}s" if value < 10 else f"{value:.0f}s"
