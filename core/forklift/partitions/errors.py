"""What partition upkeep can be refused or stopped by, each with a stable ``code``."""

from __future__ import annotations

from forklift._base.errors import ForkliftError

__all__ = ["PartitionLockTimeout", "PartitionedTableInvalid"]


class PartitionedTableInvalid(ForkliftError):
    """The table is missing, not partitioned by range on one date or timestamp column, or a
    setting of its upkeep is out of range; ``detail``: ``table``, ``field``, ``reason``."""

    code = "partitions_table_invalid"


class PartitionLockTimeout(ForkliftError):
    """A DDL statement could not take its lock within the lock timeout on any of its
    attempts (a long transaction holds the table); nothing waited in the lock queue longer
    than the timeout. Retried by the job's backoff; ``detail``: ``table``, ``statement``,
    ``attempts``."""

    code = "partitions_lock_timeout"
