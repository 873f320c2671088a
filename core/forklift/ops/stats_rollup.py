"""The stats rollup: each closed minute of the stats window, per queue, written once.

The statements and the pass are in :mod:`forklift._features.stats.rollup`, below both the
leader's chore that runs them and the stats reads that use the minutes; the operator API
keeps its names here.
"""

from __future__ import annotations

from forklift._features.stats.rollup import (
    CHUNK,
    KEEP,
    READ_SQL,
    ROLLUP_SQL,
    STATE_SQL,
    covered,
    plan,
    rollup,
)

__all__ = ["CHUNK", "KEEP", "READ_SQL", "ROLLUP_SQL", "STATE_SQL", "covered", "plan", "rollup"]
