"""The upkeep kind: a scheduled job that keeps an app's range-partitioned tables ready.

Each run plans from the catalog (:func:`~forklift.partitions.plan`) and applies the plan
statement by statement under a lock timeout (:func:`~forklift.partitions.apply`). Planning
from what exists is what makes it idempotent and resumable: a run killed half-way leaves some
partitions made, and the next run plans only the rest; a second run at one instant plans
nothing. ``now`` is the kind's clock (or the payload's ``now``), never the server's, so a test
or a backfill moves it explicitly.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

import psycopg

from forklift._app.context import JobContext
from forklift._base.errors import ConfigError
from forklift._base.retry import Fail
from forklift._db.connections import connect
from forklift.partitions.applier import (
    DEFAULT_ATTEMPTS,
    DEFAULT_LOCK_TIMEOUT,
    DEFAULT_PAUSE,
    OnLockTimeout,
    apply,
)
from forklift.partitions.errors import PartitionedTableInvalid
from forklift.partitions.planner import plan
from forklift.partitions.report import UpkeepReport
from forklift.partitions.request import UpkeepRequest
from forklift.partitions.table import PartitionedTable
from forklift.partitions.upkeep_plan import UpkeepPlan

if TYPE_CHECKING:
    from forklift._app.app import Forklift
    from forklift._app.kind import JobKind
    from forklift._features.cron import Schedule

__all__ = ["DEFAULT_CRON", "PartitionUpkeep", "partitions"]

#: Daily at 03:17 UTC: off the hour, when few other schedules fire.
DEFAULT_CRON: Final = "17 3 * * *"

Clock = Callable[[], datetime]


def _utc_now() -> datetime:
    return datetime.now(UTC)


class PartitionUpkeep:
    """A declared upkeep kind over ``tables``: ``run``/``plan`` now, or let the schedule
    enqueue ``kind``. ``schedule`` is None when declared with ``cron=None``."""

    def __init__(self, app: Forklift, tables: Sequence[PartitionedTable], *, name: str,
                 queue: str, cron: str | None, tz: str, clock: Clock, lock_timeout: float,
                 attempts: int, pause: float) -> None:
        if not tables or not all(isinstance(t, PartitionedTable) for t in tables):
            raise ConfigError(f"partition upkeep {name!r} needs one PartitionedTable or more")
        names = [t.table for t in tables]
        if len(set(names)) != len(names):
            raise ConfigError(f"partition upkeep {name!r} names a table twice: {names}")
        self.app = app
        self.tables = tuple(tables)
        self.clock = clock
        self.lock_timeout = lock_timeout
        self.attempts = attempts
        self.pause = pause
        self.kind: JobKind[UpkeepRequest, list[UpkeepReport]] = app.job(
            name=name, queue=queue, failure_codes=("partitions_table_invalid",),
        )(self._run)
        self.schedule: Schedule | None = None
        if cron is not None:
            self.schedule = app.schedule(self.kind, cron=cron, tz=tz, name=f"{name}.schedule")

    def __repr__(self) -> str:
        return f"<PartitionUpkeep {self.kind.name} tables={[t.table for t in self.tables]}>"

    def _chosen(self, tables: Iterable[str] | None) -> list[PartitionedTable]:
        if tables is None:
            return list(self.tables)
        wanted = list(tables)
        unknown = sorted(set(wanted) - {t.table for t in self.tables})
        if unknown:
            raise PartitionedTableInvalid(
                f"upkeep {self.kind.name!r} keeps no table named {', '.join(unknown)}",
                table=unknown[0], field="tables", reason="not_declared")
        return [t for t in self.tables if t.table in wanted]

    def _conn(self) -> psycopg.Connection[Any]:
        return connect(self.app.dsn, "partitions")

    def plan(self, *, now: datetime | None = None, from_: datetime | None = None,
             tables: Iterable[str] | None = None,
             conn: psycopg.Connection[Any] | None = None) -> list[UpkeepPlan]:
        """What a run at ``now`` (default: the clock) would do, table by table; changes
        nothing."""
        at = now or self.clock()
        chosen = self._chosen(tables)
        if conn is not None:
            return [plan(conn, t, now=at, from_=from_) for t in chosen]
        with self._conn() as own:
            return [plan(own, t, now=at, from_=from_) for t in chosen]

    def run(self, *, now: datetime | None = None, from_: datetime | None = None,
            tables: Iterable[str] | None = None, conn: psycopg.Connection[Any] | None = None,
            on_lock_timeout: OnLockTimeout | None = None) -> list[UpkeepReport]:
        """Plan and apply, table by table (see :func:`~forklift.partitions.apply`)."""
        at = now or self.clock()
        chosen = self._chosen(tables)
        if conn is not None:
            return self._apply(conn, chosen, at, from_, on_lock_timeout)
        with self._conn() as own:
            return self._apply(own, chosen, at, from_, on_lock_timeout)

    def _apply(self, conn: psycopg.Connection[Any], chosen: list[PartitionedTable],
               at: datetime, from_: datetime | None,
               on_lock_timeout: OnLockTimeout | None) -> list[UpkeepReport]:
        return [apply(conn, plan(conn, t, now=at, from_=from_), lock_timeout=self.lock_timeout,
                      attempts=self.attempts, pause=self.pause, on_lock_timeout=on_lock_timeout)
                for t in chosen]

    def _run(self, ctx: JobContext, request: UpkeepRequest) -> list[UpkeepReport]:
        try:
            return self.run(now=request.now, from_=request.start(), tables=request.tables)
        except PartitionedTableInvalid as exc:
            raise Fail(exc.code, exc.message) from None


def partitions(
    app: Forklift,
    tables: Sequence[PartitionedTable],
    *,
    name: str = "partitions.upkeep",
    queue: str = "default",
    cron: str | None = DEFAULT_CRON,
    tz: str = "UTC",
    clock: Clock = _utc_now,
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
    attempts: int = DEFAULT_ATTEMPTS,
    pause: float = DEFAULT_PAUSE,
) -> PartitionUpkeep:
    """Declare on ``app`` a kind that keeps ``tables`` ready, enqueued on ``cron`` (daily at
    03:17 UTC by default; None: only when enqueued). Each DDL statement waits at most
    ``lock_timeout`` seconds for its lock, and is tried ``attempts`` times ``pause`` seconds
    apart before the run gives up with ``partitions_lock_timeout`` (retried by the job)."""
    return PartitionUpkeep(app, tables, name=name, queue=queue, cron=cron, tz=tz, clock=clock,
                           lock_timeout=lock_timeout, attempts=attempts, pause=pause)
