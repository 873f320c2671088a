"""Versioned payloads at work, across a rolling deploy: apps of different releases on one
database. An older job is upcast step by step to the worker's version and validated; an upcaster
that raises is a recorded failure (``upcast_failed``), never a dead worker; a job newer than its
worker reads is put back for a worker that reads it, its attempt unspent, once, with a note."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from apps.basic import running_worker
from helpers import wait_until
from typing_extensions import TypedDict

from forklift import ConfigError, Forklift, JobContext
from forklift._jobs.payload_versions import AHEAD_WAIT
from forklift.ops import JobFilter, Operator

# -- three releases of one kind, "pv.charge": the payload's shape changed twice ----------------


class ChargeV1(TypedDict):
    cents: int


class ChargeV2(TypedDict):
    amount: int
    currency: str


class ChargeV3(TypedDict):
    amount: int
    currency: str
    note: str


def v1_to_v2(old: dict[str, Any]) -> dict[str, Any]:
    if old["cents"] < 0:
        raise ValueError(f"a negative charge of {old['cents']} cents")
    return {"amount": old["cents"], "currency": "EUR"}


def v2_to_v3(old: dict[str, Any]) -> dict[str, Any]:
    return {**old, "note": f"upcast from v2 ({old['currency']})"}


release1 = Forklift()
release2 = Forklift()
release3 = Forklift()


@release1.job(name="pv.charge", queue="pv")
def charge1(ctx: JobContext, payload: ChargeV1) -> dict[str, Any]:
    return {"release": 1, "seen": dict(payload)}


@release2.job(name="pv.charge", queue="pv", version=2, upcasters={1: v1_to_v2})
def charge2(ctx: JobContext, payload: ChargeV2) -> dict[str, Any]:
    return {"release": 2, "seen": dict(payload)}


@release3.job(name="pv.charge", queue="pv", version=3, upcasters={1: v1_to_v2, 2: v2_to_v3},
              max_attempts=1)
def charge3(ctx: JobContext, payload: ChargeV3) -> dict[str, Any]:
    return {"release": 3, "seen": dict(payload)}


@pytest.fixture
def releases(dsn: str) -> Iterator[tuple[Forklift, Forklift, Forklift]]:
    for app in (release1, release2, release3):
        app.use(dsn)
    try:
        yield release1, release2, release3
    finally:
        for app in (release1, release2, release3):
            app.close()


def row(conn: psycopg.Connection[Any], job_id: int) -> dict[str, Any]:
    cur = conn.execute("SELECT * FROM forklift.jobs WHERE id = %s", (job_id,))
    values = cur.fetchone()
    assert values is not None and cur.description is not None
    return {d.name: v for d, v in zip(cur.description, values, strict=True)}


def state_of(conn: psycopg.Connection[Any], job_id: int) -> str:
    return str(row(conn, job_id)["state"])


def test_older_jobs_are_upcast_step_by_step_and_run_by_the_newest_worker(
    releases: tuple[Forklift, Forklift, Forklift], conn: psycopg.Connection[Any]
) -> None:
    old = charge1.enqueue({"cents": 250})
    mid = charge2.enqueue({"amount": 300, "currency": "USD"})
    new = charge3.enqueue({"amount": 5, "currency": "SEK", "note": "as is"})
    # The producer's version is stored with the job, and only by a kind that declares one.
    assert [row(conn, j.id)["payload_version"] for j in (old, mid, new)] == [None, 2, 3]
    assert (old.payload_version, mid.payload_version, new.payload_version) == (None, 2, 3)
    with running_worker(release3, queues=["pv"]):
        wait_until(lambda: {state_of(conn, j.id) for j in (old, mid, new)} == {"completed"},
                   timeout=30, message="the release-3 worker ran all three")
    # version 1: two upcasters in a row; version 2: one; version 3: none.
    assert row(conn, old.id)["result"] == {"release": 3, "seen": {
        "amount": 250, "currency": "EUR", "note": "upcast from v2 (EUR)"}}
    assert row(conn, mid.id)["result"] == {"release": 3, "seen": {
        "amount": 300, "currency": "USD", "note": "upcast from v2 (USD)"}}
    assert row(conn, new.id)["result"] == {"release": 3, "seen": {
        "amount": 5, "currency": "SEK", "note": "as is"}}
    # The stored payload stays as its producer wrote it: the upcast is the reader's view.
    assert row(conn, old.id)["args"] == {"cents": 250}


def test_a_failing_upcaster_is_a_recorded_failure_and_the_worker_goes_on(
    releases: tuple[Forklift, Forklift, Forklift], conn: psycopg.Connection[Any]
) -> None:
    bad = charge1.enqueue({"cents": -1}, max_attempts=1)
    with running_worker(release3, queues=["pv"]) as worker:
        wait_until(lambda: state_of(conn, bad.id) == "dead", timeout=30,
                   message="the job whose upcast failed ended (max_attempts=1)")
        after = charge1.enqueue({"cents": 7})
        wait_until(lambda: state_of(conn, after.id) == "completed", timeout=30,
                   message="the same worker ran the next job")
    (entry,) = row(conn, bad.id)["errors"]
    assert entry["code"] == "upcast_failed"
    assert "from version 1 to 2" in entry["message"]
    assert "a negative charge of -1 cents" in entry["message"]
    assert entry["type"] == "ValueError" and entry["worker"] == worker.id
    assert row(conn, bad.id)["result"] is None


# -- an old worker meets a job from a new producer --------------------------------------------
old_app = Forklift()
new_app = Forklift()
RAN_OLD: list[dict[str, Any]] = []


@old_app.job(name="pv.greet", queue="pv-greet")
def greet_old(ctx: JobContext, payload: dict[str, Any]) -> None:
    RAN_OLD.append(payload)


@old_app.job(name="pv.other", queue="pv-greet")
def other_old(ctx: JobContext, payload: dict[str, Any]) -> None:
    return None


class GreetV2(TypedDict):
    first: str
    last: str


@new_app.job(name="pv.greet", queue="pv-greet", version=2,
             upcasters={1: lambda p: {"first": p["name"], "last": ""}})
def greet_new(ctx: JobContext, payload: GreetV2) -> str:
    return f"hello {payload['first']} {payload['last']}".strip()


@pytest.fixture
def deploy(dsn: str) -> Iterator[tuple[Forklift, Forklift]]:
    RAN_OLD.clear()
    old_app.use(dsn)
    new_app.use(dsn)
    try:
        yield old_app, new_app
    finally:
        old_app.close()
        new_app.close()


def test_an_old_worker_leaves_a_newer_job_for_a_new_worker_without_spending_its_attempt(
    deploy: tuple[Forklift, Forklift], conn: psycopg.Connection[Any], dsn: str
) -> None:
    job = greet_new.enqueue({"first": "Ada", "last": "Lovelace"})
    with running_worker(old_app, queues=["pv-greet"], lead=False) as worker:
        wait_until(lambda: row(conn, job.id)["errors"], timeout=30,
                   message="the old worker met the newer job")
        # Other work flows past it meanwhile, on the same worker.
        plain = other_old.enqueue({})
        wait_until(lambda: state_of(conn, plain.id) == "completed", timeout=30,
                   message="the old worker ran its own kind's job")
        claimed = worker.stats.claimed
    got = row(conn, job.id)
    assert got["state"] == "scheduled" and got["attempt"] == 0  # no attempt spent
    assert got["finished_at"] is None  # never dead
    (note,) = got["errors"]
    assert note["code"] == "payload_version_ahead"
    assert "payload version 2 is newer than this worker reads (up to version 1)" in note["message"]
    assert "reads version 2" in note["message"]
    assert RAN_OLD == []  # the old handler never saw the new payload
    # It waits before it is claimable again: the old worker claimed it once, not in a loop.
    assert claimed == 2
    wait = conn.execute("SELECT extract(epoch FROM run_at - now()) FROM forklift.jobs"
                        " WHERE id = %s", (job.id,)).fetchone()
    assert wait is not None and 0 < wait[0] <= AHEAD_WAIT
    with Operator(dsn) as op:
        op.jobs.run_now(job.id)  # as if the wait were over
    # Old workers meeting it again keep the one note.
    with running_worker(old_app, queues=["pv-greet"], lead=False):
        wait_until(lambda: state_of(conn, job.id) == "scheduled", timeout=30,
                   message="the old worker put it back again")
    assert [e["code"] for e in row(conn, job.id)["errors"]] == ["payload_version_ahead"]
    with Operator(dsn) as op:
        op.jobs.run_now(job.id)
        assert [j.id for j in op.jobs.list(JobFilter.build(payload_versions=2)).jobs] == [job.id]
        assert job.id not in [j.id for j in op.jobs.list(
            JobFilter.build(payload_versions=[1])).jobs]
    with running_worker(new_app, queues=["pv-greet"]):
        wait_until(lambda: state_of(conn, job.id) == "completed", timeout=30,
                   message="the new worker ran it")
    got = row(conn, job.id)
    assert got["result"] == "hello Ada Lovelace" and got["attempt"] == 1


def test_an_old_job_reaches_a_new_worker_through_its_upcaster(
    deploy: tuple[Forklift, Forklift], conn: psycopg.Connection[Any]
) -> None:
    job = greet_old.enqueue({"name": "Grace"})
    with running_worker(new_app, queues=["pv-greet"]):
        wait_until(lambda: state_of(conn, job.id) == "completed", timeout=30,
                   message="the new worker ran the old job")
    assert row(conn, job.id)["result"] == "hello Grace"


# -- declarations ------------------------------------------------------------------------------
def _handler(ctx: JobContext, payload: dict[str, Any]) -> None:
    return None


@pytest.mark.parametrize(("options", "field", "words"), [
    ({"version": 0}, "version", "whole number from 1"),
    ({"version": True}, "version", "whole number from 1"),
    ({"version": "2"}, "version", "whole number from 1"),
    ({"upcasters": {1: v1_to_v2}}, "upcasters", "need version="),
    ({"version": 3, "upcasters": {1: v1_to_v2}}, "upcasters",
     "no path from version 1 to version 3: no upcaster from version 2 to 3"),
    ({"version": 4, "upcasters": {1: v1_to_v2, 3: v2_to_v3}}, "upcasters",
     "no upcaster from version 2 to 3"),
    ({"version": 2, "upcasters": {2: v1_to_v2}}, "upcasters", "below version=2"),
    ({"version": 2, "upcasters": {0: v1_to_v2}}, "upcasters", "below version=2"),
    ({"version": 2, "upcasters": {1: "v1_to_v2"}}, "upcasters", "not callable"),
    ({"version": 2, "upcasters": [v1_to_v2]}, "upcasters", "must map each older version"),
])
def test_a_declaration_without_a_path_to_its_version_is_refused_naming_the_field(
    options: dict[str, Any], field: str, words: str
) -> None:
    app = Forklift()
    with pytest.raises(ConfigError) as caught:
        app.job(name="pv.refused", **options)(_handler)
    assert caught.value.detail["field"] == field
    assert words in caught.value.message and "pv.refused" in caught.value.message
    assert "pv.refused" not in app.kinds  # nothing declared


def test_declarations_that_read_their_versions_are_accepted() -> None:
    app = Forklift()
    plain = app.job(name="pv.plain")(_handler)
    first = app.job(name="pv.first", version=1)(_handler)
    # The oldest readable version may be newer than 1: version 1 jobs are then refused at run.
    late = app.job(name="pv.late", version=3, upcasters={2: v2_to_v3})(_handler)
    assert plain.versions is None
    assert first.versions is not None and first.versions.current == first.versions.oldest == 1
    assert late.versions is not None and (late.versions.oldest, late.versions.current) == (2, 3)


def test_enqueue_validates_against_the_producers_own_model(
    releases: tuple[Forklift, Forklift, Forklift]
) -> None:
    from forklift import InvalidPayload

    with pytest.raises(InvalidPayload):
        charge3.enqueue({"cents": 1})  # a version-1 shape refused by the version-3 producer
    rows = charge3.rows([{"amount": 1, "currency": "EUR", "note": ""}] * 2)
    assert [r.payload_version for r in rows] == [3, 3]
    ids = charge3.enqueue_many([{"amount": 1, "currency": "EUR", "note": ""}] * 2)
    with Operator(release3.dsn) as op:
        assert {op.job(i).job.payload_version for i in ids} == {3}
        assert op.job(ids[0]).to_json()["payload_version"] == 3


def test_a_schedule_run_by_hand_carries_its_kind_s_version(
    releases: tuple[Forklift, Forklift, Forklift], conn: psycopg.Connection[Any], dsn: str
) -> None:
    from forklift._features.cron import sync_definitions_now

    release3.schedule(charge3, cron="0 3 * * *", name="pv.nightly",
                      args={"amount": 7, "currency": "NOK", "note": "nightly"})
    try:
        sync_definitions_now(conn, release3, "forklift")
        with Operator(dsn, actor="alice") as op:
            ran = op.schedules.run_now("pv.nightly")
        # the recorded args are release 3's: no upcaster may read them as version 1
        assert row(conn, ran.job_id)["payload_version"] == 3
        with running_worker(release3, queues=["pv"]):
            wait_until(lambda: state_of(conn, ran.job_id) == "completed", timeout=30,
                       message="the run-now job ran")
        assert row(conn, ran.job_id)["result"] == {"release": 3, "seen": {
            "amount": 7, "currency": "NOK", "note": "nightly"}}
    finally:
        release3.schedules.pop("pv.nightly", None)
