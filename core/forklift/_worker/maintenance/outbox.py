"""The outbox relay: the leader hands each topic's messages, in id order, to the topic's sink.

One pass claims, for every topic with a sink in this app, the head of the topic and the messages
behind it (up to :data:`PER_TOPIC`), provided the head is due (not backing off) and no other
relay holds the topic; the claim expires after a lease, so a relay that dies (or a leader that
lost the role mid-pass) only delays its topics. Topics are delivered side by side, each one
message after the other:

- a kind sink: the claimed messages become jobs in one transaction with their delivery marks;
- a callable: called per message, the mark written after it returns (at least once: a relay
  killed in between delivers that message again, and nothing after it was marked first).

A failed delivery puts the topic's head back with the sink's backoff (or ``dead`` after its last
attempt) and releases the rest of the topic for a later pass, so order holds. Every mark and
failure is fenced on the claim (``claimed_by``): a relay whose claim was taken over writes
nothing.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import psycopg

from forklift._base.errors import EnqueueRefused
from forklift._base.scrub import error_entry
from forklift._db.session import TRANSIENT
from forklift._db.sqltext import render
from forklift._features.durable.outbox import Message, Sink
from forklift._worker.maintenance.chore import Chore
from forklift._worker.util import why

if TYPE_CHECKING:
    from forklift._app.app import Forklift
    from forklift._worker.config import WorkerConfig
    from forklift._worker.state import WorkerState

log = logging.getLogger("forklift.worker")

PER_TOPIC = 100

CLAIM_SQL = """
WITH heads AS (
    SELECT t.topic, h.id, h.next_at, h.claimed_by, h.claimed_until
    FROM unnest(%(topics)s::text[]) AS t(topic)
    CROSS JOIN LATERAL (
        SELECT o.id, o.next_at, o.claimed_by, o.claimed_until FROM {s}.outbox o
        WHERE o.state = 'pending' AND o.topic = t.topic ORDER BY o.id LIMIT 1 FOR UPDATE
    ) h
), ready AS (
    SELECT topic, id FROM heads
    WHERE next_at <= now()
      AND (claimed_by IS NULL OR claimed_by = %(me)s OR claimed_until < now())
), picked AS (
    SELECT m.id FROM ready r CROSS JOIN LATERAL (
        SELECT o.id FROM {s}.outbox o
        WHERE o.state = 'pending' AND o.topic = r.topic AND o.id >= r.id
        ORDER BY o.id LIMIT %(per)s
    ) m
)
UPDATE {s}.outbox AS o SET claimed_by = %(me)s,
    claimed_until = now() + make_interval(secs => %(lease)s)
WHERE o.id = ANY (ARRAY(SELECT id FROM picked)) AND o.state = 'pending'
RETURNING o.id, o.topic, o.payload, o.attempts, o.created_at
"""

# Delivered: marked, and the claim on the rest of its topic renewed (a long topic outlives one
# lease).
DELIVERED_SQL = """
WITH done AS (
    UPDATE {s}.outbox AS o SET state = 'delivered', delivered_at = now(),
        attempts = o.attempts + 1, claimed_by = NULL, claimed_until = NULL, job_id = u.job
    FROM unnest(%(ids)s::bigint[], %(jobs)s::bigint[]) AS u(id, job)
    WHERE o.id = u.id AND o.state = 'pending' AND o.claimed_by = %(me)s
    RETURNING o.id, o.topic
), held AS (
    UPDATE {s}.outbox AS o SET claimed_until = now() + make_interval(secs => %(lease)s)
    WHERE o.topic = %(topic)s AND o.state = 'pending' AND o.claimed_by = %(me)s
      AND o.id NOT IN (SELECT id FROM done)
    RETURNING 1
)
SELECT count(*) FROM done
"""

# A failed delivery: attempt counted, the head backs off (or goes dead), the topic released.
FAILED_SQL = """
WITH f AS (
    UPDATE {s}.outbox SET attempts = attempts + 1,
        state = CASE WHEN %(dead)s OR attempts + 1 >= %(max)s THEN 'dead' ELSE 'pending' END,
        next_at = now() + make_interval(secs => %(delay)s),
        last_error = %(error)s::jsonb, claimed_by = NULL, claimed_until = NULL
    WHERE id = %(id)s AND state = 'pending' AND claimed_by = %(me)s
    RETURNING topic, state
), released AS (
    UPDATE {s}.outbox AS o SET claimed_by = NULL, claimed_until = NULL
    WHERE %(release)s AND o.topic = %(topic)s AND o.state = 'pending'
      AND o.claimed_by = %(me)s AND o.id <> %(id)s
    RETURNING 1
)
SELECT state FROM f
"""


class QueueFullWait(Exception):
    """The sink's queue is full (past its ceiling): the jobs are rolled back and the messages
    stay pending, relayed at a later pass (backpressure never drops an outbox message)."""


class Taken(Exception):
    """Another relay holds the claim now: this one stops delivering the topic."""


class OutboxRelay(Chore):
    name = "outbox"

    def __init__(self, config: WorkerConfig, state: WorkerState, *, leading: asyncio.Event,
                 app: Forklift) -> None:
        super().__init__(config, state, leading=leading)
        self.app = app  # its outbox's sinks
        self.delivered = 0

    def every(self) -> float:
        return min(self.config.leader_interval, 0.5)

    @property
    def sinks(self) -> dict[str, Sink]:
        outbox = getattr(self.app, "_outbox", None)
        return outbox.sinks if outbox is not None else {}

    async def once(self) -> None:
        sinks = self.sinks
        if not sinks:
            return  # an app without sinks relays nothing (and opens no session)
        params = {"topics": sorted(sinks), "me": self.state.id, "per": PER_TOPIC, "lease": self.config.lease}
        rows = await self.db.run(lambda c: _fetch(c, render(CLAIM_SQL, self.config.schema), params))
        topics: dict[str, list[Message]] = {}
        for r in rows:
            topics.setdefault(r[1], []).append(Message(r[0], r[1], r[2], r[3] + 1, r[4]))
        await asyncio.gather(*(self._topic(sinks[t], sorted(ms, key=lambda m: m.id))
                               for t, ms in topics.items()))

    async def _topic(self, sink: Sink, messages: list[Message]) -> None:
        try:
            if sink.kind is not None:
                await self._to_kind(sink, messages)
            else:
                for m in messages:
                    await self._to_callable(sink, m)
        except Taken:
            log.warning("outbox topic %s: another relay took it over; stopping here", sink.topic)
        except _Failed:
            pass  # recorded; the topic waits for its head's next try

    # -- callables --------------------------------------------------------------------------
    async def _to_callable(self, sink: Sink, m: Message) -> None:
        assert sink.fn is not None
        try:
            async with asyncio.timeout(sink.timeout):
                if inspect.iscoroutinefunction(sink.fn):
                    await sink.fn(m)
                else:
                    got = await asyncio.to_thread(sink.fn, m)
                    if inspect.isawaitable(got):
                        await got
        except Exception as exc:
            await self._failed(sink, m, exc, "delivery_failed")
        await self._mark(sink, [m], [None])

    # -- kinds ------------------------------------------------------------------------------
    async def _to_kind(self, sink: Sink, messages: list[Message]) -> None:
        assert sink.kind is not None
        kind = sink.kind
        batch: list[Message] = []
        rows = []
        for m in messages:
            try:
                rows.append(kind.row(m.payload, meta={"outbox": {"id": m.id, "topic": m.topic}}))
            except EnqueueRefused as exc:
                await self._enqueue(sink, batch, rows)
                batch, rows = [], []
                await self._failed(sink, m, exc, exc.code, dead=True, go_on=True)
                continue
            batch.append(m)
        await self._enqueue(sink, batch, rows)

    async def _enqueue(self, sink: Sink, batch: list[Message], rows: list[Any]) -> None:
        if not batch:
            return
        app = self.app

        async def op(conn: psycopg.AsyncConnection[Any]) -> int:
            async with conn.transaction():
                ids = await app.enqueue_rows_async(rows, conn=conn, on_full="raise")
                if len(ids) != len(rows):
                    raise QueueFullWait  # rolls back the jobs of the batch that were taken
                n = await _count(conn, render(DELIVERED_SQL, self.config.schema), self._marks(sink, batch, ids))
                if n != len(batch):
                    raise Taken  # rolls the jobs back with it
            return n

        try:
            self.delivered += await self.db.run(op)
        except QueueFullWait:
            log.info("outbox: the queue of %s is full; %d messages wait for room", sink.topic,
                     len(batch))
        except Taken:
            raise
        except Exception as exc:
            if isinstance(exc, TRANSIENT):
                raise
            await self._failed(sink, batch[0], exc, "delivery_failed")

    # -- marks ------------------------------------------------------------------------------
    def _marks(self, sink: Sink, ms: Iterable[Message], jobs: Iterable[int | None]
               ) -> dict[str, Any]:
        return {"ids": [m.id for m in ms], "jobs": list(jobs), "me": self.state.id,
                "lease": self.config.lease, "topic": sink.topic}

    async def _mark(self, sink: Sink, ms: list[Message], jobs: list[int | None]) -> None:
        sql = render(DELIVERED_SQL, self.config.schema)
        params = self._marks(sink, ms, jobs)
        n = await self.db.run(lambda c: _count(c, sql, params))
        if n != len(ms):
            raise Taken
        self.delivered += n

    async def _failed(self, sink: Sink, m: Message, exc: BaseException, code: str, *,
                      dead: bool = False, go_on: bool = False) -> None:
        entry = error_entry(exc, code=code, attempt=m.attempt, worker_id=self.state.id)
        delay = sink.retry.delay(m.attempt)
        params = {"id": m.id, "me": self.state.id, "dead": dead, "max": sink.max_attempts,
                  "delay": delay, "error": json.dumps(entry, default=str), "topic": sink.topic,
                  "release": not go_on}
        sql = render(FAILED_SQL, self.config.schema)
        rows = await self.db.run(lambda c: _fetch(c, sql, params))
        if not rows:
            raise Taken
        state = rows[0][0]
        log.warning("outbox message %s (%s) to %s failed on attempt %d (%s)%s", m.id, sink.topic,
                    sink.target, m.attempt, why(exc),
                    ": dead" if state == "dead" else f"; next try in {delay:.1f}s")
        if not go_on:
            raise _Failed


class _Failed(Exception):
    """The topic's head failed (recorded): deliver nothing more of it this pass."""


async def _fetch(conn: psycopg.AsyncConnection[Any], sql: str, params: Any) -> list[Any]:
    cur = await conn.execute(sql, params)
    return await cur.fetchall()


async def _count(conn: psycopg.AsyncConnection[Any], sql: str, params: Any) -> int:
    cur = await conn.execute(sql, params)
    row = await cur.fetchone()
    return int(row[0]) if row else 0
