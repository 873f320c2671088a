"""A running workflow under a pause parks at its next step boundary.

An operator's pause (``forklift.ops.holds``) holds a workflow's or a kind's waiting jobs at
once, and records its running ones in ``job_holds`` too. A running job cannot be stopped
mid-step without losing the step in flight, so it is told at the next step it stores: the
statement that stores a step (one per step, as always) also answers whether the job is held,
and if it is, the attempt parks like a sleep, one fenced statement: the job waits ``scheduled``
at :data:`PAUSED_UNTIL`, its lease cleared and its attempt refunded, the stored step kept, and
its hold row now says where the resume puts it (available). An operator's cancel requested
meanwhile ends it ``cancelled`` instead. A handler that stores no more steps finishes its
attempt; its job is not started again while the pause lasts (the stager leaves held jobs
where they are).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import psycopg

from forklift._db.sqltext import render

#: Where a held job waits: apart from dependencies' hold (9999-12-31), so neither the stager
#: nor a dependency's release nor an event moves it.
PAUSED_UNTIL = datetime(9999, 12, 30, tzinfo=UTC)

PARK_HELD_SQL = """
WITH j AS (
    SELECT id FROM {s}.jobs
    WHERE id = %(job)s AND fence = %(fence)s AND state = 'running' FOR UPDATE
), h AS (
    UPDATE {s}.job_holds AS h SET state = 'available', run_at = now()
    FROM j WHERE h.job_id = j.id
    RETURNING h.job_id
)
UPDATE {s}.jobs AS t SET
    state = CASE WHEN t.cancel_requested_at IS NOT NULL THEN 'cancelled' ELSE 'scheduled' END,
    finished_at = CASE WHEN t.cancel_requested_at IS NOT NULL THEN now() END,
    run_at = %(until)s, attempt = greatest(0, t.attempt - 1), lease_expires_at = NULL,
    attempted_at = coalesce(t.attempted_at, now()), lost = 0
FROM h WHERE t.id = h.job_id
RETURNING t.run_at
"""


async def park(conn: psycopg.AsyncConnection[Any], *, schema: str, job: int, fence: int
               ) -> Any:
    """Park a held running attempt: (its run_at,), or None when the lease is gone or no hold
    is left (a resume came first: the handler goes on)."""
    cur = await conn.execute(render(PARK_HELD_SQL, schema),
                             {"job": job, "fence": fence, "until": PAUSED_UNTIL})
    return await cur.fetchone()
