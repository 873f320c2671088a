"""Start-by deadlines at enqueue: a kind's default and an enqueue's own, stored by every enqueue
path as an absolute time counted from when the job is due, and refused with the field named
(nothing stored) when it is not a deadline the job could ever meet."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from forklift import ConfigError, Forklift, InvalidOption

app = Forklift()


@app.job(name="expires.plain")
def plain(ctx: Any, payload: dict[str, Any]) -> None:
    """No deadline of its own."""


@app.job(name="expires.fresh", expires=timedelta(minutes=5))
def fresh(ctx: Any, payload: dict[str, Any]) -> None:
    """Its jobs must start within five minutes of being due."""


@pytest.fixture
def bound(dsn: str) -> Iterator[Forklift]:
    app.use(dsn)
    try:
        yield app
    finally:
        app.close()


def deadlines(conn: psycopg.Connection[Any], ids: list[int]) -> list[datetime | None]:
    rows = dict(conn.execute("SELECT id, expires_at FROM forklift.jobs WHERE id = ANY(%s)",
                             (ids,)).fetchall())
    return [rows[i] for i in ids]


def count(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute("SELECT count(*) FROM forklift.jobs").fetchone()
    assert row is not None
    return int(row[0])


def test_a_job_without_a_deadline_has_none(bound: Forklift, conn: psycopg.Connection[Any]) -> None:
    job = plain.enqueue({})
    assert job.expires_at is None
    assert deadlines(conn, [job.id]) == [None]
    assert bound.get_job(job.id) == job


def test_the_kind_default_counts_from_enqueue_and_an_enqueue_overrides_it(
    bound: Forklift, conn: psycopg.Connection[Any]
) -> None:
    before = datetime.now(UTC)
    default = fresh.enqueue({})
    after = datetime.now(UTC)
    assert default.expires_at is not None
    assert before + timedelta(minutes=5) <= default.expires_at <= after + timedelta(minutes=5)
    longer = fresh.enqueue({}, expires=timedelta(hours=1))
    assert longer.expires_at is not None
    assert before + timedelta(hours=1) <= longer.expires_at
    at = datetime.now(UTC) + timedelta(days=2)
    absolute = plain.enqueue({}, expires=at)
    assert deadlines(conn, [default.id, longer.id, absolute.id]) == [
        default.expires_at, longer.expires_at, at]
    assert bound.get_job(absolute.id) == absolute


def test_a_relative_deadline_counts_from_when_the_job_is_due(
    bound: Forklift, conn: psycopg.Connection[Any]
) -> None:
    at = datetime.now(UTC) + timedelta(hours=3)
    scheduled = fresh.enqueue({}, at=at)
    assert scheduled.state == "scheduled" and scheduled.expires_at == at + timedelta(minutes=5)
    before = datetime.now(UTC)
    delayed = plain.enqueue({}, delay=timedelta(hours=1), expires=timedelta(minutes=1))
    assert delayed.expires_at is not None
    assert before + timedelta(hours=1, minutes=1) <= delayed.expires_at
    assert deadlines(conn, [scheduled.id, delayed.id]) == [scheduled.expires_at,
                                                            delayed.expires_at]


def test_every_enqueue_path_stores_the_deadline(bound: Forklift,
                                                conn: psycopg.Connection[Any]) -> None:
    at = datetime.now(UTC) + timedelta(hours=1)
    first = plain.enqueue({"n": 1}, expires=at, unique_key="exp-1")
    reused = plain.enqueue({"n": 1}, expires=at + timedelta(hours=1), unique_key="exp-1")
    assert reused.id == first.id and reused.expires_at == at  # the live holder is returned
    replaced = plain.enqueue({"n": 2}, expires=at + timedelta(hours=2), unique_key="exp-1",
                             on_conflict="replace")
    assert replaced.id == first.id and replaced.expires_at == at + timedelta(hours=2)
    after = plain.enqueue({"n": 3}, expires=at, after=[first])
    many = plain.enqueue_many([{"n": 4}, {"n": 5}], expires=at)
    keyed = plain.enqueue_many([{"n": 6}], expires=at, unique_key="exp-2")
    defaulted = fresh.enqueue_many([{"n": 7}])
    by_name = bound.enqueue_many([("expires.plain", {"n": 8}, {"expires": at}),
                                  ("expires.plain", {"n": 9})])
    ids = [first.id, after.id, *many, *keyed, *by_name]
    assert deadlines(conn, ids) == [at + timedelta(hours=2), at, at, at, at, at, None]
    (stored,) = deadlines(conn, defaulted)
    assert stored is not None and stored > datetime.now(UTC) + timedelta(minutes=4)

    async def go() -> list[int]:
        one = await plain.enqueue_async({"n": 10}, expires=at)
        more = await plain.enqueue_many_async([{"n": 11}], expires=at)
        await app.aclose()
        return [one.id, *more]

    assert deadlines(conn, asyncio.run(go())) == [at, at]


@pytest.mark.parametrize(("expires", "says"), [
    (datetime.now(UTC) - timedelta(seconds=1), "has passed"),
    (timedelta(0), "positive"),
    (timedelta(seconds=-5), "positive"),
    (datetime(2999, 1, 1), "timezone-aware"),  # naive: which zone is meant?
    (300, "timedelta or a timezone-aware datetime"),
    ("5m", "timedelta or a timezone-aware datetime"),
    (True, "timedelta or a timezone-aware datetime"),
])
def test_a_deadline_the_job_could_never_meet_is_refused_with_the_field_named(
    bound: Forklift, conn: psycopg.Connection[Any], expires: Any, says: str
) -> None:
    stored = count(conn)
    with pytest.raises(InvalidOption) as err:
        plain.enqueue({}, expires=expires)
    assert err.value.code == "invalid_option" and err.value.detail["field"] == "expires"
    assert says in err.value.message
    with pytest.raises(InvalidOption):
        plain.enqueue_many([{}, {}], expires=expires)
    with pytest.raises(InvalidOption):
        bound.enqueue_many([("expires.plain", {}), ("expires.plain", {}, {"expires": expires})])
    assert count(conn) == stored  # nothing stored, not even a bulk's other rows


def test_a_deadline_before_the_job_is_due_is_refused(bound: Forklift,
                                                     conn: psycopg.Connection[Any]) -> None:
    stored = count(conn)
    at = datetime.now(UTC) + timedelta(hours=2)
    with pytest.raises(InvalidOption) as err:
        plain.enqueue({}, at=at, expires=at - timedelta(minutes=1))
    assert err.value.detail["field"] == "expires" and "before the job is due" in err.value.message
    with pytest.raises(InvalidOption):
        plain.enqueue({}, delay=3600, expires=datetime.now(UTC) + timedelta(minutes=5))
    assert count(conn) == stored


@pytest.mark.parametrize("expires", [timedelta(0), 60, datetime.now(UTC) + timedelta(hours=1)])
def test_a_kind_default_must_be_a_positive_timedelta(expires: Any) -> None:
    other = Forklift()
    with pytest.raises(ConfigError) as err:
        other.job(name="expires.bad", expires=expires)(lambda ctx, p: None)
    assert err.value.detail["field"] == "expires" and "expires.bad" in err.value.message
    assert "expires.bad" not in other.kinds
