"""The rescuer: jobs whose lease expired go back to the queue (or dead, or cancelled)."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any, NamedTuple

import psycopg

from forklift._base.words import plural
from forklift._db.sqltext import render
from forklift._worker.maintenance.chore import Chore
from forklift._worker.maintenance.stager import stage

if TYPE_CHECKING:
    from forklift._jobs.lifecycle import Lifecycle
    from forklift._worker.config import WorkerConfig
    from forklift._worker.state import WorkerState

log = logging.getLogger("forklift.worker")

#: Attempts in a row that may end by lease expiry before a job goes dead with ``worker_lost``,
#: for kinds no worker row describes (a kind's own ``lease_expiries`` is registered by workers).
LEASE_EXPIRIES = 3
#: Most jobs rescued by one statement; a pass runs at most RESCUE_BATCHES of them.
RESCUE_BATCH = 1000
RESCUE_BATCHES = 10

# Expired leases, in bounded batches. Cancel beats rescue. An attempt whose handler began (the
# claim or the worker recorded its start) is charged and retried by its kind's backoff (the
# row's own retry policy, else the one the kind's workers registered, else the default), or
# goes dead when it was the last; a job whose attempts ended by lease expiry `lease_expiries`
# times in a row goes dead with worker_lost (it kills the process that runs it). A job that was
# only waiting in a worker's local buffer gets its attempt back and runs again at once -- but
# only the first time in a row: a start the worker had not yet recorded must not let a job
# that kills its process straight away loop for ever.
RESCUE_SQL = """
WITH expired AS (
    SELECT id FROM {s}.jobs
    WHERE state = 'running' AND lease_expires_at < now()
    LIMIT %(batch)s
    FOR UPDATE SKIP LOCKED
), specs AS (
    SELECT DISTINCT ON (e.kind) e.kind, e.spec
    FROM {s}.workers w, jsonb_each(coalesce(w.kinds, '{}'::jsonb)) AS e(kind, spec)
    ORDER BY e.kind, w.heartbeat_at DESC
), r AS (
    SELECT t.id, p.charged,
           p.charged AND t.lost + 1 >= coalesce((sp.spec ->> 'lease_expiries')::int,
                                                %(expiries)s) AS worker_lost,
           p.charged AND t.attempt >= t.max_attempts AS exhausted,
           CASE WHEN NOT p.charged THEN 0.0
                WHEN b.jitter = 'full' THEN b.ceil * random()
                WHEN b.jitter = 'none' THEN b.ceil
                ELSE b.ceil / 2 + b.ceil / 2 * random() END AS delay
    FROM expired x JOIN {s}.jobs t ON t.id = x.id
    LEFT JOIN specs sp ON sp.kind = t.kind
    CROSS JOIN LATERAL (SELECT t.attempted_at IS NOT NULL OR t.lost > 0 AS charged,
                               coalesce(t.retry, sp.spec -> 'retry', '{}'::jsonb) AS retry) p
    CROSS JOIN LATERAL (SELECT greatest(1, t.attempt) AS n,
                               coalesce((p.retry ->> 'base')::float8, 1.0) AS base,
                               coalesce((p.retry ->> 'max')::float8, 3600.0) AS max,
                               coalesce(p.retry ->> 'kind', 'exponential') AS kind,
                               coalesce(p.retry ->> 'jitter', 'equal') AS jitter) q
    CROSS JOIN LATERAL (SELECT q.jitter, least(q.max, CASE q.kind
                                   WHEN 'fixed' THEN q.base
                                   WHEN 'linear' THEN q.base * q.n
                                   ELSE q.base * power(2.0, least(q.n - 1, 60)) END) AS ceil) b
)
UPDATE {s}.jobs AS t SET
    state = CASE WHEN t.cancel_requested_at IS NOT NULL THEN 'cancelled'
                 WHEN r.worker_lost OR r.exhausted THEN 'dead'
                 ELSE 'retryable' END,
    finished_at = CASE WHEN t.cancel_requested_at IS NOT NULL OR r.worker_lost OR r.exhausted
                       THEN now() END,
    attempt = CASE WHEN r.charged THEN t.attempt ELSE greatest(0, t.attempt - 1) END,
    lost = t.lost + 1,
    run_at = now() + make_interval(secs => r.delay),
    lease_expires_at = NULL,
    errors = t.errors || jsonb_build_array(jsonb_build_object(
        'code', CASE WHEN r.worker_lost THEN 'worker_lost' ELSE 'lease_expired' END,
        'type', 'LeaseExpired',
        'message', format('the lease of worker %%s expired at %%s without a heartbeat%%s',
                          t.worker_id, t.lease_expires_at,
                          CASE WHEN r.worker_lost THEN format(
                              '; %%s attempts in a row ended so: the job kills the process that'
                              ' runs it (out of memory, a crash, os._exit?)', t.lost + 1)
                               WHEN NOT r.charged THEN
                              '; it had not started there, so the attempt does not count'
                               ELSE '' END),
        'attempt', t.attempt,
        'worker', t.worker_id,
        'at', now()))
FROM r
WHERE t.id = r.id AND t.state = 'running' AND t.lease_expires_at < now()
RETURNING t.id, t.state, t.kind, t.queue, t.attempt, t.errors -> -1
"""


class Rescued(NamedTuple):
    """One rescued job: its new state and the error entry the rescue recorded."""

    id: int
    state: str
    kind: str
    queue: str
    attempt: int
    error: dict[str, Any]


async def rescue(
    conn: psycopg.AsyncConnection[Any], schema: str, *, batch: int = RESCUE_BATCH,
    batches: int = RESCUE_BATCHES, expiries: int = LEASE_EXPIRIES,
) -> list[Rescued]:
    """Rescue expired leases, ``batch`` rows a statement, at most ``batches`` statements."""
    rescued: list[Rescued] = []
    for _ in range(batches):
        cur = await conn.execute(render(RESCUE_SQL, schema),
                                 {"batch": batch, "expiries": expiries})
        rows = [Rescued(int(r[0]), str(r[1]), str(r[2]), str(r[3]), int(r[4]), dict(r[5]))
                for r in await cur.fetchall()]
        rescued += rows
        if len(rows) < batch:
            break
    return rescued


class Rescuer(Chore):
    name = "rescue"

    def __init__(self, config: WorkerConfig, state: WorkerState, *, leading: asyncio.Event,
                 lifecycle: Lifecycle) -> None:
        super().__init__(config, state, leading=leading)
        self.lifecycle = lifecycle  # observers of rescued attempts (hooks)

    def every(self) -> float:
        return min(5.0, self.config.lease / 3)

    async def once(self) -> None:
        rescued = await self.db.run(lambda c: rescue(c, self.config.schema))
        if not rescued:
            return
        self.state.stats.rescued += len(rescued)
        log.warning("rescued %s whose lease expired: %s", plural(len(rescued), "job"),
                    ", ".join(f"{r.id}->{r.state}" for r in rescued[:20]))
        if self.lifecycle.on_rescued:
            self.lifecycle.rescued(rescued)
        # Rescued jobs are due at once: make them available now rather than at the next stage.
        self.state.stats.staged += await self.db.run(lambda c: stage(c, self.config.schema))
