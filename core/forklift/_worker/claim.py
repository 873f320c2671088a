"""The claim: up to N jobs in one statement, in priority, run_at, id order.

The queue's pause and concurrency limit are read by the claim itself, so a pause holds from the
very next claim. Queues with a limit are serialised by a transaction-scoped advisory lock taken
in the same pipelined transaction, so two workers cannot both see room for the last slot.

When none of a worker's queues has a limit there is nothing to serialise, and the claim is one
autocommit statement (:data:`CLAIM_FREE_SQL`, about half the round trip of the pipelined
transaction). That statement gives limited queues no room at all and answers with a marker row
when it met one, so a worker that believed its queues unlimited switches to the locked claim on
its next pass: a stale belief can delay a newly limited queue by one claim, never overfill it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg

from forklift._sqltext import render

LOCK_LIMITED_SQL = (
    "SELECT pg_advisory_xact_lock(hashtextextended('forklift.queue:' || name, 0))"
    " FROM {s}.queues WHERE name = ANY(%s::text[]) AND concurrency IS NOT NULL ORDER BY name"
)


@dataclass(frozen=True)
class Clause:
    """One condition of the claim, composed into the one claim statement.

    ``where`` is a predicate on a candidate row ``jobs`` of the per-queue scan (it must be
    served by the claim index, or the plan test fails); ``params`` are the named parameters it
    uses. Later conditions (per-key limits, rate limits, fair share, dependencies) plug in
    here as clauses; the statement is composed once per worker and planned once per session.
    """

    name: str
    where: str = ""
    params: tuple[tuple[str, Any], ...] = ()


# The worker's queues that are not paused (a pause that has expired no longer holds).
_OPEN_QUEUES = """    FROM unnest(%(queues)s::text[]) AS w(name)
    LEFT JOIN {s}.queues qs ON qs.name = w.name
    WHERE qs.name IS NULL OR NOT qs.paused
       OR (qs.pause_expires_at IS NOT NULL AND qs.pause_expires_at <= now())"""


def _pick(room: str, where: str) -> str:
    """Up to ``room`` waiting jobs per queue, row-locked, the batch in claim order."""
    return """    SELECT j.id FROM q CROSS JOIN LATERAL (
        SELECT id, priority, run_at FROM {s}.jobs
        WHERE state = 'available' AND queue = q.name""" + where + """
        ORDER BY priority, run_at, id
        LIMIT """ + room + """
        FOR UPDATE SKIP LOCKED
    ) j
    ORDER BY j.priority, j.run_at, j.id
    LIMIT %(n)s"""


# Claimed rows are stamped with a fresh fence and a lease; shared by both claim statements.
# They are found by id through an array (not a join with c), so that a generic plan, which
# cannot know how few rows c holds, still reads them from the primary key.
_TAKE = """UPDATE {s}.jobs AS t
SET state = 'running', attempt = t.attempt + 1, attempted_at = now(), worker_id = %(w)s,
    fence = nextval('{s}.fence_seq'), lease_expires_at = now() + make_interval(secs => %(lease)s),
    cancel_requested_at = NULL
WHERE t.id = ANY (ARRAY(SELECT c.id FROM c))
RETURNING t.id, t.queue, t.kind, t.args, t.attempt, t.max_attempts, t.fence, t.retry, t.meta,
          t.batch_id, t.priority, t.traceparent, extract(epoch FROM now() - t.run_at)::float8"""


def compose(clauses: tuple[Clause, ...] = (), *, locked: bool) -> str:
    """The claim statement with ``clauses``: under the limit locks, or the lock-free one."""
    where = "".join(f"\n          AND ({c.where})" for c in clauses if c.where)
    if locked:
        return """
WITH q AS (
    SELECT w.name,
           CASE WHEN qs.concurrency IS NULL THEN %(n)s
                ELSE greatest(0, least(%(n)s, qs.concurrency - (
                    SELECT count(*) FROM {s}.jobs r WHERE r.state = 'running' AND r.queue = w.name)))
           END AS room
""" + _OPEN_QUEUES + """
), c AS (
""" + _pick("q.room", where) + """
)
""" + _TAKE + "\n"
    # The lock-free claim: unlimited queues only; a marker row (id NULL) says a limited one was
    # seen.
    return """
WITH q AS (
    SELECT w.name, qs.concurrency IS NOT NULL AS limited
""" + _OPEN_QUEUES + """
), c AS (
""" + _pick("CASE WHEN q.limited THEN 0 ELSE %(n)s END", where) + """
), u AS (
""" + _TAKE + """
)
SELECT * FROM u
UNION ALL
(SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
 FROM q WHERE q.limited LIMIT 1)
"""


CLAIM_SQL = compose(locked=True)
CLAIM_FREE_SQL = compose(locked=False)


# Jobs claimed into a worker's local buffer but never started go back as they were: available,
# the attempt refunded, no error entry; one NOTIFY per queue that got work back. A job whose
# cancel was requested meanwhile ends cancelled instead. Fenced like every write for a claim.
RELEASE_SQL = """
WITH r AS (
    UPDATE {s}.jobs AS t SET
        state = CASE WHEN t.cancel_requested_at IS NULL THEN 'available' ELSE 'cancelled' END,
        finished_at = CASE WHEN t.cancel_requested_at IS NULL THEN NULL ELSE now() END,
        attempt = greatest(0, t.attempt - 1), worker_id = NULL, lease_expires_at = NULL
    FROM unnest(%s::bigint[], %s::bigint[]) AS u(id, fence)
    WHERE t.id = u.id AND t.fence = u.fence AND t.state = 'running'
    RETURNING t.id, t.queue, t.state
), woken AS (
    SELECT pg_notify({channel}, q.queue) FROM (SELECT DISTINCT queue FROM r WHERE state = 'available') q
)
SELECT r.id, (SELECT count(*) FROM woken) FROM r
"""


@dataclass(frozen=True)
class Claimed:
    id: int
    queue: str
    kind: str
    args: Any
    attempt: int
    max_attempts: int
    fence: int
    retry: dict[str, Any] | None
    meta: dict[str, Any]
    batch_id: int | None
    priority: int
    #: W3C trace context of the enqueue that made the job (migration 0010), if it was traced
    traceparent: str | None = None
    #: seconds from when the job was due (run_at) to this claim, by the server's clock
    lag: float | None = None


class ClaimStatement:
    """The worker's claim, composed once from its clauses (both variants), run per batch."""

    def __init__(self, clauses: tuple[Clause, ...], *, worker_id: str, queues: list[str],
                 lease: float) -> None:
        self.clauses = clauses
        self.locked_sql = compose(clauses, locked=True)
        self.free_sql = compose(clauses, locked=False)
        self.queues = queues
        self.params: dict[str, Any] = {"queues": queues, "w": worker_id, "lease": lease}
        for clause in clauses:
            self.params.update(clause.params)

    async def run(
        self, conn: psycopg.AsyncConnection[Any], schema: str, *, n: int, locked: bool
    ) -> tuple[list[Claimed], bool]:
        """Claim up to ``n`` jobs; also says whether any of the queues has a concurrency limit.

        ``locked=False`` is the single statement that leaves limited queues alone; when the
        answer says a limit exists, claim again with ``locked=True``.
        """
        params = {**self.params, "n": n}
        if not locked:
            cur = await conn.execute(render(self.free_sql, schema), params)
            rows = await cur.fetchall()
            jobs = [Claimed(*r) for r in rows if r[0] is not None]
            return jobs, len(jobs) != len(rows)
        # One round trip: BEGIN, the limit locks, the claim and COMMIT travel together.
        async with conn.pipeline(), conn.transaction():
            locks = await conn.execute(render(LOCK_LIMITED_SQL, schema), (self.queues,))
            cur = await conn.execute(render(self.locked_sql, schema), params)
        rows = await cur.fetchall()
        return [Claimed(*r) for r in rows], locks.rowcount > 0


async def claim(
    conn: psycopg.AsyncConnection[Any],
    schema: str,
    *,
    worker_id: str,
    queues: list[str],
    n: int,
    lease: float,
) -> list[Claimed]:
    """Claim up to ``n`` jobs under the limit locks (always correct, one round trip)."""
    jobs, _ = await claim_batch(
        conn, schema, worker_id=worker_id, queues=queues, n=n, lease=lease, locked=True
    )
    return jobs


async def claim_batch(
    conn: psycopg.AsyncConnection[Any],
    schema: str,
    *,
    worker_id: str,
    queues: list[str],
    n: int,
    lease: float,
    locked: bool,
    clauses: tuple[Clause, ...] = (),
) -> tuple[list[Claimed], bool]:
    """One claim with a statement composed for this call (tests, scripts)."""
    statement = ClaimStatement(clauses, worker_id=worker_id, queues=queues, lease=lease)
    return await statement.run(conn, schema, n=n, locked=locked)


async def release(
    conn: psycopg.AsyncConnection[Any], schema: str, held: list[tuple[int, int]]
) -> set[int]:
    """Give back claimed jobs that never started ((id, fence) pairs); returns the ids released."""
    if not held:
        return set()
    pairs = sorted(held)  # id order, like every multi-row write of a worker: no deadlocks
    cur = await conn.execute(
        render(RELEASE_SQL, schema), ([p[0] for p in pairs], [p[1] for p in pairs])
    )
    return {int(r[0]) for r in await cur.fetchall()}
