"""Attempt logs at work: what a handler logs (ctx.log, and the logging records of a kind that
captures them) is stored with each attempt's outcome, capped, scrubbed, kept per attempt, never
mixed between jobs running side by side, and deleted once its job is gone. An attempt that
logs nothing writes nothing more."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from apps import joblogs
from apps.basic import running_worker
from helpers import wait_until

from forklift import ConfigError, Forklift, JobContext
from forklift._features import history
from forklift._jobs.attempt_log import AttemptLog
from forklift._worker import settle
from forklift._worker.maintenance import history as history_upkeep
from forklift._worker.maintenance.workflows import orphans
from forklift.ops import Operator

TERMINAL = ["completed", "dead", "cancelled"]


@pytest.fixture
def app(dsn: str) -> Iterator[Forklift]:
    joblogs.app.use(dsn)
    try:
        yield joblogs.app
    finally:
        joblogs.app.close()
        joblogs.MEET.reset()


def wait_done(conn: psycopg.Connection[Any], ids: list[int]) -> None:
    def done() -> bool:
        row = conn.execute("SELECT count(*) FROM forklift.jobs WHERE id = ANY(%s)"
                           " AND state = ANY(%s)", (ids, TERMINAL)).fetchone()
        return row is not None and row[0] == len(ids)

    wait_until(done, timeout=30, message=f"jobs {ids} finished")


def logs(conn: psycopg.Connection[Any], job_id: int) -> list[tuple[int, list[dict[str, Any]]]]:
    return [(r[0], r[1]) for r in conn.execute(
        "SELECT attempt, lines FROM forklift.job_logs WHERE job_id = %s ORDER BY id",
        (job_id,)).fetchall()]


def messages(lines: list[dict[str, Any]]) -> list[str]:
    return [line["message"] for line in lines]


def test_ctx_log_lines_are_stored_with_the_attempt(app: Forklift,
                                                   conn: psycopg.Connection[Any]) -> None:
    job = joblogs.plain.enqueue({"order": "A-1"})
    with running_worker(app, queues=["logs"]):
        wait_done(conn, [job.id])
    ((attempt, lines),) = logs(conn, job.id)
    assert attempt == 1
    # The kind did not opt in: its logging record stayed out of the attempt's log.
    assert messages(lines) == ["charging order", "charged"]
    assert [line["level"] for line in lines] == ["info", "warning"]
    assert lines[0]["fields"] == {"order": "A-1", "amount": 12.5}
    assert "logger" not in lines[0] and lines[0]["at"].endswith("+00:00")
    # In the transaction that settled the attempt.
    same = conn.execute("SELECT j.xmin::text = l.xmin::text FROM forklift.jobs j"
                        " JOIN forklift.job_logs l ON l.job_id = j.id WHERE j.id = %s",
                        (job.id,)).fetchone()
    assert same == (True,)


def test_captured_records_of_concurrent_jobs_never_mix(app: Forklift,
                                                        conn: psycopg.Connection[Any]) -> None:
    a = joblogs.captured.enqueue({"who": "ann"})
    b = joblogs.captured.enqueue({"who": "bob"})
    c = joblogs.async_captured.enqueue({"who": "cy"})
    with running_worker(app, queues=["logs"], concurrency=3):
        wait_done(conn, [a.id, b.id, c.id])
    for job, who in ((a, "ann"), (b, "bob")):
        ((_, lines),) = logs(conn, job.id)
        assert messages(lines) == [f"{who} begins", f"{who} before the meeting",
                                   f"{who} after the meeting"]
        assert [line.get("logger") for line in lines] == [None, "tests.joblogs",
                                                          "tests.joblogs"]
        assert [line["level"] for line in lines] == ["info", "info", "warning"]
    ((_, lines),) = logs(conn, c.id)
    assert messages(lines) == ["async cy", "async cy failed a row (ValueError: bad row)"]
    assert lines[1]["level"] == "error"


def test_every_attempt_keeps_its_own_log(app: Forklift, conn: psycopg.Connection[Any]) -> None:
    job = joblogs.flaky.enqueue({})
    with running_worker(app, queues=["logs"]):
        wait_done(conn, [job.id])
    assert [(attempt, messages(lines)) for attempt, lines in logs(conn, job.id)] == [
        (1, ["try 1"]), (2, ["try 2"])]


def test_caps_keep_the_first_lines_and_say_so(app: Forklift,
                                              conn: psycopg.Connection[Any]) -> None:
    lines_cap = joblogs.chatty.enqueue({"n": 20})
    bytes_cap = joblogs.wordy.enqueue({"n": 20})
    under = joblogs.chatty.enqueue({"n": 5})
    with running_worker(app, queues=["logs"]):
        wait_done(conn, [lines_cap.id, bytes_cap.id, under.id])
    ((_, lines),) = logs(conn, lines_cap.id)
    assert messages(lines)[:5] == [f"line {i}" for i in range(5)]
    assert lines[5]["message"] == ("log capped at 5 lines for this attempt: 15 later lines"
                                   " dropped")
    assert lines[5]["capped"] == {"lines": 5, "bytes": 64 * 1024, "dropped": 15}
    ((_, lines),) = logs(conn, bytes_cap.id)
    kept = len(lines) - 1
    assert 1 <= kept < 20
    assert lines[-1]["message"] == (f"log capped at 400 bytes for this attempt: {20 - kept}"
                                    " later lines dropped")
    ((_, lines),) = logs(conn, under.id)
    assert messages(lines) == [f"line {i}" for i in range(5)]  # exactly at the cap: no note


def test_lines_are_scrubbed_like_errors(app: Forklift, conn: psycopg.Connection[Any]) -> None:
    job = joblogs.secret.enqueue({})
    with running_worker(app, queues=["logs"]):
        wait_done(conn, [job.id])
    ((_, lines),) = logs(conn, job.id)
    stored = str(lines)
    for secret in ("hunter2", "tok-abcdef123456", "eyJhbGciOiJIUzI1NiJ9"):
        assert secret not in stored
    assert lines[0]["message"] == "connecting to postgresql://app:***@db.internal/orders"
    assert lines[0]["fields"] == {"api_token": "***", "user": "ada"}


def test_text_and_values_json_cannot_hold_are_stored_all_the_same(
    app: Forklift, conn: psycopg.Connection[Any]
) -> None:
    job = joblogs.odd.enqueue({})
    with running_worker(app, queues=["logs"]):
        wait_done(conn, [job.id])
    assert conn.execute("SELECT state FROM forklift.jobs WHERE id = %s",
                        (job.id,)).fetchone() == ("completed",)
    ((_, (line,)),) = logs(conn, job.id)
    assert line["message"] == "nul and a lone \\ud800 surrogate"
    fields = line["fields"]
    assert (fields["nan"], fields["ok"], fields["n"]) == ("nan", True, None)
    assert fields["obj"].startswith("<object object at")
    assert fields["nested"] == {"a": [1, 2], "password": "***"}


def test_a_timed_out_attempt_keeps_its_log(app: Forklift, conn: psycopg.Connection[Any]) -> None:
    job = joblogs.slow.enqueue({})
    with running_worker(app, queues=["logs"]):
        wait_done(conn, [job.id])
    ((_, lines),) = logs(conn, job.id)
    assert messages(lines) == ["starting a long wait", "told to stop"]
    row = conn.execute("SELECT state, errors -> -1 ->> 'code' FROM forklift.jobs WHERE id = %s",
                       (job.id,)).fetchone()
    assert row == ("dead", "timeout")


def test_jobs_that_log_nothing_write_no_log(app: Forklift, conn: psycopg.Connection[Any]) -> None:
    ids = joblogs.silent.enqueue_many([{"i": i} for i in range(200)])
    with running_worker(app, queues=["logs"], concurrency=10):
        wait_done(conn, ids)
    assert conn.execute("SELECT count(*) FROM forklift.job_logs").fetchone() == (0,)
    try:  # where the server has pg_stat_statements: not one log statement was even sent
        sent = conn.execute(
            "SELECT coalesce(sum(calls), 0) FROM pg_stat_statements s"
            " JOIN pg_database d ON d.oid = s.dbid AND d.datname = current_database()"
            " WHERE s.query LIKE %s", ("%job_logs%",)).fetchone()
    except psycopg.Error:
        sent = None
    assert sent in (None, (0,))


class Counting:
    """A real connection that counts the statements and transactions sent through it."""

    def __init__(self, conn: psycopg.AsyncConnection[Any]) -> None:
        self.conn = conn
        self.statements: list[str] = []
        self.transactions = 0

    async def execute(self, query: Any, params: Any = None) -> Any:
        self.statements.append(str(query).split()[0])
        return await self.conn.execute(query, params)

    def transaction(self) -> Any:
        self.transactions += 1
        return self.conn.transaction()


def test_a_batch_without_logs_costs_one_statement(app: Forklift, dsn: str,
                                                  conn: psycopg.Connection[Any]) -> None:
    async def main() -> tuple[Counting, Counting, dict[int, str]]:
        rows = conn.execute(
            "UPDATE forklift.jobs SET state = 'running', attempt = 1, fence = id * 10,"
            " worker_id = 'test', lease_expires_at = now() + interval '5 minutes'"
            " WHERE id = ANY(%s) RETURNING id, fence", (ids,)).fetchall()
        fence = dict(rows)
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as raw:
            quiet = Counting(raw)
            await settle.write(quiet, "forklift", [  # type: ignore[arg-type]
                settle.Outcome(i, fence[i], "completed", result="1") for i in ids[:2]])
            log = AttemptLog()
            log.add("info", "hello")
            chatty = Counting(raw)
            logged = settle.Outcome(ids[2], fence[ids[2]], "completed", result="1",
                                    logs=(1, log.to_json()))
            stale = settle.Outcome(ids[3], -1, "completed", result="1", logs=(1, log.to_json()))
            accepted = await settle.write(chatty, "forklift", [  # type: ignore[arg-type]
                logged, stale, settle.Outcome(ids[4], fence[ids[4]], "completed", result="1")])
        return quiet, chatty, accepted

    ids = joblogs.silent.enqueue_many([{"i": i} for i in range(5)])
    quiet, chatty, accepted = asyncio.run(main())
    assert (quiet.statements, quiet.transactions) == (["UPDATE"], 0)
    assert (chatty.statements, chatty.transactions) == (["UPDATE", "INSERT"], 1)
    assert len(accepted) == 2  # the stale fence's outcome was refused; its attempt ran all
    # the same, and its log is kept
    assert [r[0] for r in conn.execute(
        "SELECT job_id FROM forklift.job_logs ORDER BY job_id").fetchall()] == ids[2:4]


def test_logs_go_with_their_job(app: Forklift, dsn: str, conn: psycopg.Connection[Any]) -> None:
    kept = joblogs.plain.enqueue({"order": "kept"})
    gone = joblogs.plain.enqueue({"order": "gone"})
    with running_worker(app, queues=["logs"]):
        wait_done(conn, [kept.id, gone.id])
    conn.execute("DELETE FROM forklift.jobs WHERE id = %s", (gone.id,))  # as retention does

    async def sweep() -> int:
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as c:
            return await orphans(c, "forklift", {})

    assert asyncio.run(sweep()) >= 1
    assert logs(conn, gone.id) == []
    assert len(logs(conn, kept.id)) == 1



def test_bad_options_name_the_field() -> None:
    other = Forklift()
    with pytest.raises(ConfigError) as caught:
        other.job(name="x.lines", log_lines=0)(lambda ctx, p: None)
    assert caught.value.detail["field"] == "log_lines"
    with pytest.raises(ConfigError) as caught:
        other.job(name="x.capture", capture_logs="yes")(lambda ctx, p: None)  # type: ignore[arg-type]
    assert caught.value.detail["field"] == "capture_logs"
    ctx = JobContext(job_id=1, kind="k", queue="q", attempt=1, max_attempts=1, fence=1,
                     worker_id="w", meta={})
    with pytest.raises(ConfigError) as caught:
        ctx.log("x", level="loud")
    assert caught.value.detail["field"] == "level"


def test_logs_stay_while_their_job_is_in_partitioned_history(
    app: Forklift, dsn: str, conn: psycopg.Connection[Any]
) -> None:
    job = joblogs.plain.enqueue({"order": "H-1"})
    with running_worker(app, queues=["logs"]):
        wait_done(conn, [job.id])
    # Enabled once the job is done (the worker's leader would otherwise move it meanwhile).
    history.enable(conn, "forklift")
    conn.execute("INSERT INTO forklift.settings (name, value) VALUES ('history.move_after', 0),"
                 " ('history.partitioned_since', 0) ON CONFLICT (name) DO UPDATE"
                 " SET value = excluded.value")

    async def upkeep_then_sweep() -> int:
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as c:
            await history_upkeep.upkeep(c, "forklift")
            return await orphans(c, "forklift", {})

    assert asyncio.run(upkeep_then_sweep()) == 0
    assert conn.execute("SELECT count(*) FROM forklift.jobs_history WHERE id = %s",
                        (job.id,)).fetchone() == (1,)
    assert len(logs(conn, job.id)) == 1
    with Operator(dsn) as op:  # read from history like the job itself
        assert [line["message"] for line in op.jobs.show(job.id).logs[0].lines] == [
            "charging order", "charged"]
    conn.execute("DELETE FROM forklift.jobs_history WHERE id = %s", (job.id,))
    assert asyncio.run(upkeep_then_sweep()) >= 1
    assert logs(conn, job.id) == []


def test_an_attempt_without_an_outcome_still_leaves_its_log(
    app: Forklift, conn: psycopg.Connection[Any]
) -> None:
    held = joblogs.held.enqueue({})
    napper = joblogs.napper.enqueue({})
    with running_worker(app, queues=["logs"], concurrency=2, lease=2.0) as worker:
        wait_until(lambda: conn.execute("SELECT state FROM forklift.jobs WHERE id = %s",
                                        (held.id,)).fetchone() == ("running",), timeout=30)
        # Another holder took it (as after a rescue and a new claim): a newer fence.
        conn.execute("UPDATE forklift.jobs SET fence = nextval('forklift.fence_seq'),"
                     " worker_id = 'other' WHERE id = %s", (held.id,))
        wait_until(lambda: worker.stats.lease_lost >= 1, timeout=30,
                   message="the heartbeat noticed the lost lease")
        wait_until(lambda: len(logs(conn, held.id)) == 1 and len(logs(conn, napper.id)) == 1,
                   timeout=30, message="both logs were written")
    ((attempt, lines),) = logs(conn, held.id)
    assert attempt == 1
    assert messages(lines) == ["holding the job", "told to stop: lease_lost"]
    row = conn.execute("SELECT state, worker_id FROM forklift.jobs WHERE id = %s",
                       (held.id,)).fetchone()
    assert row == ("running", "other")  # the outcome stayed unwritten: the other holder's
    ((_, lines),) = logs(conn, napper.id)
    assert messages(lines) == ["before the nap"]
    assert conn.execute("SELECT state FROM forklift.jobs WHERE id = %s",
                        (napper.id,)).fetchone() == ("scheduled",)


def test_keyed_jobs_keep_their_logs_when_their_slots_pass_on(
    app: Forklift, conn: psycopg.Connection[Any]
) -> None:
    # A worker with flow queues writes outcomes on its lanes, where the settle also hands the
    # key's slot to the next job (forklift._features.flow.handoff): the logs go along.
    ids = joblogs.keyed.enqueue_many([{"account": "a", "i": i} for i in range(6)])
    with running_worker(app, queues=["logs-keyed"], concurrency=4):
        wait_done(conn, ids)
    for i, job_id in enumerate(ids):
        ((_, lines),) = logs(conn, job_id)
        assert messages(lines) == [f"job {i} of a"]
