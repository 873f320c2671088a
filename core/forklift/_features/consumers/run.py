"""One run of a consumer: batch after batch, each in ONE transaction with the cursor it moves.

    BEGIN; SELECT cursor FROM consumers WHERE name = mine FOR UPDATE;
    page = source.read(cursor, batch_size, conn); process(page.items, conn);
    UPDATE consumers SET cursor = page.cursor ... WHERE name = mine AND <this attempt holds its job>;
    COMMIT

``conn`` is that transaction's connection, so the work ``process`` does in the same database
commits with the cursor that covers it: a crash (SIGKILL included) before the commit rolls
both back and the next run reads the same batch again; after it, the batch is done and never
read again. Nothing is skipped and nothing applied twice. Work done elsewhere (an HTTP call,
another database) is at least once: a crash between it and the commit repeats that batch.

The row lock orders batches: should two runs ever overlap (the per-key limit of one prevents
it; a worker whose lease ran out is the case it guards), the second reads the cursor the first
committed. The cursor write is fenced on the attempt's lease, so a worker that lost its job
commits nothing.

A run ends when a read comes back empty (caught up) or the consumer is paused; after
``slice`` seconds of batches it snoozes (not an attempt) and continues where it stopped. A batch
that raises is rolled back, the consumer's failure streak grows, and the run retries after the
streak's back-off; the first batch that succeeds ends the streak.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from forklift._base.retry import JobControl, Retry, Snooze
from forklift._base.scrub import error_entry
from forklift._db.connections import connect
from forklift._db.sqltext import render
from forklift._features.consumers.consumer import Consumer
from forklift._features.consumers.source import page_of
from forklift._jobs.attempt import Attempt

__all__ = ["Runner"]

log = logging.getLogger("forklift.consumers")

BATCH_START_SQL = "SELECT cursor, paused FROM {s}.consumers WHERE name = %s FOR UPDATE"
# Fenced on the attempt's lease: a worker whose job was taken from it moves nothing.
CHECKPOINT_SQL = """
UPDATE {s}.consumers SET
    cursor = %(cursor)s,
    cursor_at = CASE WHEN cursor IS DISTINCT FROM %(cursor)s THEN now() ELSE cursor_at END,
    items_done = items_done + %(items)s,
    batches_done = batches_done + CASE WHEN %(items)s > 0 THEN 1 ELSE 0 END,
    read_at = now(),
    caught_up_at = CASE WHEN %(items)s = 0 THEN now() ELSE caught_up_at END,
    job_id = %(job)s, failures = 0, retry_at = NULL, updated_at = now()
WHERE name = %(name)s
  AND EXISTS (SELECT 1 FROM {s}.jobs
              WHERE id = %(job)s AND fence = %(fence)s AND state = 'running')
RETURNING items_done
"""
FAILURE_SQL = """
UPDATE {s}.consumers SET failures = failures + 1, last_error = %s, failed_at = now(),
    job_id = %s, updated_at = now()
WHERE name = %s RETURNING failures
"""
RETRY_AT_SQL = """
UPDATE {s}.consumers SET retry_at = failed_at + make_interval(secs => %s) WHERE name = %s
"""


class Interrupted(Exception):
    """The attempt was told to stop between batches; the worker decides the outcome."""


class _Superseded(Exception):
    """The attempt no longer holds its job: roll the batch back."""


class Runner:
    def __init__(self, consumer: Consumer, ctx: Attempt) -> None:
        self.consumer, self.ctx = consumer, ctx
        self.schema = consumer.app.schema
        self.batches = 0
        self.items = 0

    def run(self) -> dict[str, Any]:
        c = self.consumer
        with connect(c.app.dsn, "consumer", self.ctx.worker_id) as conn:
            began = time.monotonic()
            with conn.transaction():
                c.define(conn)
            while True:
                if self.ctx.is_cancelled():
                    raise Interrupted(self.ctx.cancel_reason or "cancelled")
                try:
                    stopped = self._batch(conn)
                except _Superseded:
                    return self._result("superseded")
                except JobControl:
                    raise  # the process asked for a retry, a snooze or a failure itself
                except Exception as exc:
                    self._failed(conn, exc)
                if stopped is not None:
                    return self._result(stopped)
                if time.monotonic() - began >= c.slice:
                    raise Snooze(0)  # the slot goes back; the run goes on, its key still held

    def _result(self, stopped: str) -> dict[str, Any]:
        return {"stopped": stopped, "batches": self.batches, "items": self.items}

    def _batch(self, conn: psycopg.Connection[Any]) -> str | None:
        """One batch; why the run stops (``caught_up``, ``paused``) or None to go on."""
        c = self.consumer
        with conn.transaction():
            row = conn.execute(render(BATCH_START_SQL, self.schema), (c.name,)).fetchone()
            if row is None:
                raise _Superseded()
            cursor, paused = row
            if paused:
                return "paused"
            page = page_of(c.source.read(cursor, c.batch_size, conn), c.source)
            items = list(page.items)
            if items:
                c.process(items, conn)
            done = conn.execute(render(CHECKPOINT_SQL, self.schema), {
                "cursor": Jsonb(page.cursor), "items": len(items), "job": self.ctx.job_id,
                "fence": self.ctx.fence, "name": c.name,
            }).fetchone()
            if done is None:
                raise _Superseded()
        if not items:
            return "caught_up"
        self.batches += 1
        self.items += len(items)
        return None

    def _failed(self, conn: psycopg.Connection[Any], exc: Exception) -> None:
        """Record the failure on the consumer's row and retry after the streak's back-off."""
        c = self.consumer
        entry = error_entry(exc, code="error", attempt=self.ctx.attempt,
                            worker_id=self.ctx.worker_id)
        delay = c.retry.delay(self.ctx.attempt)
        try:
            got = conn.execute(render(FAILURE_SQL, self.schema),
                               (Jsonb(entry), self.ctx.job_id, c.name)).fetchone()
            if got is not None:
                delay = c.retry.delay(int(got[0]))
                conn.execute(render(RETRY_AT_SQL, self.schema), (delay, c.name))
        except psycopg.Error as db_exc:
            log.warning("consumer %s: could not record its failure (%s)", c.name, db_exc)
        message = entry.get("message")
        raise Retry(delay, reason=f"{entry.get('type')}: {message}" if message else None) from exc
