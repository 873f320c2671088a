"""Prune finished jobs older than a cut-off, in short batches (never one huge transaction).

Each batch deletes at most ``batch_size`` rows in its own transaction, with its audit row; a
call stops after ``max_rows`` and says whether more remain. Live jobs are never touched.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import psycopg

from forklift._db.sqltext import render
from forklift._worker.maintenance.retention import RETENTION_SQL
from forklift.ops import audit
from forklift.ops.context import OpsContext
from forklift.ops.errors import InvalidFilter
from forklift.ops.filters import duration
from forklift.ops.shape import Shape

__all__ = ["DEFAULT_BATCH", "DEFAULT_MAX_ROWS", "PruneReport", "prune"]

DEFAULT_MAX_ROWS = 100_000
DEFAULT_BATCH = 5_000

COUNT_SQL = """
SELECT count(*) FROM (
    SELECT 1 FROM {s}.jobs
    WHERE state = %s AND finished_at < now() - make_interval(secs => %s) LIMIT %s
) x
"""


@dataclass(frozen=True)
class PruneReport(Shape):
    dry_run: bool
    #: state -> age in seconds: finished jobs older than this are pruned.
    older_than: dict[str, float]
    #: state -> jobs deleted (a dry run: jobs that would be, up to ``max_rows``).
    deleted: dict[str, int] = field(default_factory=dict)
    #: True when the call stopped at ``max_rows``: run it again for the rest.
    more: bool = False
    batches: int = 0
    max_rows: int = DEFAULT_MAX_ROWS

    @property
    def total(self) -> int:
        return sum(self.deleted.values())


def prune(
    conn: psycopg.Connection[Any],
    ctx: OpsContext,
    *,
    completed_older_than: str | float | timedelta | None = None,
    dead_older_than: str | float | timedelta | None = None,
    cancelled_older_than: str | float | timedelta | None = None,
    dry_run: bool = False,
    max_rows: int = DEFAULT_MAX_ROWS,
    batch_size: int = DEFAULT_BATCH,
    reason: str | None = None,
) -> PruneReport:
    ages: dict[str, float] = {}
    for state, value in (
        ("completed", completed_older_than),
        ("cancelled", cancelled_older_than),
        ("dead", dead_older_than),
    ):
        if value is not None:
            ages[state] = duration(value, f"{state} older than").total_seconds()
    if not ages:
        raise InvalidFilter(
            "say what to prune: --completed-older-than, --dead-older-than and/or"
            " --cancelled-older-than (e.g. 7d)",
            field="older_than",
        )
    if not 1 <= max_rows <= 10_000_000 or not 1 <= batch_size <= 50_000:
        raise InvalidFilter("max_rows is 1..10,000,000 and batch_size 1..50,000", field="max_rows")
    if not dry_run:
        ctx.require_write("prune")
    reason = audit.clean_reason(reason)
    deleted: dict[str, int] = {}
    left = max_rows
    more = False
    batches = 0
    for state, secs in ages.items():
        if left <= 0:
            more = True
            break
        if dry_run:
            row = conn.execute(render(COUNT_SQL, ctx.schema), (state, secs, left + 1)).fetchone()
            n = int(row[0]) if row else 0
            deleted[state] = min(n, left)
            more = more or n > left
            left -= deleted[state]
            continue
        deleted[state] = 0
        while left > 0:
            size = min(batch_size, left)
            with conn.transaction():
                cur = conn.execute(render(RETENTION_SQL, ctx.schema), (state, secs, size, state))
                n = max(cur.rowcount, 0)
                if n:
                    batches += 1
                    audit.record(
                        conn, ctx, "prune",
                        {"state": state, "older_than_seconds": secs, "batch": batches},
                        count=n, reason=reason,
                    )
            deleted[state] += n
            left -= n
            if n < size:
                break
        if left <= 0:
            row = conn.execute(render(COUNT_SQL, ctx.schema), (state, secs, 1)).fetchone()
            more = more or bool(row and row[0])
    if not dry_run and batches == 0:
        with conn.transaction():  # nothing was old enough; the attempt is on record all the same
            audit.record(conn, ctx, "prune", {"older_than_seconds": ages}, count=0, reason=reason,
                         outcome="none matched")
    return PruneReport(dry_run, ages, deleted, more, batches, max_rows)
