"""The idle mark: a worker about to wait for work says so, and only then do producers NOTIFY.

PostgreSQL serialises every notifying commit on one cluster-wide lock, held from before the
commit record is written until it is flushed, so producers that all NOTIFY commit one at a time.
An insert (``functions/jobs_wake_queue_v1.sql``, from the insert trigger or the single
enqueue's own statement) therefore wakes workers only when one has left a mark in
``idle_workers`` for the job's queue, and takes away the marks it finds.

Why no job is stranded (the full argument is beside the trigger): the mark is written in the
same statement that *tries* an exclusive advisory lock on (schema, queue), which every producer
holds shared from the moment it looks for marks until its transaction ends. A successful try
means every producer that might have missed the mark has finished, so one more claim sees its
jobs; later producers see the mark. A failed try (a producer in flight) is followed by claims
after a short, growing delay until a try succeeds. LISTEN stays a hint and the poll the
backstop. Any wake-up may have consumed the mark, so the next wait writes it again.
"""

from __future__ import annotations

from typing import Any

from forklift._db.sqltext import render

__all__ = ["MARK_SQL", "IdleMark"]

# One statement (one transaction): this worker's old marks replaced by new ones, and the try of
# every queue's lock. The try never waits, so a long producer transaction cannot hold the
# worker, nor queue other producers behind a waiting exclusive request; and no row is upserted
# (an old mark a producer is taking away is skipped, not waited for: it goes at that commit).
MARK_SQL = """
WITH old AS (
    DELETE FROM {s}.idle_workers WHERE ctid = ANY (ARRAY(
        SELECT ctid FROM {s}.idle_workers WHERE worker_id = %(worker)s FOR UPDATE SKIP LOCKED))
), marks AS (
    INSERT INTO {s}.idle_workers (queue, worker_id)
    SELECT q, %(worker)s FROM unnest(%(queues)s::text[]) AS q
)
SELECT bool_and(pg_try_advisory_xact_lock(hashtext({channel}), hashtext(q)))
FROM unnest(%(queues)s::text[]) AS q
"""

RETRY_FIRST = 0.002  # seconds before the first claim again after a failed try


class IdleMark:
    """Whether this worker's mark is written, and whether its barrier held."""

    def __init__(self, schema: str, worker_id: str, queues: list[str]) -> None:
        self.sql = render(MARK_SQL, schema)
        self.params = {"worker": worker_id, "queues": queues}
        self.marked = False  # the mark was written and no wake-up came since
        self._retry = RETRY_FIRST
        self.marks = 0  # statements run (tests read it)

    def woken(self) -> None:
        """A wake-up (NOTIFY, a re-established listener) may have consumed the mark."""
        self.marked = False

    async def mark(self, conn: Any) -> bool:
        """Write the mark on the claim session; True when the barrier held."""
        self.marks += 1
        cur = await conn.execute(self.sql, self.params, prepare=True)
        row = await cur.fetchone()
        return bool(row and row[0])

    def pause(self, held: bool | None, poll: float) -> float:
        """How long to wait after a mark (``held``: its outcome; None: none was needed).

        0: claim once more at once (the barrier held: that claim sees every job whose
        producer missed the mark). A short delay, doubling up to the poll: a producer was in
        flight; claim again and try again. The poll: marked, nothing to do.
        """
        if held is None:
            return poll
        if held:
            self.marked = True
            self._retry = RETRY_FIRST
            return 0.0
        wait = min(self._retry, poll)
        self._retry = min(self._retry * 2, poll)
        return wait
