"""Planner statistics, a leader chore: ANALYZE the jobs table when its statistics describe a
different table (never analyzed, or a small fraction of its size today).

Why a chore of our own, beside autovacuum
    The claims run as prepared statements with generic plans, planned once per session and kept
    until the table's statistics change. A table that was empty when a worker started and then
    took a bulk load has no statistics at all: every estimate is a default (one row for any
    queue and kind), two partial indexes cost the same, and the flow claim and the keyed
    hand-off were seen walking ``jobs_claim_idx`` with a filter instead of ``jobs_keyed_idx``:
    a 40 ms hand-off and a 1.4 s flow claim where the right plan takes 10 ms and 5 ms. Autovacuum
    fixes it, but only at its next round (``autovacuum_naptime``, a minute by default), and a
    load that lands in that minute runs on the wrong plans. This chore looks at the catalog
    four times a second and runs ANALYZE only when the statistics and the table disagree by
    far; an ANALYZE makes every session plan its statements again on the next run.

What counts as stale
    The table holds at least ``MIN_ROWS`` committed rows (the server's own count of live rows,
    which a transaction adds to only once it commits) and its statistics were never taken, or
    were taken when it held under a ``GROWTH``-th of them. Committed rows, not the table's size:
    a bulk load still in flight already has its pages, and an ANALYZE then counts none of its
    rows (they are not visible yet). The first version of this chore went by pages, analyzed a
    table in the middle of its first load, took "no rows" for an answer, and waited out its
    interval while every claim ran on plans for an empty table (measured: 300 jobs/s instead of
    9,000, for the 8 s until autovacuum came). With the server's counts off (``track_counts``)
    it goes by pages, as before.

What it costs
    One catalog read every ``EVERY`` seconds on the leader's session for this chore; an ANALYZE
    (of a sample of 3,000 rows) only when the table has grown ``GROWTH`` times since its
    statistics were taken, so a growing table is analyzed a handful of times (at 1,000 rows,
    4,000, 16,000...), at most once per ``MIN_INTERVAL``. Ordinary drift is autovacuum's (the
    table's own ``autovacuum_analyze_scale_factor``).

A role that may not analyze the table (neither its owner nor, on PostgreSQL 17+, holding
MAINTAIN) is told once in the log and the chore stops looking.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import psycopg

from forklift._db.sqltext import render
from forklift._worker.maintenance.chore import Chore

if TYPE_CHECKING:
    from forklift._worker.config import WorkerConfig
    from forklift._worker.state import WorkerState

log = logging.getLogger("forklift.worker")

EVERY = 0.25  # seconds between looks at the catalog
MIN_ROWS = 1000  # committed rows below which the planner's defaults do no harm
MIN_PAGES = 16  # the same, in pages, when the server keeps no counts
GROWTH = 4.0  # analyze once the table holds this many times the rows its statistics saw
MIN_INTERVAL = 5.0  # seconds between two ANALYZE runs of this chore

# reltuples: the rows the last ANALYZE or VACUUM saw (< 0: neither ever ran); relpages: the
# size then. live: committed rows as the server counts them (its statistics collector; an
# ANALYZE resets it to what it saw). analyzed: whether an ANALYZE (ours or autovacuum's) ever
# ran since the counts were last reset: a VACUUM sets reltuples but takes no column
# statistics. The privilege test mirrors ANALYZE's own (owner, or MAINTAIN from PostgreSQL 17).
LOOK_SQL = """
SELECT c.reltuples, c.relpages,
       pg_relation_size(c.oid) / current_setting('block_size')::int AS pages,
       pg_stat_get_live_tuples(c.oid) AS live,
       pg_stat_get_analyze_count(c.oid) + pg_stat_get_autoanalyze_count(c.oid) > 0 AS analyzed,
       current_setting('track_counts')::boolean AS counts,
       pg_has_role(c.relowner, 'USAGE') OR CASE
           WHEN current_setting('server_version_num')::int >= 170000
           THEN has_table_privilege(c.oid, 'MAINTAIN') ELSE false END AS may
FROM pg_class c WHERE c.oid = '{s}.jobs'::regclass
"""

# A small sample (3,000 rows, not 30,000: 25 ms against 200-500 ms on 50,000 jobs): rough
# statistics are all the index choice needs, and autovacuum's own ANALYZE follows soon, as a table
# that grew this much is past its threshold too.
SAMPLE_TARGET = 10
ANALYZE_SQL = "ANALYZE {s}.jobs"


@dataclass(frozen=True)
class Seen:
    """What the catalog says of the jobs table and its statistics."""

    reltuples: float
    relpages: int
    pages: int
    live: int
    analyzed: bool
    counts: bool = True

    def __str__(self) -> str:
        now = f"{self.live} rows" if self.counts else f"{self.pages} pages"
        if self.reltuples < 0 or not self.analyzed:
            return f"{now}, statistics never taken"
        then = f"{self.reltuples:.0f} rows" if self.counts else f"{self.relpages} pages"
        return f"{now}, statistics taken at {then}"


def stale(seen: Seen) -> bool:
    """Whether the statistics describe a table far from the one there is now."""
    if not seen.counts:  # no live count: by pages, which an uncommitted load has already
        if seen.pages < MIN_PAGES:
            return False
        return seen.reltuples < 0 or seen.pages > GROWTH * max(seen.relpages, 1)
    if seen.live < MIN_ROWS:
        return False
    return (seen.reltuples < 0 or not seen.analyzed
            or seen.live > GROWTH * max(seen.reltuples, 0.0))


async def look(conn: psycopg.AsyncConnection[Any], schema: str) -> tuple[bool, bool, str]:
    """(stale, may analyze, what was seen) for the jobs table."""
    cur = await conn.execute(render(LOOK_SQL, schema))
    row = await cur.fetchone()
    if row is None:
        return False, False, "no jobs table"
    seen = Seen(float(row[0]), int(row[1]), int(row[2]), int(row[3]), bool(row[4]),
                bool(row[5]))
    return stale(seen), bool(row[6]), str(seen)


async def analyze(conn: psycopg.AsyncConnection[Any], schema: str) -> None:
    async with conn.transaction():
        await conn.execute(f"SET LOCAL default_statistics_target = {SAMPLE_TARGET}")
        await conn.execute(render(ANALYZE_SQL, schema))


class PlannerStats(Chore):
    name = "planner-stats"

    def __init__(self, config: WorkerConfig, state: WorkerState, *, leading: asyncio.Event
                 ) -> None:
        super().__init__(config, state, leading=leading)
        self.analyzed = 0  # ANALYZE runs so far (tests read it)
        self.looks = 0  # catalog reads so far (tests read it)
        self._last = float("-inf")
        self._stopped = False

    def every(self) -> float:
        return EVERY if not self._stopped else 3600.0

    async def once(self) -> None:
        if self._stopped or time.monotonic() - self._last < MIN_INTERVAL:
            return
        schema = self.config.schema
        is_stale, may, seen = await self.db.run(lambda c: look(c, schema))
        self.looks += 1
        if not is_stale:
            return
        if not may:
            self._stopped = True
            log.info("the planner statistics of %s.jobs are stale (%s), and this role may not"
                     " ANALYZE it: leaving it to autovacuum", schema, seen)
            return
        self._last = time.monotonic()
        await self.db.run(lambda c: analyze(c, schema))
        self.analyzed += 1
        log.info("analyzed %s.jobs: its planner statistics were stale (%s)", schema, seen)
