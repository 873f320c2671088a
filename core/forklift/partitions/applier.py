"""Run a plan's statements, each under a lock timeout that fails fast and is retried.

``CREATE TABLE ... PARTITION OF`` and ``DROP TABLE`` take an ACCESS EXCLUSIVE lock on the
parent. Waiting for it behind a long transaction would queue every later reader and writer of
the table behind the DDL, so each statement runs in a transaction of its own with a short
``lock_timeout``: it gives up at once, lets the queue drain, and tries again after a pause. A
statement that cannot get its lock on any attempt stops the run with
:class:`PartitionLockTimeout` (the job's backoff retries it later); the statements before it
stay done, and the next run plans only what is still missing.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Final

import psycopg
import psycopg.errors

from forklift._base.errors import ConfigError
from forklift.partitions.change import PartitionChange
from forklift.partitions.errors import PartitionLockTimeout
from forklift.partitions.report import UpkeepReport
from forklift.partitions.upkeep_plan import UpkeepPlan

__all__ = ["DEFAULT_ATTEMPTS", "DEFAULT_LOCK_TIMEOUT", "DEFAULT_PAUSE", "apply"]

DEFAULT_LOCK_TIMEOUT: Final = 0.5
DEFAULT_ATTEMPTS: Final = 5
DEFAULT_PAUSE: Final = 1.0

# Two runs on one table (a scheduled one and an operator's) take turns statement by statement,
# so a CREATE ... IF NOT EXISTS never races another for the same name.
_SERIALISE_SQL = "SELECT pg_advisory_xact_lock(hashtext('forklift.partitions'), hashtext(%s))"

#: Called after a statement ran into the lock timeout, with the change and the attempt that
#: failed, before the pause and the next attempt.
OnLockTimeout = Callable[[PartitionChange, int], None]


def apply(
    conn: psycopg.Connection[Any],
    plan: UpkeepPlan,
    *,
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
    attempts: int = DEFAULT_ATTEMPTS,
    pause: float = DEFAULT_PAUSE,
    on_lock_timeout: OnLockTimeout | None = None,
) -> UpkeepReport:
    """Run ``plan`` on ``conn`` (autocommit), each statement in a transaction of its own under
    ``lock_timeout`` seconds, tried up to ``attempts`` times ``pause`` seconds apart (the
    pause grows with each attempt)."""
    if not conn.autocommit:
        raise ConfigError("partition upkeep needs an autocommit connection: each statement"
                          " is a transaction of its own")
    if not lock_timeout > 0 or isinstance(attempts, bool) or not isinstance(attempts, int) \
            or attempts < 1 or pause < 0:
        raise ConfigError("lock_timeout must be positive seconds, attempts at least 1 and pause"
                          " zero or more")
    timeouts = 0
    done: list[PartitionChange] = []
    for change in plan.changes:
        for attempt in range(1, attempts + 1):
            try:
                with conn.transaction():
                    conn.execute("SELECT set_config('lock_timeout', %s, true)",
                                 (f"{max(1, round(lock_timeout * 1000))}ms",))
                    conn.execute(_SERIALISE_SQL, (plan.table,))
                    conn.execute(change.sql)
                done.append(change)
                break
            except psycopg.errors.LockNotAvailable:
                timeouts += 1
                if on_lock_timeout is not None:
                    on_lock_timeout(change, attempt)
                if attempt == attempts:
                    raise PartitionLockTimeout(
                        f"{change.action} of {change.partition} could not lock {plan.table}"
                        f" within {lock_timeout:g}s on any of {attempts} attempts: a long"
                        " transaction holds it", table=plan.table, statement=change.sql,
                        attempts=attempts) from None
                time.sleep(pause * attempt)
    return UpkeepReport(plan.table, tuple(c.partition for c in done if c.action == "create"),
                        tuple(c.partition for c in done if c.action == "drop"), timeouts)
