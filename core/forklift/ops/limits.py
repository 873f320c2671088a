"""Bulk actions' bounds, in a module of their own so that a signature (a CLI option's default,
an ``Operator`` method's) can name them without loading the actions themselves."""

from __future__ import annotations

__all__ = ["DEFAULT_BATCH", "DEFAULT_CAP", "MAX_CAP"]

#: Most jobs one bulk action selects and acts on per call (a dry run reports ``more``).
DEFAULT_CAP = 10_000
#: The largest cap a call may ask for.
MAX_CAP = 1_000_000
#: Jobs acted on per server-side batch: one short transaction and one audit row each.
DEFAULT_BATCH = 1_000
