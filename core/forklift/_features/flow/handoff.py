"""The hand-off: a settled keyed job's slots pass to its key values' next job in the settle.

With per-key limits a key's slot frees only once its job's outcome is written, and a flow
claim sent after that write finds it free: one outcome write and one flow claim (the heavier
statement) per job of a key, in series. The hand-off folds the second into the first. When a
worker writes a batch of outcomes and some of them are of keyed jobs, the same statement claims
for each such job its key values' next waiting job, for this worker's buffer, fenced and leased
like every claimed job, and answers with both.

What passes, and why no limit can be exceeded
    A settled job's slots pass only to a job of the same queue and kind with the **same key
    values** (``keys`` equal), the next waiting one in claim order of its first value's
    partition (``jobs_keyed_idx``; the hand-off never skips a job of that value whose other
    values differ). Both rows change in one transaction: every snapshot sees the old holder
    running or the new one, never both and never neither, so every value's count of running
    jobs is what it was. A flow claim counts from a snapshot, and the hand-off leaves its count
    true: nothing here touches ``flow_values``, and no claim's arithmetic changes. Lowering a
    limit is honoured: a value whose running jobs (the settled ones among them) already number
    more than its limit passes nothing, so the count falls to the limit as jobs finish. Only
    such keys are counted: every claim admits within the limit it reads and a hand-off keeps
    each count, so a value can be above its limit only after the limit fell, which marks the
    key (``flow_keys.lowered_at``, migration 0017) until the leader finds every value within it
    (forklift._worker.maintenance.flow_recount). The count and the per-value gate it replaced
    were about a tenth of the statement's server time.

    Nothing passes in a queue that is paused, fair (a handed-off job would go before another
    partition's first), rated, limited as a whole, or weighted (``queues.strict``, migration
    0032: strict queues claim only for free slots,
    ``forklift._features.flow.claim``), nor for a key with a rate (a token is taken at each start) or a
    key no worker has recorded. The next job is locked ``FOR UPDATE SKIP LOCKED`` and checked
    again under the lock (still waiting, same values): a claim elsewhere that got there first
    wins, and the slot simply frees.

What it costs
    Nothing for jobs without keys, or for a worker without flow queues: the worker sends the
    plain settle statement (the hand-off is a separate statement, chosen per batch). A batch
    asks for at most ``budget`` jobs, what the worker's slots and buffer have room for. It runs
    on the outcome lanes' sessions, on a generic plan (forklift._db.connections; tests/worker/test_claim_plan.py
    checks that plan).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import psycopg

from forklift._db.sqltext import compact, render
from forklift._jobs import claimed as claims

_RETURNING = "RETURNING t.fence, t.state"

# {settle}: the settle statement (settle.SETTLE_SQL or COMPLETE_SQL) answering with each
# settled row's queue, kind and keys too. Parameters: the settle's own, and budget, kinds, w,
# lease.
_HANDOFF = """
WITH t AS (
{settle}
), g AS (
    -- the settled keyed jobs whose slots may pass on, by queue, kind and key values
    SELECT t.queue, t.kind, t.keys, count(*) AS m
    FROM t LEFT JOIN {s}.queues qs ON qs.name = t.queue
    WHERE t.keys IS NOT NULL AND t.kind = ANY (%(kinds)s::text[]) AND """ + claims.OPEN_SQL + """
      AND NOT coalesce(qs.strict, false)
    GROUP BY t.queue, t.kind, t.keys
), names AS (
    -- the settled jobs' key names that pass nothing: unrecorded or rated
    SELECT n.name FROM (SELECT DISTINCT split_part(e, chr(31), 1) AS name
                        FROM g CROSS JOIN LATERAL unnest(g.keys) AS e) n
    LEFT JOIN {s}.flow_keys f ON f.name = n.name
    WHERE f.name IS NULL OR f.rate_limit IS NOT NULL
), vals AS (
    -- the values whose holders are counted: those of keys whose limit fell since (lowered_at,
    -- migration 0017); for every other key no value can be above its limit
    SELECT DISTINCT e AS key FROM g CROSS JOIN LATERAL unnest(g.keys) AS e
    WHERE split_part(e, chr(31), 1) = ANY (ARRAY(
        SELECT f.name FROM {s}.flow_keys f WHERE f.lowered_at IS NOT NULL))
), held AS (
    -- each such value's running jobs in this statement's snapshot, the settled ones among them:
    -- read by the running keyed jobs' btree (jobs_holders_idx: never the fleet's plain running
    -- or buffered jobs), whose scans mark the entries of finished jobs dead for the next one
    SELECT e AS key, sum(coalesce(r.weight, 1)) AS n
    FROM {s}.jobs r CROSS JOIN LATERAL unnest(r.keys) AS e
    WHERE EXISTS (SELECT 1 FROM vals)  -- none: the scan is not even started
      AND r.state = 'running' AND r.keys IS NOT NULL
      AND r.keys && ARRAY(SELECT vals.key FROM vals)
      AND e = ANY (ARRAY(SELECT vals.key FROM vals))  -- a hashed array, not a join per row
    GROUP BY e
), bad AS (
    -- values over their limit (lowered since)
    SELECT held.key FROM held JOIN {s}.flow_keys f ON f.name = split_part(held.key, chr(31), 1)
    WHERE f.concurrency < held.n
), ok AS (
    SELECT g.* FROM g
    WHERE NOT g.keys && ARRAY(SELECT bad.key FROM bad)
      AND NOT EXISTS (SELECT 1 FROM unnest(g.keys) AS e
                      WHERE split_part(e, chr(31), 1) = ANY (ARRAY(SELECT names.name FROM names)))
), nxt AS (
    SELECT x.id, x.keys, x.priority, x.run_at FROM ok CROSS JOIN LATERAL (
        SELECT y.* FROM (
            SELECT h.*, bool_and(h.keys = ok.keys) OVER (
                       ORDER BY h.priority, h.run_at, h.id) AS same
            FROM (
                SELECT j.id, j.keys, j.priority, j.run_at FROM {s}.jobs j
                WHERE j.state = 'available' AND j.keys IS NOT NULL AND j.queue = ok.queue
                  AND j.kind = ok.kind AND j.keys[1] = ok.keys[1]
                ORDER BY j.priority, j.run_at, j.id
                LIMIT ok.m
            ) h
        ) y WHERE y.same
    ) x
    ORDER BY x.priority, x.run_at, x.id
    LIMIT %(budget)s
), c AS (
    -- by primary key, one row a pick (a scan of the claim index would read the backlog),
    -- and checked again under the lock: still waiting, still the same values
    SELECT j.id FROM nxt JOIN {s}.jobs j ON j.id = nxt.id
    WHERE j.state = 'available' AND j.keys = nxt.keys
    ORDER BY j.id
    FOR UPDATE OF j SKIP LOCKED
), s AS (
    SELECT NULL::bigint AS id WHERE false  -- none is stamped started: they go to the buffer
), u AS (
""" + claims.TAKE_SQL + """
)
SELECT * FROM u
UNION ALL
SELECT NULL::bigint, NULL::text, t.state, NULL::text, NULL::int, NULL::int, t.fence,
       NULL::text, NULL::text, NULL::bigint, NULL::int, NULL::timestamptz, NULL::boolean,
       NULL::text, NULL::float8, NULL::text, NULL::text, NULL::float8, NULL::int, NULL::int
FROM t
"""

_POSITIONAL = re.compile(r"%b")


@lru_cache(maxsize=16)
def statement(settle_sql: str, schema: str) -> str:
    """The hand-off around one settle statement: its positional ``%b`` parameters named
    ``p0``, ``p1``... so they travel with the hand-off's named ones; compacted, so psycopg
    keeps its conversion (about a tenth of a flow worker's samples went to parsing it again)."""
    assert settle_sql.count(_RETURNING) == 1, "the settle statement's answer changed"
    counter = iter(range(100))
    named = _POSITIONAL.sub(lambda _: f"%(p{next(counter)})b", settle_sql)
    named = named.replace(_RETURNING, _RETURNING + ", t.queue, t.kind, t.keys")
    return compact(render(_HANDOFF.replace("{settle}", named.strip()), schema))


@dataclass
class Handoff:
    """A worker's ask, with one batch of outcomes, for the next jobs of their keys."""

    worker_id: str
    lease: float
    kinds: list[str]
    budget: int
    #: what the statement claimed (filled by :func:`write`)
    jobs: list[claims.Claimed] = field(default_factory=list)

    def params(self, settle_params: tuple[Any, ...]) -> dict[str, Any]:
        named: dict[str, Any] = {f"p{i}": p for i, p in enumerate(settle_params)}
        named.update(budget=self.budget, kinds=self.kinds, w=self.worker_id, lease=self.lease)
        return named

    async def run(self, conn: psycopg.AsyncConnection[Any], schema: str, settle_sql: str,
                  settle_params: tuple[Any, ...]) -> dict[int, str]:
        """The hand-off around one batch's settle. It goes on a flow worker's outcome lanes,
        whose sessions plan it once (generic plans: forklift._db.connections)."""
        cur = await conn.execute(statement(settle_sql, schema), self.params(settle_params))
        return self.answer(await cur.fetchall())

    def answer(self, rows: list[tuple[Any, ...]]) -> dict[int, str]:
        """Keep the claimed jobs; return fence -> final state of the settled outcomes."""
        self.jobs = [claims.Claimed.from_row(r) for r in rows if r[0] is not None]
        return {r[6]: r[2] for r in rows if r[0] is None}
