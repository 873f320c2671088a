"""The runner of a paced backfill: one page per transaction, checkpointed, fenced.

See :mod:`forklift._features.backfill.backfill` for the declaration, the pacing and the failure rules.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from forklift._base.retry import Fail, Snooze
from forklift._base.scrub import error_entry
from forklift._db.connections import connect
from forklift._db.sqltext import render
from forklift._features.backfill.backfill import (
    POLL_EVERY,
    RUNNER_KIND,
    RUNNER_QUEUE,
    SLICE,
    SNOOZE_AFTER,
    Backfill,
    BackfillHost,
    TokenBucket,
    pace_add,
    takes,
)
from forklift._jobs import insert as _enq
from forklift._jobs.attempt import Attempt

__all__ = ["RunRef", "Runner", "ensure_runner"]

log = logging.getLogger("forklift.backfill")

STATUS_SQL = "SELECT name, state, rate, job_id, total FROM {s}.backfill_runs WHERE id = %s"
PAGE_START_SQL = """
SELECT state, job_id, cursor, pages_done, pace, extract(epoch FROM now())::float8
FROM {s}.backfill_runs WHERE id = %s
"""
# Fenced on the job that owns the run and the page count it read: a runner that lost its job,
# or raced another runner, commits nothing (its page's writes roll back with it). A pause that
# arrived mid-page lets that page land; a cancel does not.
CHECKPOINT_SQL = """
UPDATE {s}.backfill_runs SET
    cursor = CASE WHEN %(done)s THEN cursor ELSE %(cursor)s END,
    pages_done = pages_done + 1,
    items_done = items_done + %(items)s,
    pace = %(pace)s,
    state = CASE WHEN %(done)s THEN 'completed' ELSE state END,
    finished_at = CASE WHEN %(done)s THEN now() ELSE finished_at END,
    updated_at = now()
WHERE id = %(id)s AND job_id = %(job)s AND pages_done = %(pages)s
  AND state IN ('running', 'paused')
RETURNING state, rate, pages_done, items_done
"""
FAILURE_SQL = """
UPDATE {s}.backfill_runs SET
    last_error = %s, error_count = error_count + 1, updated_at = now(),
    state = CASE WHEN %s THEN 'failed' ELSE state END
WHERE id = %s AND job_id = %s AND state = 'running'
"""
TOTAL_SQL = "UPDATE {s}.backfill_runs SET total = %s WHERE id = %s AND total IS NULL"
HAND_OVER_SQL = """
UPDATE {s}.backfill_runs SET job_id = %s, updated_at = now()
WHERE id = %s AND job_id = %s AND state = 'running' RETURNING id
"""


class _Interrupted(Exception):
    """The attempt was asked to stop; the worker decides the outcome from the reason."""


class _Superseded(Exception):
    """The checkpoint's fence refused this page: roll it back."""


@dataclass
class _Status:
    name: str
    state: str
    rate: float
    job_id: int | None
    total: int | None


class Runner:
    def __init__(self, app: BackfillHost, ctx: Attempt, run_id: int) -> None:
        self.app, self.ctx, self.run_id = app, ctx, run_id
        self.schema = app.schema

    def run(self) -> dict[str, Any]:
        with connect(self.app.dsn, "backfill", self.ctx.worker_id) as conn:
            self.conn = conn
            status = self._status()
            if status is None:
                return {"stopped": "missing"}
            if not self._mine(status):
                return {"stopped": status.state}
            definition = self.app.backfills.get(status.name)
            if definition is None:
                self._record(None, f"this worker's app declares no backfill {status.name!r}", True)
                raise Fail("unknown_backfill", f"no backfill named {status.name!r} is declared")
            self.b = definition
            if status.total is None and definition.total is not None:
                self._estimate(definition)
            return self._loop(TokenBucket(status.rate, definition.clock))

    def _mine(self, status: _Status) -> bool:
        return status.state == "running" and status.job_id == self.ctx.job_id

    def _status(self) -> _Status | None:
        row = self.conn.execute(render(STATUS_SQL, self.schema), (self.run_id,)).fetchone()
        return _Status(*row) if row else None

    def _estimate(self, b: Backfill) -> None:
        assert b.total is not None
        try:
            value = b.total(self.conn) if takes(b.total, 1) else b.total()
            if value is not None:
                self.conn.execute(render(TOTAL_SQL, self.schema), (int(value), self.run_id))
        except Exception as exc:  # an estimate is a nicety; the run goes on without it
            log.warning("backfill %s: total estimate failed (%s)", b.name, type(exc).__name__)

    def _loop(self, bucket: TokenBucket) -> dict[str, Any]:
        began = self.b.clock.now()
        while True:
            stopped = self._await_token(bucket)
            if stopped is not None:
                return stopped
            try:
                state, rate, pages, items = self._page()
            except _Superseded:
                status = self._status()
                if status is None or not self._mine(status):
                    return {"stopped": status.state if status else "missing"}
                continue
            if state != "running":
                return {"stopped" if state != "completed" else "completed": state,
                        "pages": pages, "items": items}
            bucket.set_rate(rate)
            if self.ctx.attempt > 1:
                handed = self._hand_over()
                if handed is not None:
                    return {"handed_over": handed, "pages": pages, "items": items}
            if self.b.clock.now() - began >= SLICE:
                # Back when the next page is due: the new attempt's bucket starts full, so it
                # must not start early. A virtual clock spends the wait here, where it can.
                due = bucket.wait_time()
                if self.b.clock.virtual:
                    self.b.clock.sleep(due, self.ctx.cancelled)
                    due = 0.0
                raise Snooze(due)

    def _await_token(self, bucket: TokenBucket) -> dict[str, Any] | None:
        clock = self.b.clock
        polled = clock.now()
        while True:
            if self.ctx.is_cancelled():
                raise _Interrupted(self.ctx.cancel_reason or "cancelled")
            wait = bucket.wait_time()
            if wait <= 0:
                bucket.take()
                return None
            if not clock.virtual and wait > SNOOZE_AFTER:
                raise Snooze(wait)
            clock.sleep(min(wait, POLL_EVERY), self.ctx.cancelled)
            if clock.now() - polled >= POLL_EVERY:
                polled = clock.now()
                status = self._status()
                if status is None or not self._mine(status):
                    return {"stopped": status.state if status else "missing"}
                bucket.set_rate(status.rate)

    def _page(self) -> tuple[str, float, int, int]:
        b, conn = self.b, self.conn
        try:
            with conn.transaction():
                got = conn.execute(render(PAGE_START_SQL, self.schema), (self.run_id,)).fetchone()
                if got is None:
                    raise _Superseded()
                state, job_id, cursor, pages_done, pace, db_now = got
                if state != "running" or job_id != self.ctx.job_id:
                    raise _Superseded()
                if takes(b.read, 3):
                    items, next_cursor = b.read(cursor, b.page_size, conn)
                else:
                    items, next_cursor = b.read(cursor, b.page_size)
                batch = list(items)
                if batch:
                    b.process(batch, conn)
                row = conn.execute(render(CHECKPOINT_SQL, self.schema), {
                    "done": next_cursor is None,
                    "cursor": Jsonb(next_cursor),
                    "items": len(batch),
                    "pace": Jsonb(pace_add(list(pace or []), db_now, 1, len(batch))),
                    "id": self.run_id,
                    "job": self.ctx.job_id,
                    "pages": pages_done,
                }).fetchone()
                if row is None:
                    raise _Superseded()
                return str(row[0]), float(row[1]), int(row[2]), int(row[3])
        except (_Superseded, _Interrupted):
            raise
        except Exception as exc:
            final = isinstance(exc, Fail) or self.ctx.attempt >= self.ctx.max_attempts
            self._record(exc, None, final)
            raise

    def _record(self, exc: BaseException | None, message: str | None, final: bool) -> None:
        entry = error_entry(exc, code="error", attempt=self.ctx.attempt,
                            worker_id=self.ctx.worker_id, message=message)
        try:
            self.conn.execute(
                render(FAILURE_SQL, self.schema),
                (Jsonb(entry), final, self.run_id, self.ctx.job_id),
            )
        except psycopg.Error as db_exc:
            log.warning("backfill run %s: could not record its error (%s)", self.run_id, db_exc)

    def _hand_over(self) -> int | None:
        """Move the run to a fresh job, so the next page gets the whole retry budget."""
        try:
            with self.conn.transaction():
                job = _enq.insert_one(self.conn, self.schema, self.b.runner_row(self.run_id),
                                      "return_existing")
                moved = self.conn.execute(
                    render(HAND_OVER_SQL, self.schema), (job.id, self.run_id, self.ctx.job_id)
                ).fetchone()
                if moved is None:
                    raise _Superseded()
                return job.id
        except _Superseded:
            return None


@dataclass
class RunRef:
    run: int


def ensure_runner(app: BackfillHost) -> None:
    """Declare the kind that runs every backfill's pages, once per app."""
    if RUNNER_KIND in app.kinds:
        return

    def run_backfill(ctx: Attempt, ref: RunRef) -> dict[str, Any]:
        return Runner(app, ctx, ref.run).run()

    app.job(
        name=RUNNER_KIND, queue=RUNNER_QUEUE, max_attempts=5, failure_codes=["unknown_backfill"]
    )(run_backfill)
