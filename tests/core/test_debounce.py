"""Debounce: one waiting job per kind and key, the last enqueue's payload, its start pushed back by
each enqueue but never past the first one's max_wait; once the job has started, the next enqueue
makes a new job. One INSERT ... ON CONFLICT, so enqueues racing from many sessions still leave
one job."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from apps.basic import running_worker
from helpers import wait_until

from forklift import Debounce, Forklift, InvalidName, InvalidOption, JobContext

app = Forklift()
GATES: dict[str, threading.Event] = {}


@app.job(name="debounce.reindex", queue="debounce")
def reindex(ctx: JobContext, payload: dict[str, Any]) -> dict[str, Any]:
    gate = payload.get("gate")
    if gate:
        GATES.setdefault(gate, threading.Event()).wait(30)
    return payload


@app.job(name="debounce.other", queue="debounce")
def other(ctx: JobContext, payload: dict[str, Any]) -> None:
    """Another kind: its keys are its own."""


@pytest.fixture
def bound(dsn: str) -> Iterator[Forklift]:
    app.use(dsn)
    try:
        yield app
    finally:
        app.close()
        for g in GATES.values():
            g.set()


def row(conn: psycopg.Connection[Any], job_id: int) -> dict[str, Any]:
    cur = conn.execute("SELECT * FROM forklift.jobs WHERE id = %s", (job_id,))
    values = cur.fetchone()
    assert values is not None and cur.description is not None
    return {d.name: v for d, v in zip(cur.description, values, strict=True)}


def keyed(conn: psycopg.Connection[Any], key: str) -> list[tuple[int, str]]:
    return [(int(i), str(s)) for i, s in conn.execute(
        "SELECT id, state FROM forklift.jobs WHERE debounce_key = %s ORDER BY id", (key,))]


def count(conn: psycopg.Connection[Any]) -> int:
    got = conn.execute("SELECT count(*) FROM forklift.jobs").fetchone()
    assert got is not None
    return int(got[0])


def test_the_first_enqueue_waits_and_later_ones_take_its_place(
    bound: Forklift, conn: psycopg.Connection[Any]
) -> None:
    first = reindex.enqueue({"v": 1}, debounce=Debounce("doc:7", wait=30, max_wait=600))
    assert first.state == "scheduled" and first.debounce_key == "doc:7"
    assert not first.replaced
    stored = row(conn, first.id)
    assert stored["run_at"] - stored["created_at"] == timedelta(seconds=30)
    assert stored["debounce_until"] - stored["created_at"] == timedelta(seconds=600)
    second = reindex.enqueue({"v": 2}, debounce=Debounce("doc:7", timedelta(seconds=30),
                                                          timedelta(minutes=10)))
    assert second.id == first.id and second.replaced and second.args == {"v": 2}
    again = row(conn, first.id)
    assert again["args"] == {"v": 2} and again["run_at"] > stored["run_at"]  # pushed back
    assert again["debounce_until"] == stored["debounce_until"]  # the first enqueue's cap
    assert keyed(conn, "doc:7") == [(first.id, "scheduled")]
    elsewhere = reindex.enqueue({"v": 3}, debounce=Debounce("doc:8", wait=30))
    theirs = other.enqueue({"v": 4}, debounce=Debounce("doc:7", wait=30))
    assert len({first.id, elsewhere.id, theirs.id}) == 3  # keys are per kind


def test_the_start_is_never_pushed_past_the_first_enqueue_plus_max_wait(
    bound: Forklift, conn: psycopg.Connection[Any]
) -> None:
    first = reindex.enqueue({"v": 1}, debounce=Debounce("capped", wait=60, max_wait=60))
    capped = row(conn, first.id)["run_at"]
    for v in range(2, 5):
        assert reindex.enqueue({"v": v}, debounce=Debounce("capped", 60, 60)).id == first.id
    stored = row(conn, first.id)
    assert stored["run_at"] == capped == stored["debounce_until"]
    assert stored["args"] == {"v": 4}
    unbounded = reindex.enqueue({"v": 1}, debounce=Debounce("open", wait=60))
    assert row(conn, unbounded.id)["debounce_until"] is None


def test_once_the_job_has_started_the_next_enqueue_makes_a_new_one(
    bound: Forklift, conn: psycopg.Connection[Any]
) -> None:
    gate = f"debounce-{os.getpid()}-{id(conn)}"
    first = reindex.enqueue({"gate": gate, "v": 1}, debounce=Debounce("run", wait=0.2))
    with running_worker(app, queues=["debounce"]):
        wait_until(lambda: row(conn, first.id)["state"] == "running", timeout=30,
                   message="the debounced job started once due")
        second = reindex.enqueue({"v": 2}, debounce=Debounce("run", wait=0.2))
        assert second.id != first.id and not second.replaced
        GATES.setdefault(gate, threading.Event()).set()
        wait_until(lambda: [s for _, s in keyed(conn, "run")] == ["completed", "completed"],
                   timeout=30, message="both jobs ran")
    assert row(conn, first.id)["result"] == {"gate": gate, "v": 1}  # its own payload
    assert row(conn, second.id)["result"] == {"v": 2}
    assert row(conn, first.id)["attempt"] == row(conn, second.id)["attempt"] == 1


def test_enqueues_racing_from_many_sessions_leave_one_job_with_the_last_payload(
    bound: Forklift, conn: psycopg.Connection[Any], dsn: str
) -> None:
    threads, each = 8, 25
    start = threading.Barrier(threads)

    def producer(t: int) -> list[int]:
        ids = []
        with psycopg.connect(dsn, autocommit=True) as own:  # a session of its own
            start.wait(10)
            for i in range(each):
                job = reindex.enqueue({"t": t, "i": i}, conn=own,
                                      debounce=Debounce("race", wait=300, max_wait=900))
                ids.append(job.id)
        return ids

    with ThreadPoolExecutor(threads) as pool:
        results = list(pool.map(producer, range(threads)))
    ids = {i for got in results for i in got}
    assert len(ids) == 1  # every enqueue found, or was, the one waiting job
    (job_id,) = ids
    assert keyed(conn, "race") == [(job_id, "scheduled")]
    payload = row(conn, job_id)["args"]
    assert payload in [{"t": t, "i": each - 1} for t in range(threads)]  # someone's last write
    last = reindex.enqueue({"last": True}, debounce=Debounce("race", wait=300, max_wait=900))
    assert last.id == job_id and row(conn, job_id)["args"] == {"last": True}


@pytest.mark.parametrize(("make", "says"), [
    (lambda: Debounce("k", wait=0), "wait must be positive"),
    (lambda: Debounce("k", wait=-1), "wait must be positive"),
    (lambda: Debounce("k", wait=float("nan")), "wait must be positive"),
    (lambda: Debounce("k", wait="5s"), "seconds or a timedelta"),  # type: ignore[arg-type]
    (lambda: Debounce("k", wait=60, max_wait=30), "at least its wait"),
    (lambda: Debounce("k", wait=60, max_wait=timedelta(0)), "max_wait must be positive"),
    (lambda: Debounce("", wait=60), "is empty"),
    (lambda: Debounce(7, wait=60), "must be a string"),  # type: ignore[arg-type]
    (lambda: Debounce("a\x00b", wait=60), "control character"),
])
def test_a_bad_debounce_is_refused_with_the_field_named(make: Any, says: str) -> None:
    with pytest.raises(InvalidOption) as err:
        make()
    assert err.value.detail["field"] == "debounce" and says in err.value.message


def test_what_a_debounce_cannot_go_with_is_refused_and_nothing_stored(
    bound: Forklift, conn: psycopg.Connection[Any]
) -> None:
    d = Debounce("k", wait=60)
    before = count(conn)
    dependency = reindex.enqueue({})
    for options in ({"delay": 5}, {"at": datetime.now(UTC) + timedelta(hours=1)},
                    {"unique_key": "u"}, {"after": [dependency]}):
        with pytest.raises(InvalidOption) as err:
            reindex.enqueue({}, debounce=d, **options)
        assert err.value.detail["field"] == "debounce"
    with pytest.raises(InvalidOption) as err:
        reindex.enqueue({}, debounce=("k", 60))
    assert err.value.detail["field"] == "debounce" and "Debounce(key" in err.value.message
    with pytest.raises(InvalidOption) as err:
        reindex.enqueue_many([{}, {}], debounce=d)
    assert err.value.detail["field"] == "debounce"
    with pytest.raises(InvalidOption):
        bound.enqueue_many([("debounce.reindex", {}, {"debounce": d})])
    assert count(conn) == before + 1  # the dependency only
    with pytest.raises(InvalidName):
        Debounce("x" * 1001, wait=1)  # keys are indexed: capped in bytes like unique keys
