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
    load that lands in that minute runs on the wrong plans. This chore looks every second
    at two numbers from the catalog, and runs ANALYZE only when they disagree by far; an
    ANALYZE makes every session plan its statements again on the next run.

What it costs
    One catalog read every ``EVERY`` seconds on the leader's session for this chore; an ANALYZE
    (of a sample of 3,000 rows) only when the table has grown past ``GROWTH`` times the
    size its statistics were taken at, at most once per ``MIN_INTERVAL``. Ordinary drift is
    autovacuum's (the table's own ``autovacuum_analyze_scale_factor``).

A role that may not analyze the table (neither its owner nor, on PostgreSQL 17+, holding
MAINTAIN) is told once in the log and the chore stops looking.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

import psycopg

from forklift._sqltext import render
from forklift._worker.maintenance.chore import Chore

if TYPE_CHECKING:
    from forklift._worker.worker import Worker

log = logging.getLogger("forklift.worker")

EVERY = 1.0  # seconds between looks at the catalog
MIN_PAGES = 16  # below this the planner's defaults do no harm
GROWTH = 4.0  # analyze once the table is this many times the size its statistics saw
MIN_INTERVAL = 30.0  # seconds between two ANALYZE runs of this chore

# reltuples < 0: never analyzed (nor vacuumed). relpages: the size when the statistics were
# taken. The privilege test mirrors ANALYZE's own (owner, or MAINTAIN from PostgreSQL 17).
LOOK_SQL = """
SELECT c.reltuples, c.relpages,
       pg_relation_size(c.oid) / current_setting('block_size')::int AS pages,
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


def stale(reltuples: float, relpages: int, pages: int) -> bool:
    """Whether the statistics describe a table far from the one there is now."""
    if pages < MIN_PAGES:
        return False
    return reltuples < 0 or pages > GROWTH * max(relpages, 1)


async def look(conn: psycopg.AsyncConnection[Any], schema: str) -> tuple[bool, bool, str]:
    """(stale, may analyze, what was seen) for the jobs table."""
    cur = await conn.execute(render(LOOK_SQL, schema))
    row = await cur.fetchone()
    if row is None:
        return False, False, "no jobs table"
    reltuples, relpages, pages, may = float(row[0]), int(row[1]), int(row[2]), bool(row[3])
    seen = (f"{pages} pages, statistics "
            + ("never taken" if reltuples < 0 else f"taken at {relpages} pages"))
    return stale(reltuples, relpages, pages), may, seen


async def analyze(conn: psycopg.AsyncConnection[Any], schema: str) -> None:
    async with conn.transaction():
        await conn.execute(f"SET LOCAL default_statistics_target = {SAMPLE_TARGET}")
        await conn.execute(render(ANALYZE_SQL, schema))


class PlannerStats(Chore):
    name = "planner-stats"

    def __init__(self, worker: Worker) -> None:
        super().__init__(worker)
        self.analyzed = 0  # ANALYZE runs so far (tests read it)
        self._last = float("-inf")
        self._stopped = False

    def every(self) -> float:
        return EVERY if not self._stopped else 3600.0

    async def once(self) -> None:
        if self._stopped or time.monotonic() - self._last < MIN_INTERVAL:
            return
        schema = self.w.schema
        is_stale, may, seen = await self.db.run(lambda c: look(c, schema))
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
