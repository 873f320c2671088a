"""The stats rollup: each closed minute of the stats window, per queue, written once.

The statements and the pass live with the worker's chore that runs them
(:mod:`forklift._features.stats.rollup`); the operator API reads the same names from here.
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
