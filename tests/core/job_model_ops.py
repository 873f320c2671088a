"""The product's own statements that the job model (test_job_model.py) drives, in one place.

Each method runs the lowest-level function of the product that sends the real SQL: the
producer's claim statement, the completer's settle, the heartbeater's renewal, the leader's
rescuer, stager and retention, and the operator API for what people do (cancel, requeue,
pause, resume), which writes the audit rows. When those functions move, only this module
changes.

The worker's functions are async: they run on one event loop this object owns, on one
autocommit connection; the operator API runs on a second, sync, autocommit connection, as a
script or the console would hold. The clock is moved by writing the rows the way the worker
tests do (a lease expiry or a due time put into the past), never by sleeping.

``settle_sql`` builds the same operations with a variant of the completion statements' text
(the test plants one without the fence predicate: the bug the model must be able to find); the
worker's own ``settle.write`` still runs, with that text in place of its own for the call.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar
from unittest import mock

import psycopg

from forklift._base.errors import ForkliftError
from forklift._db.sqltext import render
from forklift._jobs.insert import Row, insert_one_async
from forklift._worker import claim as claims
from forklift._worker import leases, settle
from forklift._worker.maintenance import rescuer, retention, stager
from forklift.ops import actions, queues
from forklift.ops.context import OpsContext

T = TypeVar("T")

#: Every job's own retry policy: a fixed hour without jitter, so a rescued attempt that counts
#: waits exactly an hour and the model knows it is not due until the clock moves.
RETRY = json.dumps({"kind": "fixed", "base": 3600.0, "max": 3600.0, "jitter": "none"})
#: Leases last an hour: they expire only when the model says so.
LEASE = 3600.0
#: How far the clock moves a waiting job's due time back: past RETRY and any enqueue delay.
DUE_SHIFT = "2 hours"



def unfenced(sql: str) -> str:
    """The completion statement without its fence predicate: any writer of a running job wins."""
    predicate = " t.fence = o.fence AND"
    assert predicate in sql, "the settle statement's fence predicate changed: update the plant"
    return sql.replace(predicate, "")


@dataclass(frozen=True)
class Claim:
    """What one claim returned: (id, fence, started) of each job in claim order, and the
    queues it reported paused."""

    jobs: list[tuple[int, int, bool]]
    paused: set[str]


@dataclass(frozen=True)
class Refused:
    """An operator action refused, with the error's stable code."""

    code: str


@dataclass(frozen=True)
class RowState:
    """The columns of a job row the model predicts."""

    id: int
    queue: str
    kind: str
    state: str
    attempt: int
    max_attempts: int
    fence: int | None
    worker_id: str | None
    lost: int
    errors: int
    cancel_requested: bool
    finished: bool
    started: bool
    expired: bool | None
    due: bool


# Every job's predicted columns and every audit row, in one round trip (it runs after each step).
@dataclass(frozen=True)
class Snapshot:
    """The jobs (by id) and the audit rows ((action, target, outcome), oldest first)."""

    jobs: dict[int, RowState]
    audit: list[tuple[str, dict[str, Any], str]]


_SNAPSHOT_SQL = """
SELECT (SELECT coalesce(json_agg(json_build_array(
            id, queue, kind, state, attempt, max_attempts, fence, worker_id, lost,
            jsonb_array_length(errors), cancel_requested_at IS NOT NULL, finished_at IS NOT NULL,
            attempted_at IS NOT NULL, lease_expires_at < now(), run_at <= now()) ORDER BY id),
            '[]') FROM {s}.jobs),
       (SELECT coalesce(json_agg(json_build_array(action, target, outcome) ORDER BY id), '[]')
        FROM {s}.audit)
"""
_ONE_ROW_SQL = "SELECT to_jsonb(t) FROM {s}.jobs t WHERE id = %s"
_ORDER_SQL = """
SELECT id, queue, kind FROM {s}.jobs WHERE state = 'available'
ORDER BY priority, run_at, id
"""
_EXPIRE_SQL = """
UPDATE {s}.jobs SET lease_expires_at = now() - interval '1 second'
WHERE worker_id = %s AND state = 'running'
"""
_DUE_SQL = ("UPDATE {s}.jobs SET run_at = run_at - interval '" + DUE_SHIFT + "'"
            " WHERE state IN ('scheduled', 'retryable')")
_AGE_SQL = """
UPDATE {s}.jobs SET finished_at = finished_at - make_interval(secs => %s)
WHERE state IN ('completed', 'cancelled', 'dead')
"""


class JobOps:
    """One database's worth of the product's operations, for one example of the model."""

    def __init__(self, dsn: str, schema: str = "forklift", *,
                 settle_sql: Callable[[str], str] | None = None) -> None:
        self.schema = schema
        self.settle_sql = settle_sql
        self.ctx = OpsContext(schema=schema, actor="model")
        self._runner = asyncio.Runner()
        self.aconn: psycopg.AsyncConnection[Any] = self._run(
            psycopg.AsyncConnection.connect(dsn, autocommit=True,
                                            application_name="forklift:model:worker"))
        self.conn = psycopg.connect(dsn, autocommit=True, application_name="forklift:model:ops")

    def close(self) -> None:
        try:
            self.conn.close()
            self._run(self.aconn.close())
        finally:
            self._runner.close()

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self._runner.run(coro)

    # -- producing ----------------------------------------------------------------------------
    def enqueue(self, queue: str, kind: str, *, priority: int, max_attempts: int, delayed: bool,
                unique_key: str | None) -> tuple[int, bool]:
        """Enqueue one job (``return_existing`` on a live key); returns (id, reused)."""
        row = Row(queue, kind, "{}", priority, max_attempts, None, 3600.0 if delayed else 0.0,
                  unique_key, [], "{}", RETRY)
        job = self._run(insert_one_async(self.aconn, self.schema, row))
        return job.id, job.reused

    # -- the worker ---------------------------------------------------------------------------
    def claim(self, worker: str, queues: list[str], kinds: list[str], n: int,
              start: int) -> Claim:
        """The producer's lock-free claim (its queues have no limit), as it sends it."""
        statement = claims.ClaimStatement((claims.kinds_clause(kinds),), worker_id=worker,
                                          queues=queues, lease=LEASE)
        answer = self._run(statement.run(self.aconn, self.schema, n=n, locked=False,
                                         start=start))
        assert not answer.limited and not answer.flow, answer
        return Claim([(j.id, j.fence, j.started) for j in answer.jobs], answer.paused)

    def heartbeat(self, held: dict[int, int]) -> dict[int, bool | None]:
        """Renew ``held`` (fence -> job id); fence -> cancel requested for those still held."""
        return self._run(leases.renew(self.aconn, self.schema, held, LEASE))

    def record_starts(self, starts: list[tuple[int, int]]) -> set[int]:
        """Record the start of buffered jobs ((id, fence)); returns the fences recorded."""
        return self._run(leases.record_starts(self.aconn, self.schema,
                                              [(i, f, 0.0) for i, f in starts]))

    def settle(self, outcomes: list[settle.Outcome]) -> dict[int, str]:
        """The completer's flush: fence -> state for each outcome the fence accepted."""
        with self._planted():
            return self._run(settle.write(self.aconn, self.schema, outcomes))

    @contextmanager
    def _planted(self) -> Iterator[None]:
        variant = self.settle_sql
        if variant is None:
            yield
            return
        with mock.patch.object(settle, "COMPLETE_SQL", variant(settle.COMPLETE_SQL)), \
                mock.patch.object(settle, "SETTLE_SQL", variant(settle.SETTLE_SQL)):
            yield

    # -- the leader ---------------------------------------------------------------------------
    def rescue(self) -> list[rescuer.Rescued]:
        return self._run(rescuer.rescue(self.aconn, self.schema))

    def stage(self) -> int:
        return self._run(stager.stage(self.aconn, self.schema))

    def prune(self) -> int:
        """The leader's retention chore: terminal rows past their state's window."""
        return self._run(retention.retention(self.aconn, self.schema))

    # -- the operator -------------------------------------------------------------------------
    def act(self, action: str, job_id: int) -> str | Refused:
        """``cancel`` or ``requeue`` one job; its outcome, or the refusal's code."""
        try:
            return actions.act(self.conn, self.ctx, action, job_id).outcome
        except ForkliftError as exc:
            return Refused(exc.code)

    def pause(self, queue: str) -> None:
        queues.pause(self.conn, self.ctx, queue, create=True)

    def resume(self, queue: str) -> Refused | None:
        try:
            queues.resume(self.conn, self.ctx, queue)
        except ForkliftError as exc:
            return Refused(exc.code)
        return None

    # -- the clock (rows written the way the worker tests simulate time) ----------------------
    def expire_leases(self, worker: str) -> None:
        """The running jobs of ``worker`` have leases that expired a second ago."""
        self.conn.execute(render(_EXPIRE_SQL, self.schema), (worker,))

    def make_waiting_due(self) -> None:
        self.conn.execute(render(_DUE_SQL, self.schema))

    def age_finished(self, seconds: float) -> None:
        self.conn.execute(render(_AGE_SQL, self.schema), (seconds,))

    # -- reading ------------------------------------------------------------------------------
    def snapshot(self) -> Snapshot:
        got = self.conn.execute(render(_SNAPSHOT_SQL, self.schema)).fetchone()
        assert got is not None
        return Snapshot({int(r[0]): RowState(*r) for r in got[0]},
                        [(str(a), dict(t), str(o)) for a, t, o in got[1]])

    def row(self, job_id: int) -> dict[str, Any] | None:
        """Every column of one job, for before/after comparisons."""
        got = self.conn.execute(render(_ONE_ROW_SQL, self.schema), (job_id,)).fetchone()
        return None if got is None else dict(got[0])

    def claim_order(self) -> list[tuple[int, str, str]]:
        """(id, queue, kind) of the available jobs, in the claim's order."""
        found = self.conn.execute(render(_ORDER_SQL, self.schema)).fetchall()
        return [(int(r[0]), str(r[1]), str(r[2])) for r in found]

