"""What handlers do to a job, end to end in a worker subprocess: retry classification, per-kind
timeouts (async cancelled; sync told, slot kept), and error text that never carries a secret."""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
import pytest
from apps import faults
from apps.faults import all_in, registered
from helpers import wait_until

from forklift import Worker
from forklift._db.session import Session
from forklift._worker import settle
from forklift._worker.claim import Claimed

pytestmark = pytest.mark.slow
db, procs = faults.db, faults.procs  # fixtures


def test_a_canary_secret_raised_by_handlers_reaches_no_table(
    db: psycopg.Connection[Any], procs: faults.Procs
) -> None:
    a = procs.start(concurrency=4, lease=5.0)
    registered(db, a)
    hows = ["url", "pairs", "bearer", "fail", "retry", "result"]
    ids = {h: faults.enqueue(db, "faults.leaky", {"how": h}) for h in hows}
    codes_only = {h: faults.enqueue(db, "faults.leaky_codes", {"how": h}) for h in ("fail", "x")}
    every = [*ids.values(), *codes_only.values()]
    wait_until(lambda: all_in(db, every, "dead"), timeout=30,
               message=lambda: f"not all dead: {faults.states(db, every)}")
    assert a.stop() == 0

    codes = {h: [e["code"] for e in faults.job(db, i)["errors"]] for h, i in ids.items()}
    assert codes == {"url": ["error"], "pairs": ["error"], "bearer": ["error"],
                     "fail": ["upstream_down"], "retry": ["error"], "result": ["invalid_result"]}
    for h in ("url", "pairs", "bearer", "fail", "retry"):  # scrubbed where it was written
        entry = faults.job(db, ids[h])["errors"][0]
        assert "***" in entry["message"], (h, entry["message"])
    tb = faults.job(db, ids["url"])["errors"][0]["traceback"]
    assert tb and tb[-1]["func"] == "leaky" and set(tb[-1]) == {"file", "line", "func"}
    for i in codes_only.values():
        entry = faults.job(db, i)["errors"][0]
        assert "message" not in entry and "traceback" not in entry, entry
    assert [e["code"] for e in faults.job(db, codes_only["fail"])["errors"]] == ["no_luck"]

    # Every table of the database, every row, as text.
    tables = db.execute(
        "SELECT quote_ident(table_schema) || '.' || quote_ident(table_name)"
        " FROM information_schema.tables WHERE table_type = 'BASE TABLE'"
        " AND table_schema NOT IN ('pg_catalog', 'information_schema')"
    ).fetchall()
    assert len(tables) >= 5
    for (table,) in tables:
        leaked = db.execute(
            f"SELECT count(*) FROM {table} t WHERE t::text LIKE %s",
            (f"%{faults.CANARY}%",),
        ).fetchone()
        assert leaked == (0,), f"the canary is in {table}"
    assert faults.CANARY not in a.log()


def _delay(job: dict[str, Any]) -> float:
    return float((job["run_at"] - job["attempted_at"]).total_seconds())


def test_retry_snooze_fail_and_errors_are_classified(
    db: psycopg.Connection[Any], procs: faults.Procs
) -> None:
    a = procs.start(concurrency=8, lease=5.0)
    registered(db, a)
    jobs = {
        "retry": faults.enqueue(db, "faults.verdict", {"do": "retry", "after": 120}),
        "retry_clamped": faults.enqueue(db, "faults.verdict", {"do": "retry", "after": 10**6}),
        "snooze": faults.enqueue(db, "faults.verdict", {"do": "snooze", "after": 300}),
        "declined": faults.enqueue(db, "faults.verdict", {"do": "fail", "code": "card_declined"}),
        "undeclared": faults.enqueue(db, "faults.verdict", {"do": "fail", "code": "nope"}),
        "raise": faults.enqueue(db, "faults.verdict", {"do": "raise"}),
        "last_try": faults.enqueue(db, "faults.verdict", {"do": "raise"}, max_attempts=1),
    }
    ids = list(jobs.values())
    wait_until(lambda: all_in(db, ids, "retryable", "scheduled", "dead"), timeout=30,
               message=lambda: f"not classified: {faults.states(db, ids)}")
    assert a.stop() == 0
    got = {name: faults.job(db, i) for name, i in jobs.items()}

    retry = got["retry"]  # a retry at the named time is still an attempt
    assert (retry["state"], retry["attempt"]) == ("retryable", 1)
    assert [e["code"] for e in retry["errors"]] == ["error"]
    assert 120 <= _delay(retry) < 150
    assert 900 <= _delay(got["retry_clamped"]) < 930  # clamped by the backoff's max

    snooze = got["snooze"]  # not an attempt, no error
    assert (snooze["state"], snooze["attempt"], snooze["errors"]) == ("scheduled", 0, [])
    assert 300 <= _delay(snooze) < 330

    declined = got["declined"]  # terminal at once, the other attempts unspent
    assert (declined["state"], declined["attempt"], declined["max_attempts"]) == ("dead", 1, 3)
    assert [e["code"] for e in declined["errors"]] == ["card_declined"]
    assert [e["code"] for e in got["undeclared"]["errors"]] == ["internal_error"]
    assert "nope" in got["undeclared"]["errors"][0]["message"]

    raised = got["raise"]  # anything else: the kind's backoff (fixed 600 s, no jitter)
    assert (raised["state"], raised["attempt"]) == ("retryable", 1)
    assert raised["errors"][0]["type"] == "KeyError"
    assert 600 <= _delay(raised) < 630
    assert got["last_try"]["state"] == "dead"


def test_async_timeouts_cancel_the_handler(
    db: psycopg.Connection[Any], procs: faults.Procs
) -> None:
    a = procs.start(concurrency=2, lease=5.0)
    registered(db, a)
    job_id = faults.enqueue(db, "faults.slow_async", {})
    wait_until(lambda: all_in(db, [job_id], "dead"), timeout=30, message="did not time out")
    j = faults.job(db, job_id)
    assert [e["code"] for e in j["errors"]] == ["timeout"]
    assert "cancelled:timeout" in [w for _, _, w in faults.notes(db, job_id)]
    assert a.stop() == 0


def test_a_sync_handler_past_its_timeout_keeps_its_slot_until_it_returns(
    db: psycopg.Connection[Any], procs: faults.Procs
) -> None:
    a = procs.start(concurrency=1, lease=1.5)
    a_id = registered(db, a)
    slow = faults.enqueue(db, "faults.slow_sync", {"gate": "slow"})
    wait_until(lambda: "saw-cancel:timeout" in [w for _, _, w in faults.notes(db, slow)],
               timeout=30, message="the handler was not told about its timeout")
    waiting = faults.enqueue(db, "faults.quick", {})
    created = faults.job(db, waiting)["created_at"]
    # A heartbeat after that enqueue still reports the one slot busy, and the job waits.
    wait_until(lambda: db.execute(
        "SELECT 1 FROM forklift.workers WHERE id = %s AND heartbeat_at > %s AND in_use = 1",
        (a_id, created)).fetchone(), timeout=30, message="no heartbeat after the enqueue")
    assert faults.job(db, waiting)["state"] == "available"
    assert faults.job(db, slow)["state"] == "running"  # its lease is still renewed

    faults.open_gate(db, "slow")
    wait_until(lambda: all_in(db, [waiting], "completed"), timeout=30, message="slot not freed")
    j = faults.job(db, slow)
    assert j["state"] == "dead" and [e["code"] for e in j["errors"]] == ["timeout"]
    assert a.stop() == 0


def test_an_outcome_the_server_refuses_does_not_hold_back_the_others(
    db: psycopg.Connection[Any], dsn: str
) -> None:
    # Two jobs running under fences a worker holds; one outcome carries text jsonb refuses.
    ids = [faults.enqueue(db, "faults.quick", {}) for _ in range(3)]
    rows = db.execute(
        "UPDATE forklift.jobs SET state = 'running', attempt = 1, worker_id = 'w',"
        " fence = nextval('forklift.fence_seq'), lease_expires_at = now() + interval '1 minute'"
        " WHERE id = ANY(%s) RETURNING id, fence", (ids,)).fetchall()
    fence = dict(rows)
    good, bad, late = ids
    batch = [
        settle.Outcome(good, fence[good], "retryable", delay=900),  # an int beside floats
        settle.Outcome(bad, fence[bad], "completed", result="{not json"),
        settle.Outcome(late, fence[late], "scheduled", delay=0.5, refund=1),
    ]

    async def flush() -> bool:
        worker = Worker(faults.app, worker_id="w")
        worker._settle_db = Session(dsn, "complete", "w", timeout=10)
        worker.completer.outcomes = list(batch)
        worker._held = {o.fence: o.job_id for o in batch}
        try:
            return await worker.completer.flush(deadline=None)
        finally:
            await worker._settle_db.close()

    assert asyncio.run(flush()) is True
    assert faults.job(db, good)["state"] == "retryable"
    assert faults.job(db, late)["state"] == "scheduled"
    j = faults.job(db, bad)
    assert j["state"] == "retryable" and j["result"] is None
    assert [e["code"] for e in j["errors"]] == ["internal_error"]


def _running(db: psycopg.Connection[Any], n: int, max_attempts: int) -> list[Claimed]:
    """n faults.quick jobs made running under fences of worker 'w' (attempt 1)."""
    ids = [faults.enqueue(db, "faults.quick", {}, max_attempts=max_attempts) for _ in range(n)]
    rows = db.execute(
        "UPDATE forklift.jobs SET state = 'running', attempt = 1, worker_id = 'w',"
        " attempted_at = now(), fence = nextval('forklift.fence_seq'),"
        " lease_expires_at = now() + interval '1 minute'"
        " WHERE id = ANY(%s) RETURNING id, fence, retry", (ids,)).fetchall()
    return sorted((Claimed(i, "default", "faults.quick", {}, 1, max_attempts, f, r, {}, None, 0)
                   for i, f, r in rows), key=lambda c: c.id)


class _Flaky(Session):
    """A real session whose ``fail_at``-th operation fails as a dropped connection would."""

    def __init__(self, dsn: str, fail_at: int) -> None:
        super().__init__(dsn, "complete", "w", timeout=10)
        self.calls, self.fail_at = 0, fail_at

    async def run(self, op: Any, *, timeout: float | None = None) -> Any:
        self.calls += 1
        if self.calls == self.fail_at:
            raise psycopg.OperationalError("injected: the connection dropped")
        return await super().run(op, timeout=timeout)


def _flush(dsn: str, batch: list[settle.Outcome], session: Session) -> Worker:
    async def go() -> Worker:
        worker = Worker(faults.app, worker_id="w")
        worker._settle_db = session
        worker.completer.outcomes = list(batch)
        worker._held = {o.fence: o.job_id for o in batch}
        try:
            assert await worker.completer.flush(deadline=None) is True
        finally:
            await session.close()
        return worker

    return asyncio.run(go())


def test_an_outcome_that_cannot_be_stored_is_an_ordinary_failed_attempt(
    db: psycopg.Connection[Any], dsn: str
) -> None:
    (last,) = _running(db, 1, max_attempts=1)
    (more,) = _running(db, 1, max_attempts=5)
    batch = [settle.Outcome(j.id, j.fence, "completed", result="{not json", job=j)
             for j in (last, more)]
    _flush(dsn, batch, Session(dsn, "complete", "w", timeout=10))
    dead, retry = faults.job(db, last.id), faults.job(db, more.id)
    assert (dead["state"], [e["code"] for e in dead["errors"]]) == ("dead", ["internal_error"])
    # Retried by the kind's backoff (default: at least half a second), not at a fixed second.
    assert retry["state"] == "retryable" and [e["code"] for e in retry["errors"]] == [
        "internal_error"]
    assert retry["attempt"] == 1


def test_a_dropped_connection_during_the_one_by_one_writes_resends_only_the_rest(
    db: psycopg.Connection[Any], dsn: str
) -> None:
    jobs = _running(db, 4, max_attempts=3)
    batch = [settle.Outcome(j.id, j.fence, "completed", result='{"ok": 1}', job=j) for j in jobs]
    batch[0].result = "{not json"  # the batch is refused: written one by one
    # Calls: 1 the batch (refused), 2 job 0 (refused), 3 its fallback, 4 job 1, 5 job 2: dropped.
    worker = _flush(dsn, batch, _Flaky(dsn, fail_at=5))
    assert worker.stats.stale_writes == 0  # nothing accepted was sent again
    states = [faults.job(db, j.id)["state"] for j in jobs]
    assert states == ["retryable", "completed", "completed", "completed"]
