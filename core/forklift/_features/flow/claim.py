"""The flow claim: one statement that claims from queues with keys, rates or fair share.

Only queues flagged ``flow`` come here (the first keyed job, a rate or fair share flags one
for good); every other queue keeps the claim it had. Like the locked claim it runs in one
pipelined transaction (BEGIN, the generic-plan setting, the queue-limit locks, this statement,
COMMIT: one round trip), reads pauses and queue limits itself, and stamps fences and leases
with the worker's take.

Candidates, per (queue, kind) of the worker
    *window*: the first ``room`` waiting jobs in claim order (keyed or not, from the claim
    index); *rotation*: the heads (``share`` each) of the next ``visit`` partitions (distinct
    first key values) after the worker's cursor for the pair, wrapping around, from the keyed
    index (``jobs_keyed_idx``): found by a loose index scan, never by reading a partition's
    backlog. A partition blocked by its limit therefore never hides the free ones behind it.
    In a fair queue an unkeyed job that names a tenant is in the partition a first key named
    ``tenant`` would give it (``tenant`` chr(31) its tenant): the walk takes the least next
    value of both indexes, the second being ``jobs_tenant_fair_idx`` (migration 0024), which
    it never probes for a queue that is not fair. A job with neither key nor tenant is in no
    partition the walk visits: it comes in the window, in claim order.

Admission, under the key values' rows
    The running jobs of every limited key value among the candidates are counted in one pass
    over the running keyed jobs (``jobs_holders_idx``, migration 0016: bounded by the keys'
    limits, not by the plain jobs running or buffered across the fleet); a value already
    at its limit admits nothing (a count from this snapshot can only be too high: outcomes
    written since only free slots), and its row is not locked. Every other key value of a
    candidate whose key has a limit or a rate, and the bucket row of a rated queue, is locked
    ``FOR UPDATE SKIP LOCKED``: the claim sees the newest version, or passes the value by while
    another claim holds it (no claim ever waits on another). A value whose last admitting claim
    (``claim_xid``) is not visible to this statement's snapshot is passed by this time: the
    count could miss that claim's jobs. A rate's bucket is refilled by time arithmetic. A
    candidate is admitted when each of its values has room for it: its rank among the eligible
    candidates of that value, in claim order, is within the value's room (ranks, not a running
    tally: never more than the room, and the first eligible candidate is always admitted). A key
    that no worker has recorded yet (``flow_keys``) admits nothing: a missing row is never "no
    limit".

Weights (migration 0032)
    A job of weight N counts N everywhere a job counted one: in the worker's free slots
    (``start``), its queue's limit (the running jobs' weights), each key value's limit (the
    holders' weights, and the ranks above are sums of weights, not counts) and each bucket's
    tokens. At each of these a weight counts at most what that one holds (the worker's slots,
    ``cap``; the limit; the burst), so such a job runs alone there instead of never, and counts
    there as its running jobs are counted (a job heavier than a worker's slots still takes its
    whole weight of a key's or a queue's limit). Sums in claim order make a heavy job that does
    not fit hold back every job behind it at that gate: nothing takes the room it waits for.
    ``!need N`` tells the worker that the first job its free slots held back weighs N (its
    queue and gates having room for it): the worker keeps its slots for it
    (forklift._worker.producer). A weighted queue is strict, so its jobs start at once.

Order
    Claim order (priority, run_at, id), or with fair share each partition's first candidate
    before any partition's second, and so on: a tenant with a huge backlog delays another
    tenant's first job by at most one claim.

The worker's buffer
    A per-key limit counts claimed jobs, started or buffered, so keyed jobs may be claimed
    beyond the ``start`` that go to free slots now. Not *strict* ones: a job of a fair queue (a
    buffered backlog job would go before a tenant whose first job comes next), a rated one (its
    token is taken at the claim: it must start then), or one of a queue with a concurrency limit
    (its slot would sit in one worker's buffer while others idle, as for the other claims): those
    are admitted only among the first ``start``. ``!strict`` tells the worker it met one (a
    job of its kinds waits in such a queue, or a candidate has a rated key), so it keeps no
    buffer while it does. An empty fair, rated or limited queue does not count: it would cost
    the worker's other queues their buffer for a feature none of their jobs uses.

What else the answer carries (marker rows, ``id`` NULL)
    ``!paused`` per paused queue; ``!cursor`` per (queue, kind) walked, the cursor for the next
    claim (``args``: the kind and the last partition visited); ``!retry`` with the seconds until
    a blocked job may go (the next token of a bucket, or soon: a value or a picked job held by
    another claim, or a value just created, or the tokens a held-back heavy job needs), so the
    worker claims again then instead of waiting out its poll; ``!strict`` and ``!need`` (above).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import psycopg

from forklift._db.sqltext import render
from forklift._jobs import claimed as claims
from forklift._jobs.row import MAX_WEIGHT

VISIT = 32  # partitions a walk visits per claim, at least (as many as the batch asks for)
RETRY_SOON = 0.02  # seconds: a value held by another claim, or created just now

_OPEN = """(qs.name IS NULL OR NOT qs.paused
                   OR (qs.pause_expires_at IS NOT NULL AND qs.pause_expires_at <= now()))"""
_KEYED = """j.state = 'available' AND j.keys IS NOT NULL AND j.queue = p.queue
                    AND j.kind = p.kind"""
# A fair queue's unkeyed job with a tenant takes its turn in the partition a first key named
# ``tenant`` would give it; jobs_tenant_fair_idx (migration 0024) holds these jobs in that order.
TENANT_PART = "('tenant' || chr(31) || {a}tenant)"
_TP = TENANT_PART.format(a="j.")
_TENANTED = """j.state = 'available' AND j.keys IS NULL AND j.tenant IS NOT NULL
                    AND j.queue = p.queue AND j.kind = p.kind AND p.fair"""



def _marker(queue: str, what: str) -> str:
    """A marker row as wide as the take's rows: (NULL id, queue, what) and NULLs. ``what``
    goes in the kind column (text in every version of the take)."""
    width = claims.TAKE_SQL.rsplit("RETURNING", 1)[1].count(",") + 1
    return ", ".join(["NULL::bigint", queue, what] + ["NULL"] * (width - 3))


FLOW_CLAIM_SQL = """
WITH q AS (
    -- room: what the worker may take from the queue now; qroom: what its limit leaves (the
    -- weights of its running jobs counted, each at most the limit), NULL without a limit
    SELECT w.name, """ + _OPEN + """ AS open, coalesce(qs.fair, false) AS fair,
           qs.rate_limit, qs.rate_per, qs.rate_burst, coalesce(qs.strict, false) AS strict,
           qs.concurrency AS conc, b.qroom,
           CASE WHEN NOT """ + _OPEN + """ THEN 0
                WHEN NOT coalesce(qs.strict, false) THEN %(n)s
                ELSE greatest(0, least(%(n)s, %(start)s, coalesce(b.qroom, %(n)s)))
           END AS room
    FROM unnest(%(queues)s::text[]) AS w(name)
    LEFT JOIN {s}.queues qs ON qs.name = w.name
    CROSS JOIN LATERAL (
        SELECT (qs.concurrency - (
                   SELECT coalesce(sum(least(coalesce(r.weight, 1), qs.concurrency)), 0)
                   FROM {s}.jobs r
                   WHERE qs.concurrency IS NOT NULL AND r.state = 'running'
                     AND r.queue = w.name))::int AS qroom) b
), p AS (
    SELECT x.queue, x.kind, x.cur, q.room, q.fair
    FROM unnest(%(pq)s::text[], %(pk)s::text[], %(pc)s::text[])
        AS x(queue, kind, cur) JOIN q ON q.name = x.queue
    WHERE q.room > 0
), rot AS (
    -- the next partitions of each (queue, kind) after its cursor, wrapping around once: the
    -- least next first key value and, in a fair queue, the least next tenant of an unkeyed job
    -- (a probe of jobs_tenant_fair_idx that an unfair queue never starts)
    SELECT p.queue, p.kind, p.fair, r.key, r.n FROM p CROSS JOIN LATERAL (
        WITH RECURSIVE r(key, n, lap) AS (
            SELECT p.cur, 0, 0
          UNION ALL
            SELECT x.key, r.n + 1, x.lap FROM r CROSS JOIN LATERAL (
                (SELECT min(y.key) AS key, r.lap AS lap FROM (
                    (SELECT j.keys[1] AS key FROM {s}.jobs j
                     WHERE """ + _KEYED + """ AND j.keys[1] > r.key
                     ORDER BY j.keys[1] LIMIT 1)
                    UNION ALL
                    (SELECT """ + _TP + """ FROM {s}.jobs j
                     WHERE """ + _TENANTED + """ AND """ + _TP + """ > r.key
                     ORDER BY """ + _TP + """ LIMIT 1)
                 ) y HAVING min(y.key) IS NOT NULL)
                UNION ALL
                (SELECT min(y.key), 1 FROM (
                    (SELECT j.keys[1] AS key FROM {s}.jobs j
                     WHERE """ + _KEYED + """ AND r.lap = 0
                     ORDER BY j.keys[1] LIMIT 1)
                    UNION ALL
                    (SELECT """ + _TP + """ FROM {s}.jobs j
                     WHERE """ + _TENANTED + """ AND r.lap = 0
                     ORDER BY """ + _TP + """ LIMIT 1)
                 ) y HAVING min(y.key) IS NOT NULL)
                LIMIT 1
            ) x
            WHERE r.n < %(visit)s AND (x.lap = 0 OR x.key <= p.cur)
        )
        SELECT r.key, r.n FROM r WHERE r.n > 0
    ) r
), turns AS (
    -- a walk's share of the batch: the batch spread over the partitions it found
    SELECT rot.*, greatest(1, ceil(%(n)s::float8 / count(*) OVER (
               PARTITION BY rot.queue, rot.kind)))::int AS share
    FROM rot
), heads AS (
    SELECT h.* FROM turns rot CROSS JOIN LATERAL (
        (SELECT j.id, j.queue, j.keys, j.keys[1] AS part, j.priority, j.run_at, j.weight
         FROM {s}.jobs j
         WHERE j.state = 'available' AND j.keys IS NOT NULL AND j.queue = rot.queue
           AND j.kind = rot.kind AND j.keys[1] = rot.key
         ORDER BY j.priority, j.run_at, j.id
         LIMIT rot.share)
        UNION ALL
        (SELECT j.id, j.queue, j.keys, """ + _TP + """, j.priority, j.run_at, j.weight
         FROM {s}.jobs j
         WHERE j.state = 'available' AND j.keys IS NULL AND j.tenant IS NOT NULL
           AND j.queue = rot.queue AND j.kind = rot.kind AND rot.fair AND """ + _TP + """ = rot.key
         ORDER BY j.priority, j.run_at, j.id
         LIMIT rot.share)
    ) h
), win AS (
    SELECT j.* FROM p CROSS JOIN LATERAL (
        SELECT id, queue, keys, coalesce(keys[1], """ + TENANT_PART.format(a="") + """) AS part,
               priority, run_at, weight
        FROM {s}.jobs
        WHERE state = 'available' AND queue = p.queue AND kind = p.kind
        ORDER BY priority, run_at, id
        LIMIT p.room
    ) j
), cand AS (
    SELECT DISTINCT ON (u.id) u.id, u.queue, u.keys, u.part, u.priority, u.run_at, u.weight
    FROM (SELECT * FROM win UNION ALL SELECT * FROM heads) u
), names AS (
    SELECT f.name, f.concurrency, f.rate_limit, f.rate_per, f.rate_burst,
           f.concurrency IS NOT NULL OR f.rate_limit IS NOT NULL AS limiting
    FROM {s}.flow_keys f
    WHERE f.name = ANY (ARRAY(SELECT DISTINCT split_part(e, chr(31), 1)
                              FROM cand, unnest(cand.keys) AS e))
), need AS (
    -- the rows that serialise admission: values of limiting keys, buckets of rated queues
    SELECT DISTINCT e AS key FROM cand CROSS JOIN LATERAL unnest(cand.keys) AS e
    JOIN names ON names.name = split_part(e, chr(31), 1) AND names.limiting
    UNION
    SELECT '@' || q.name FROM q WHERE q.rate_limit IS NOT NULL AND q.room > 0
), held AS (
    -- the running jobs of each value, counted once for all values (one pass over the running
    -- keyed jobs that carry any of them, each by its weight): a value already at its limit in
    -- this snapshot admits nothing whatever its row says, so its row is not even locked
    SELECT e AS key, sum(coalesce(r.weight, 1)) AS n
    FROM {s}.jobs r CROSS JOIN LATERAL unnest(r.keys) AS e
    WHERE r.state = 'running' AND r.keys IS NOT NULL
      AND r.keys && ARRAY(SELECT need.key FROM need) AND e IN (SELECT need.key FROM need)
    GROUP BY e
), free AS (
    SELECT need.key, names.concurrency - coalesce(held.n, 0) AS room
    FROM need LEFT JOIN names ON names.name = split_part(need.key, chr(31), 1)
                             AND need.key NOT LIKE '@%%'
    LEFT JOIN held ON held.key = need.key
    WHERE names.concurrency IS NULL OR names.concurrency > coalesce(held.n, 0)
), kv AS (
    SELECT v.key, v.claim_xid, v.tokens, v.refilled_at FROM {s}.flow_values v
    WHERE v.key = ANY (ARRAY(SELECT free.key FROM free))
    ORDER BY v.key
    FOR UPDATE SKIP LOCKED
), heal AS (
    -- a value row pruned since its job was enqueued (or never made): made now, used next time
    INSERT INTO {s}.flow_values (key)
    SELECT need.key FROM need
    WHERE NOT EXISTS (SELECT 1 FROM {s}.flow_values v WHERE v.key = need.key)
    ON CONFLICT (key) DO NOTHING
    RETURNING key
), lim AS (
    -- room, in slots: what the limit leaves and the tokens the bucket holds (least() passes
    -- over the one a gate does not have); cap: the most a job's weight counts for at this gate
    -- (its limit, its bucket's burst)
    SELECT b.key, b.tokens_now, b.per_token, b.stale, b.cap,
           least(b.conc_room, CASE WHEN b.per_token IS NOT NULL
                                   THEN floor(b.tokens_now)::int END) AS room
    FROM (
        SELECT kv.key, g.per_token,
               greatest(1, least(g.concurrency, floor(g.burst)::int)) AS cap,
               least(g.burst, coalesce(kv.tokens, g.burst) + g.per_token_inv
                     * greatest(0, extract(epoch FROM now() - kv.refilled_at))) AS tokens_now,
               g.concurrency IS NOT NULL AND kv.claim_xid IS NOT NULL
                   AND NOT pg_visible_in_snapshot(kv.claim_xid, pg_current_snapshot()) AS stale,
               CASE WHEN g.concurrency IS NULL THEN NULL
                    WHEN kv.claim_xid IS NOT NULL
                         AND NOT pg_visible_in_snapshot(kv.claim_xid, pg_current_snapshot())
                    THEN 0
                    ELSE greatest(0, free.room)::int
               END AS conc_room
        FROM kv JOIN free ON free.key = kv.key CROSS JOIN LATERAL (
            SELECT n.concurrency, n.rate_burst::float8 AS burst,
                   n.rate_per / n.rate_limit AS per_token, n.rate_limit / n.rate_per AS per_token_inv
            FROM names n WHERE n.name = split_part(kv.key, chr(31), 1) AND kv.key NOT LIKE '@%%'
            UNION ALL
            SELECT NULL, q.rate_burst::float8, q.rate_per / q.rate_limit, q.rate_limit / q.rate_per
            FROM q WHERE kv.key = '@' || q.name
        ) g
    ) b
), elig AS (
    -- every limiting value of the candidate has room, its keys are all recorded, and the
    -- bucket of a rated queue has a token
    SELECT c.*, q.fair, row_number() OVER (
               PARTITION BY c.queue, c.part ORDER BY c.priority, c.run_at, c.id) AS turn,
           -- its weight (wt), as the worker's slots count it (w) and its queue's limit (wq)
           coalesce(c.weight, 1) AS wt, least(coalesce(c.weight, 1), %(cap)s) AS w,
           greatest(1, least(coalesce(c.weight, 1), q.conc)) AS wq,
           coalesce(c.keys, '{}') || CASE WHEN q.rate_limit IS NOT NULL THEN ARRAY['@' || q.name]
                                            ELSE '{}'::text[] END AS gates,
           q.strict OR EXISTS (SELECT 1 FROM unnest(c.keys) AS e JOIN names
                               ON names.name = split_part(e, chr(31), 1)
                               WHERE names.rate_limit IS NOT NULL) AS strict
    FROM cand c JOIN q ON q.name = c.queue
    WHERE NOT EXISTS (
        SELECT 1 FROM unnest(c.keys) AS e LEFT JOIN names ON names.name = split_part(e, chr(31), 1)
        WHERE names.name IS NULL
           OR (names.limiting AND NOT EXISTS (SELECT 1 FROM lim WHERE lim.key = e AND lim.room >= 1)))
      AND (q.rate_limit IS NULL
           OR EXISTS (SELECT 1 FROM lim WHERE lim.key = '@' || q.name AND lim.room >= 1))
), ranks AS MATERIALIZED (  -- once, not once per candidate it is checked for
    -- a candidate's rank at a gate: the weights of the gate's candidates up to it in order (a
    -- job heavier than the room left is not admitted, and neither is any job behind it there)
    SELECT e.id, g AS key, least(e.wt, lim.cap) AS w, sum(least(e.wt, lim.cap)) OVER (
               PARTITION BY g ORDER BY CASE WHEN e.fair THEN e.turn ELSE 1 END, e.priority,
                                       e.run_at, e.id) AS rk
    FROM elig e CROSS JOIN unnest(e.gates) AS g JOIN lim ON lim.key = g
), a AS (
    -- the candidates every gate admits, with their places (by weight) in the queue's room and
    -- the worker's
    SELECT e.id, e.queue, e.keys, e.priority, e.run_at, e.strict, e.ord1, e.w, e.wt,
           sum(e.wq) OVER (PARTITION BY e.queue ORDER BY e.ord1, e.priority, e.run_at,
                           e.id) AS qn,
           sum(e.w) OVER (ORDER BY e.ord1, e.priority, e.run_at, e.id) AS pos
    FROM (SELECT elig.*, CASE WHEN elig.fair THEN elig.turn ELSE 1 END AS ord1
          FROM elig) e
    WHERE NOT EXISTS (SELECT 1 FROM ranks r JOIN lim ON lim.key = r.key
                      WHERE r.id = e.id AND r.rk > lim.room)
), picked AS (
    -- a strict candidate only within the first ``start`` slots (it starts now, never waits
    -- buffered) and its queue's limit; any other within its queue's share of the batch
    SELECT a.id, a.keys, a.ord1, a.priority, a.run_at, a.wt FROM a JOIN q ON q.name = a.queue
    WHERE CASE WHEN a.strict THEN a.pos <= %(start)s AND (q.qroom IS NULL OR a.qn <= q.qroom)
               ELSE a.qn <= q.room END
    ORDER BY a.ord1, a.priority, a.run_at, a.id
    LIMIT %(n)s
), c AS (
    -- checked again under the lock: still waiting, and still the key values it was admitted
    -- for (a replacing enqueue may have changed them since this statement's snapshot)
    SELECT j.id, j.queue, j.keys, j.priority, j.run_at FROM {s}.jobs j
    JOIN picked ON picked.id = j.id
    WHERE j.id = ANY (ARRAY(SELECT picked.id FROM picked)) AND j.state = 'available'
      AND j.keys IS NOT DISTINCT FROM picked.keys
    ORDER BY j.priority, j.run_at, j.id
    FOR UPDATE OF j SKIP LOCKED
), s AS (
    SELECT c.id FROM c JOIN picked USING (id)
    ORDER BY picked.ord1, picked.priority, picked.run_at, picked.id
    LIMIT %(start)s
), used AS (
    -- the tokens taken: a job's weight, at most the bucket's burst
    SELECT g AS key, sum(least(picked.wt, lim.cap)) AS n FROM c JOIN q ON q.name = c.queue
    JOIN picked USING (id)
    CROSS JOIN unnest(coalesce(c.keys, '{}') || CASE WHEN q.rate_limit IS NOT NULL
                      THEN ARRAY['@' || q.name] ELSE '{}'::text[] END) AS g
    JOIN lim ON lim.key = g
    GROUP BY g
), bump AS (
    UPDATE {s}.flow_values v SET claim_xid = pg_current_xact_id(),
        tokens = CASE WHEN lim.per_token IS NOT NULL THEN lim.tokens_now - used.n END,
        refilled_at = CASE WHEN lim.per_token IS NOT NULL
                           THEN greatest(coalesce(v.refilled_at, now()), now()) END
    FROM used JOIN lim ON lim.key = used.key
    WHERE v.key = used.key
    RETURNING v.key
), u AS (
""" + claims.TAKE_SQL + """
)
SELECT * FROM u
UNION ALL
SELECT """ + _marker("q.name", "'!paused'") + """ FROM q WHERE NOT q.open
UNION ALL
SELECT """ + _marker("z.queue", "'!cursor ' || json_build_array(z.kind, z.key)::text") + """
FROM (SELECT DISTINCT ON (rot.queue, rot.kind) rot.queue, rot.kind, rot.key FROM rot
      ORDER BY rot.queue, rot.kind, rot.n DESC) z
UNION ALL
SELECT """ + _marker("NULL::text", "'!retry ' || min(w.s)::text") + """ FROM (
    -- the next token due, or as many as the first job the bucket held back weighs
    SELECT (coalesce(h.w, 1) - lim.tokens_now + coalesce(used.n, 0)) * lim.per_token AS s
    FROM lim LEFT JOIN used ON used.key = lim.key
    LEFT JOIN LATERAL (SELECT r.w FROM ranks r WHERE r.key = lim.key AND r.rk > lim.room
                       ORDER BY r.rk LIMIT 1) h ON true
    WHERE lim.per_token IS NOT NULL AND lim.tokens_now - coalesce(used.n, 0) < coalesce(h.w, 1)
    UNION ALL SELECT %(soon)s FROM lim WHERE lim.stale
    UNION ALL SELECT %(soon)s FROM free WHERE free.key NOT IN (SELECT kv.key FROM kv)
    -- jobs picked but locked by another claim (two workers on one partition pick the same
    -- heads): the loser looks again soon, not after its poll
    UNION ALL SELECT %(soon)s WHERE (SELECT count(*) FROM picked) > (SELECT count(*) FROM c)
) w HAVING count(*) > 0
UNION ALL
SELECT """ + _marker("NULL::text", "'!need ' || x.w") + """ FROM (
    -- the first job the worker's free slots held back, its queue's limit and its gates having
    -- room for it: the worker keeps that many slots for it (forklift._worker.producer)
    SELECT a.w FROM a JOIN q ON q.name = a.queue
    WHERE a.strict AND a.w > 1 AND a.pos > %(start)s AND (q.qroom IS NULL OR a.qn <= q.qroom)
    ORDER BY a.pos LIMIT 1) x
UNION ALL
SELECT """ + _marker("NULL::text", "'!strict'") + """
WHERE EXISTS (SELECT 1 FROM q WHERE q.strict AND q.open AND EXISTS (
                  SELECT 1 FROM {s}.jobs j WHERE j.state = 'available' AND j.queue = q.name
                  AND j.kind = ANY (%(kinds)s::text[])))
   OR EXISTS (SELECT 1 FROM names WHERE names.rate_limit IS NOT NULL)
"""


# Planning the claim costs more than running it (each custom plan about as much CPU as a
# batch of 40 jobs), and the server keeps choosing custom plans for it; the generic plan of the
# prepared statement is the same plan (tests/worker/test_claim_plan.py checks it) without that cost.
# For the claim's transaction only.
GENERIC_SQL = "SET LOCAL plan_cache_mode = force_generic_plan"


@dataclass
class FlowAnswer:
    """What one flow claim returned: the jobs, paused queues, cursors, when to try again."""

    jobs: list[Any]
    paused: set[str]
    cursors: dict[tuple[str, str], str]
    retry_in: float | None
    #: a queue of the worker's, or a key met, is fair, rated, limited or weighted: no buffer
    #: for now
    strict: bool = False
    #: the weight of a job that waits for this many of the worker's slots to be free at once
    #: (the worker keeps them for it), or None
    need: int | None = None


@dataclass
class FlowClaim:
    """The flow claim of one worker: its flow queues and kinds, and its rotation cursors."""

    worker_id: str
    lease: float
    #: the worker's slots: the most a job's weight counts for (the worker gives its own)
    cap: int = MAX_WEIGHT
    queues: list[str] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)
    visit: int = VISIT
    retry_soon: float = RETRY_SOON
    cursors: dict[tuple[str, str], str] = field(default_factory=dict)

    def params(self, n: int, start: int | None) -> dict[str, Any]:
        pairs = [(q, k) for q in sorted(self.queues) for k in sorted(self.kinds)]
        return {
            "queues": sorted(self.queues), "kinds": sorted(self.kinds),
            "pq": [q for q, _ in pairs], "pk": [k for _, k in pairs],
            "pc": [self.cursors.get(pair, "") for pair in pairs],
            "n": n, "start": n if start is None else start, "visit": max(self.visit, n),
            "w": self.worker_id, "lease": self.lease,
            "soon": RETRY_SOON, "cap": self.cap,
        }

    async def run(self, conn: psycopg.AsyncConnection[Any], schema: str, *, n: int,
                  start: int | None = None) -> FlowAnswer:
        params = self.params(n, start)
        async with conn.pipeline(), conn.transaction():
            await conn.execute(GENERIC_SQL)
            await conn.execute(render(claims.LOCK_LIMITED_SQL, schema), (params["queues"],))
            cur = await conn.execute(render(FLOW_CLAIM_SQL, schema), params)
        rows = await cur.fetchall()
        answer = parse(rows)
        self.cursors.update(answer.cursors)
        return answer


def parse(rows: list[tuple[Any, ...]]) -> FlowAnswer:
    from_row = getattr(claims.Claimed, "from_row", None)
    jobs = [from_row(r) if from_row else claims.Claimed(*r) for r in rows if r[0] is not None]
    paused, cursors, retry, strict, need = set(), {}, None, False, None
    for r in rows:
        if r[0] is not None:
            continue
        what, _, data = str(r[2]).partition(" ")
        if what == "!paused":
            paused.add(str(r[1]))
        elif what == "!cursor":
            kind, key = json.loads(data)
            cursors[(str(r[1]), str(kind))] = str(key)
        elif what == "!retry" and data:
            retry = max(0.0, float(data))
        elif what == "!strict":
            strict = True
        elif what == "!need" and data:
            need = int(data)
    return FlowAnswer(jobs, paused, cursors, retry, strict, need)
