"""Writing what became of attempts: one fenced statement for a whole batch of outcomes."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import psycopg

from forklift._db.sqltext import RUNNING, render

if TYPE_CHECKING:
    from forklift._features.flow.handoff import Handoff
    from forklift._worker.claim import Claimed

Next = Literal["completed", "retryable", "dead", "scheduled", "cancelled"]

# Parameters go in binary (%b): psycopg quotes text arrays element by element in Python, which
# cost more per job than everything else in a flush.
# An operator's cancel beats every outcome but success: a handler that finished its work
# completes, anything else that was asked to stop ends cancelled. A note (an entry marked
# "note", with no time: a job put back because its payload version is newer than its worker
# reads, forklift._worker.execute.ahead) is not added again when the last entry is the same
# note, so old workers meeting the job keep one, not one per meeting; every other entry is one
# failed or released attempt, kept however alike.
SETTLE_SQL = """
UPDATE {s}.jobs AS t SET
    state = CASE WHEN o.st <> 'completed' AND t.cancel_requested_at IS NOT NULL
                 THEN 'cancelled' ELSE o.st END,
    finished_at = CASE WHEN o.st IN ('completed', 'dead', 'cancelled')
                         OR (o.st <> 'completed' AND t.cancel_requested_at IS NOT NULL)
                       THEN now() END,
    run_at = CASE WHEN o.st IN ('retryable', 'scheduled')
                  THEN now() + make_interval(secs => o.delay) ELSE t.run_at END,
    attempt = t.attempt - o.refund,
    result = coalesce(o.result, t.result),
    errors = CASE WHEN o.error IS NULL OR o.error ? 'note' AND o.error = t.errors -> -1
                  THEN t.errors ELSE t.errors || jsonb_build_array(o.error) END,
    progress = coalesce(o.progress, t.progress),
    partial = CASE WHEN o.st = 'completed' THEN NULL ELSE coalesce(o.partial, t.partial) END,
    lease_expires_at = NULL, attempted_at = coalesce(t.attempted_at, now()), lost = 0
FROM unnest(%b::bigint[], %b::bigint[], %b::text[], %b::float8[], %b::int4[], %b::jsonb[],
            %b::jsonb[], %b::jsonb[], %b::jsonb[])
     AS o(id, fence, st, delay, refund, result, error, progress, partial)
WHERE t.id = o.id AND t.fence = o.fence AND t.state = """ + RUNNING + """
RETURNING t.fence, t.state
"""

# The common flush, nothing but plain completions: what SETTLE_SQL writes for them, with a
# third of the parameters and none of its per-row CASEs (about 2 us a job less on the server).
COMPLETE_SQL = """
UPDATE {s}.jobs AS t SET
    state = 'completed', finished_at = now(), result = o.result, partial = NULL,
    lease_expires_at = NULL, attempted_at = coalesce(t.attempted_at, now()), lost = 0
FROM unnest(%b::bigint[], %b::bigint[], %b::jsonb[]) AS o(id, fence, result)
WHERE t.id = o.id AND t.fence = o.fence AND t.state = """ + RUNNING + """
RETURNING t.fence, t.state
"""


# The logs of a batch's attempts (forklift._jobs.attempt_log), sent only when some attempt of
# the batch logged, in the settle's transaction: an outcome and its log are stored together.
LOGS_SQL = """
INSERT INTO {s}.job_logs (job_id, attempt, lines)
SELECT l.id, l.attempt, l.lines FROM unnest(%b::bigint[], %b::int4[], %b::json[])
     AS l(id, attempt, lines)
"""


@dataclass
class Outcome:
    job_id: int
    fence: int
    next: Next
    delay: float = 0.0
    refund: int = 0  # 1 when the attempt does not count (snooze, drain interruption)
    result: str | None = None  # JSON text
    error: dict[str, Any] | None = None
    progress: str | None = None
    partial: str | None = None
    code: str | None = field(default=None, compare=False)  # for logs and metrics
    #: The attempt's log, when its handler logged: (attempt, JSON array of lines).
    logs: tuple[int, str] | None = field(default=None, compare=False, repr=False)
    #: The attempt's job, when the worker has it (the fallback needs its attempts and backoff).
    job: Claimed | None = field(default=None, compare=False, repr=False)

    @property
    def plain_completion(self) -> bool:
        """Completed with a result and nothing else to write (what COMPLETE_SQL covers)."""
        return (self.next == "completed" and self.result is not None and not self.refund
                and self.error is None and self.progress is None)


async def write(
    conn: psycopg.AsyncConnection[Any], schema: str, outcomes: list[Outcome],
    handoff: Handoff | None = None,
) -> dict[int, str]:
    """Write outcomes; returns fence -> final state for each write the fence accepted.

    Rows go in id order, like the heartbeat's, so the two statements cannot deadlock. With
    ``handoff`` (a worker with flow queues, forklift._features.flow.handoff) the same statement claims
    the next jobs of the settled keyed jobs' values, into ``handoff.jobs``. Attempts' logs
    (``Outcome.logs``) go in the same transaction by one more statement, only when there are any.
    """
    if not outcomes:
        return {}
    outcomes = sorted(outcomes, key=lambda o: o.job_id)
    logged = [o for o in outcomes if o.logs is not None]
    if not logged:
        return await _settle(conn, schema, outcomes, handoff)
    async with conn.transaction():
        accepted = await _settle(conn, schema, outcomes, handoff)
        # A refused outcome's attempt ran all the same (its lease was lost): its log is kept.
        await write_logs(conn, schema, [(o.job_id, *o.logs) for o in logged if o.logs])
    return accepted


async def write_logs(conn: psycopg.AsyncConnection[Any], schema: str,
                     logs: list[tuple[int, int, str]]) -> None:
    """Store attempts' logs, (job id, attempt, JSON array of lines) each."""
    await conn.execute(render(LOGS_SQL, schema), (
        [job_id for job_id, _, _ in logs], [attempt for _, attempt, _ in logs],
        [lines for _, _, lines in logs]))


async def _settle(
    conn: psycopg.AsyncConnection[Any], schema: str, outcomes: list[Outcome],
    handoff: Handoff | None,
) -> dict[int, str]:
    if all(o.plain_completion for o in outcomes):
        sql, params = COMPLETE_SQL, (
            [o.job_id for o in outcomes], [o.fence for o in outcomes],
            [o.result for o in outcomes])
    else:
        sql, params = SETTLE_SQL, _settle_params(outcomes)
    if handoff is not None:
        return await handoff.run(conn, schema, sql, params)
    cur = await conn.execute(render(sql, schema), params)
    return {row[0]: row[1] for row in await cur.fetchall()}


def _settle_params(outcomes: list[Outcome]) -> tuple[Any, ...]:
    return (
        [o.job_id for o in outcomes],
        [o.fence for o in outcomes],
        [o.next for o in outcomes],
        [float(o.delay) for o in outcomes],  # one type per array: 900 and 0.5 mix
        [int(o.refund) for o in outcomes],
        [o.result for o in outcomes],
        [json.dumps(o.error, default=str) if o.error is not None else None for o in outcomes],
        [o.progress for o in outcomes],
        [o.partial for o in outcomes],
    )
