"""The expirer: waiting jobs past their start-by deadline go dead (``expired``), a batch a
statement.

A worker that claims a job past its deadline never starts its handler (forklift._worker.attempts);
this sweep ends the ones no worker claims, so counts and dead letters are true without a worker
of the queue. It reads only the partial index of waiting jobs that have a deadline, which a job
without one never enters: the sweep costs such jobs nothing. The job's attempt count stays what
it was (no attempt ran); the error entry is the one a worker writes for an expired job it
claimed, so both fall in one dead-letter group.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import psycopg

from forklift._base.words import plural
from forklift._db.sqltext import render
from forklift._worker.execute import EXPIRED_MESSAGE
from forklift._worker.maintenance.chore import Chore
from forklift._worker.maintenance.rescuer import Rescued

if TYPE_CHECKING:
    import asyncio

    from forklift._jobs.lifecycle import Lifecycle
    from forklift._worker.config import WorkerConfig
    from forklift._worker.state import WorkerState

log = logging.getLogger("forklift.worker")

#: Most jobs ended by one statement; a pass runs at most EXPIRE_BATCHES of them.
EXPIRE_BATCH = 1000
EXPIRE_BATCHES = 10

# Waiting states only: a running job has started (its deadline no longer applies to this
# attempt), and a terminal one is over. The predicate repeats the index's, so the planner uses it.
EXPIRE_SQL = """
WITH due AS (
    SELECT id FROM {s}.jobs
    WHERE expires_at IS NOT NULL AND expires_at <= now()
      AND state = ANY ('{scheduled,available,retryable}'::text[])
    ORDER BY expires_at LIMIT %(batch)s
    FOR UPDATE SKIP LOCKED
)
UPDATE {s}.jobs AS t SET
    state = 'dead', finished_at = now(),
    errors = t.errors || jsonb_build_array(jsonb_build_object(
        'code', 'expired', 'type', NULL, 'message', %(message)s::text, 'traceback', '[]'::jsonb,
        'attempt', t.attempt, 'worker', %(worker)s::text, 'at', now()))
FROM due
WHERE t.id = due.id AND t.state = ANY ('{scheduled,available,retryable}'::text[])
RETURNING t.id, t.state, t.kind, t.queue, t.attempt, t.errors -> -1
"""


async def expire(conn: psycopg.AsyncConnection[Any], schema: str, *, worker: str | None = None,
                 batch: int = EXPIRE_BATCH, batches: int = EXPIRE_BATCHES) -> list[Rescued]:
    """End waiting jobs past their deadline, ``batch`` rows a statement, at most ``batches``
    statements; returns them."""
    ended: list[Rescued] = []
    for _ in range(batches):
        cur = await conn.execute(render(EXPIRE_SQL, schema), {"batch": batch, "worker": worker,
                                                              "message": EXPIRED_MESSAGE})
        rows = [Rescued(int(r[0]), str(r[1]), str(r[2]), str(r[3]), int(r[4]), dict(r[5]))
                for r in await cur.fetchall()]
        ended += rows
        if len(rows) < batch:
            break
    return ended


class Expirer(Chore):
    name = "expire"

    def __init__(self, config: WorkerConfig, state: WorkerState, *, leading: asyncio.Event,
                 lifecycle: Lifecycle) -> None:
        super().__init__(config, state, leading=leading)
        self.lifecycle = lifecycle  # observers of expired jobs (hooks, metrics)

    async def once(self) -> None:
        ended = await self.db.run(
            lambda c: expire(c, self.config.schema, worker=self.state.id))
        if not ended:
            return
        self.state.stats.expired += len(ended)
        log.info("%s not started by their deadline went dead (expired): %s",
                 plural(len(ended), "job"), ", ".join(str(r.id) for r in ended[:20]))
        if self.lifecycle.on_expired:
            self.lifecycle.expired(ended)
