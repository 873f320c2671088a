"""The flow recount, a leader chore: a key whose limit fell stops being counted by hand-offs
once every value of it is within the limit (flow_keys.lowered_at, migration 0017).

Why it is safe to stop counting then: every claim admits within the limit it reads and a
hand-off keeps each value's count what it was, so a count within the limit stays within it.
Only a claim that read the old, higher limit could still add a job after this pass counted,
and such a claim's transaction began before the lowering committed: the mark is cleared only
``MARGIN`` seconds after the lowering, far longer than any claim may run (its session's
statement timeout is seconds). A lowering while this pass runs sets a new ``lowered_at``,
which the UPDATE's re-check of the row sees, and the mark stays.
"""

from __future__ import annotations

from typing import Any

import psycopg

from forklift._db.sqltext import render
from forklift._worker.maintenance.chore import Chore

#: Seconds between passes.
EVERY = 60.0
#: Seconds a lowering stands before its key's values may be found within the limit.
MARGIN = 300.0

RECOUNT_SQL = """
UPDATE {s}.flow_keys AS f SET lowered_at = NULL
WHERE f.lowered_at IS NOT NULL AND f.lowered_at <= now() - make_interval(secs => %s)
  AND NOT EXISTS (
      SELECT 1 FROM {s}.jobs r CROSS JOIN LATERAL unnest(r.keys) AS e
      WHERE r.state = 'running' AND r.keys IS NOT NULL AND split_part(e, chr(31), 1) = f.name
      GROUP BY e HAVING sum(least(coalesce(r.weight, 1), f.concurrency)) > f.concurrency)
RETURNING f.name
"""


async def recount(conn: psycopg.AsyncConnection[Any], schema: str,
                  margin: float = MARGIN) -> list[str]:
    """Clear the mark of every lowered key whose values are all within its limit; returns
    their names."""
    cur = await conn.execute(render(RECOUNT_SQL, schema), (margin,))
    return [str(r[0]) for r in await cur.fetchall()]


class FlowRecount(Chore):
    name = "flow-recount"

    def every(self) -> float:
        return EVERY

    async def once(self) -> None:
        await self.db.run(lambda c: recount(c, self.config.schema))
