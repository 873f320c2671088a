"""The claim: up to N jobs in one statement, in priority, run_at, id order.

The queue's pause and concurrency limit are read by the claim itself, so a pause holds from the
very next claim. Queues with a limit are serialised by a transaction-scoped advisory lock taken
in the same pipelined transaction, so two workers cannot both see room for the last slot.

When none of a worker's queues has a limit there is nothing to serialise, and the claim is one
autocommit statement (:data:`CLAIM_FREE_SQL`, about half the round trip of the pipelined
transaction). That statement gives limited queues no room at all and answers with a marker row
when it met one, so a worker that believed its queues unlimited switches to the locked claim on
its next pass: a stale belief can delay a newly limited queue by one claim, never overfill it.

Kinds
    A worker claims only the kinds it registered: the claim walks the claim index (queue, kind,
    priority, run_at, id) once per (queue, kind) pair, so a backlog of a kind no worker here
    knows is never read, let alone locked. The walks are merged in claim order, and only then
    are rows locked (``FOR UPDATE SKIP LOCKED`` on at most twice the batch of candidates): a
    lock inside each walk would lock a batch per pair for one batch taken.

What else the answer carries
    Marker rows (``id`` NULL): ``!paused`` for each of the worker's queues that is paused (the
    worker gives back jobs of that queue it holds in its local buffer), ``!limited`` (the
    lock-free statement met a limited queue) and ``!flow`` for each queue with keys, a rate or
    fair share: neither statement claims from those, the flow claim does
    (forklift._features.flow.claim). The first ``start`` rows of the batch in claim
    order are stamped ``attempted_at`` (their handlers start at once); the others wait in the
    worker's buffer with ``attempted_at`` NULL until it records their start.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg

from forklift._db.sqltext import RUNNING, render
from forklift._jobs.claimed import LOCK_LIMITED_SQL, OPEN_SQL, TAKE_SQL, Claimed

_OPEN = OPEN_SQL
_TAKE = TAKE_SQL
__all__ = ["LOCK_LIMITED_SQL", "Claimed"]


@dataclass(frozen=True)
class Clause:
    """One condition of the claim, composed into the one claim statement.

    ``axis`` (optional) is a set the per-queue walk of the claim index is repeated over, and
    ``match`` the predicate that ties a candidate row ``jobs`` to it (the kinds: ``unnest(...) AS
    k(kind)`` and ``kind = k.kind``); ``where`` is a plain predicate on a candidate row (it must
    be served by the claim index, or the plan test fails); ``params`` are the named parameters
    it uses. Later conditions (per-key limits, rate limits, fair share, dependencies) plug in
    here; the statement is composed once per worker and planned once per session.
    """

    name: str
    axis: str = ""
    match: str = ""
    where: str = ""
    params: tuple[tuple[str, Any], ...] = ()


def kinds_clause(kinds: Sequence[str]) -> Clause:
    """Claim only these kinds (a worker's registered handlers)."""
    return Clause("kinds", axis="unnest(%(kinds)s::text[]) AS k(kind)", match="kind = k.kind",
                  params=(("kinds", sorted(set(kinds))),))


# The worker's queues: open (not paused, or the pause has expired) or not, limited or not.
_QUEUES = """    FROM unnest(%(queues)s::text[]) AS w(name)
    LEFT JOIN {s}.queues qs ON qs.name = w.name"""


_MARKER = ("NULL::bigint, q.name, {what}, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,"
           " NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL")


def compose(clauses: tuple[Clause, ...] = (), *, locked: bool) -> str:
    """The claim statement with ``clauses``: under the limit locks, or the lock-free one."""
    axes = "".join(f" CROSS JOIN {c.axis}" for c in clauses if c.axis)
    where = "".join(f"\n          AND ({c.match})" for c in clauses if c.match)
    where += "".join(f"\n          AND ({c.where})" for c in clauses if c.where)
    if locked:
        room = """CASE WHEN NOT """ + _OPEN + """ OR qs.flow THEN 0
                WHEN qs.concurrency IS NULL THEN %(n)s
                ELSE greatest(0, least(%(n)s, qs.concurrency - (
                    SELECT count(*) FROM {s}.jobs r WHERE r.state = 'running' AND r.queue = w.name)))
           END"""
    else:
        room = ("CASE WHEN NOT " + _OPEN + " OR qs.concurrency IS NOT NULL OR qs.flow THEN 0"
                " ELSE %(n)s END")
    # A queue's room caps what the merged walks take from it (several kinds share one queue).
    ranked = """SELECT id, priority, run_at FROM (
        SELECT cand.*, row_number() OVER (PARTITION BY cand.queue
                                          ORDER BY cand.priority, cand.run_at, cand.id) AS rn
        FROM cand) r JOIN q ON q.name = r.queue
    WHERE r.rn <= q.room""" if locked else "SELECT id, priority, run_at FROM cand"
    markers = ("CASE WHEN NOT q.open THEN '!paused' WHEN q.flow THEN '!flow' ELSE '!limited' END",
               "NOT q.open OR q.flow" + ("" if locked else " OR q.limited"))
    return """
WITH q AS (
    SELECT w.name, """ + _OPEN + """ AS open, qs.concurrency IS NOT NULL AS limited,
           coalesce(qs.flow, false) AS flow, """ + room + """ AS room
""" + _QUEUES + """
), cand AS (
    SELECT j.id, j.queue, j.priority, j.run_at FROM q""" + axes + """ CROSS JOIN LATERAL (
        SELECT id, queue, priority, run_at FROM {s}.jobs
        WHERE state = 'available' AND queue = q.name""" + where + """
        ORDER BY priority, run_at, id
        LIMIT 2 * q.room
    ) j
), picked AS (
    """ + ranked + """
    ORDER BY priority, run_at, id
    LIMIT 2 * %(n)s
), c AS (
    SELECT id, priority, run_at FROM {s}.jobs
    WHERE id = ANY (ARRAY(SELECT picked.id FROM picked)) AND state = 'available'
    ORDER BY priority, run_at, id
    LIMIT %(n)s
    FOR UPDATE SKIP LOCKED
), s AS (
    SELECT id FROM c ORDER BY priority, run_at, id LIMIT %(start)s
), u AS (
""" + _TAKE + """
)
SELECT * FROM u
UNION ALL
SELECT """ + _MARKER.format(what=markers[0]) + """ FROM q WHERE """ + markers[1] + "\n"


#: The claim statements of a worker (what the plan tests EXPLAIN); parameters: n, start,
#: queues, kinds, w, lease.
CLAIM_SQL = compose((kinds_clause(()),), locked=True)
CLAIM_FREE_SQL = compose((kinds_clause(()),), locked=False)


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
    WHERE t.id = u.id AND t.fence = u.fence AND t.state = """ + RUNNING + """
    RETURNING t.id, t.queue, t.state
), woken AS (
    SELECT pg_notify({channel}, q.queue) FROM (SELECT DISTINCT queue FROM r WHERE state = 'available') q
)
SELECT r.id, (SELECT count(*) FROM woken) FROM r
"""


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
        self, conn: psycopg.AsyncConnection[Any], schema: str, *, n: int, locked: bool,
        start: int | None = None,
    ) -> Answer:
        """Claim up to ``n`` jobs, the first ``start`` (default all) of them starting now.

        ``locked=False`` is the single statement that leaves limited queues alone; when the
        answer says a limit exists, claim again with ``locked=True``.
        """
        params = {**self.params, "n": n, "start": n if start is None else start}
        if not locked:
            cur = await conn.execute(render(self.free_sql, schema), params)
            return Answer.of(await cur.fetchall())
        # One round trip: BEGIN, the limit locks, the claim and COMMIT travel together.
        async with conn.pipeline(), conn.transaction():
            locks = await conn.execute(render(LOCK_LIMITED_SQL, schema), (self.queues,))
            cur = await conn.execute(render(self.locked_sql, schema), params)
        answer = Answer.of(await cur.fetchall())
        answer.limited = locks.rowcount > 0
        return answer


@dataclass
class Answer:
    """What one claim returned: the jobs, the paused queues, whether a limit was met, and the
    queues flagged for the flow claim (forklift._features.flow.claim), which this claim left alone."""

    jobs: list[Claimed]
    paused: set[str]
    limited: bool
    flow: set[str] = field(default_factory=set)

    @classmethod
    def of(cls, rows: list[tuple[Any, ...]]) -> Answer:
        jobs = [Claimed.from_row(r) for r in rows if r[0] is not None]
        markers = [(r[1], r[2]) for r in rows if r[0] is None]
        return cls(jobs, {q for q, what in markers if what == "!paused"},
                   any(what == "!limited" for _, what in markers),
                   {q for q, what in markers if what == "!flow"})


async def claim(
    conn: psycopg.AsyncConnection[Any],
    schema: str,
    *,
    worker_id: str,
    queues: list[str],
    n: int,
    lease: float,
    kinds: Sequence[str] | None = None,
) -> list[Claimed]:
    """Claim up to ``n`` jobs under the limit locks (always correct, one round trip)."""
    answer = await claim_batch(
        conn, schema, worker_id=worker_id, queues=queues, n=n, lease=lease, locked=True,
        kinds=kinds,
    )
    return answer.jobs


async def claim_batch(
    conn: psycopg.AsyncConnection[Any],
    schema: str,
    *,
    worker_id: str,
    queues: list[str],
    n: int,
    lease: float,
    locked: bool,
    kinds: Sequence[str] | None = None,
    clauses: tuple[Clause, ...] = (),
    start: int | None = None,
) -> Answer:
    """One claim with a statement composed for this call (tests, scripts). ``kinds`` None: the
    kinds waiting in ``queues`` now (a worker always names its own)."""
    if kinds is None:
        cur = await conn.execute(render(
            "SELECT DISTINCT kind FROM {s}.jobs WHERE state = 'available' AND queue = ANY(%s)",
            schema), (queues,))
        kinds = [str(r[0]) for r in await cur.fetchall()]
    statement = ClaimStatement((kinds_clause(kinds), *clauses), worker_id=worker_id,
                               queues=queues, lease=lease)
    return await statement.run(conn, schema, n=n, locked=locked, start=start)


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
