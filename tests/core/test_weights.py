"""Weights at declaration and at enqueue: a kind's ``weight=`` and an enqueue's own, refused
with the field named (nothing stored) unless a whole number of slots from 1 to 1000; a batch
kind refuses an enqueue's; a job weighing one stores no weight, and its queue stays unweighted."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from forklift import ConfigError, Forklift, InvalidOption

app = Forklift()


@app.job(name="weights.light", queue="weights.light")
def light(ctx: Any, payload: dict[str, Any]) -> None:
    """One slot a job, unless an enqueue says otherwise."""


@app.job(name="weights.heavy", queue="weights.heavy", weight=3)
def heavy(ctx: Any, payload: dict[str, Any]) -> None:
    """Three slots a job."""


@app.batch_job(name="weights.batched", queue="weights.batched", max=10)
def batched(ctx: Any, payloads: list[dict[str, Any]]) -> list[None]:
    return [None for _ in payloads]


@pytest.fixture
def bound(dsn: str) -> Iterator[Forklift]:
    app.use(dsn)
    try:
        yield app
    finally:
        app.close()


def count(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute("SELECT count(*) FROM forklift.jobs").fetchone()
    assert row is not None
    return int(row[0])


def stored(conn: psycopg.Connection[Any], ids: list[int]) -> list[int | None]:
    rows = dict(conn.execute("SELECT id, weight FROM forklift.jobs WHERE id = ANY(%s)",
                             (ids,)).fetchall())
    return [rows[i] for i in ids]


def weighted(conn: psycopg.Connection[Any], queue: str) -> bool | None:
    row = conn.execute("SELECT weighted FROM forklift.queues WHERE name = %s",
                       (queue,)).fetchone()
    return None if row is None else bool(row[0])


@pytest.mark.parametrize("weight", [0, -1, 1001, True, "2", 2.0, 2.5, None])
def test_a_kind_weight_that_is_not_a_number_of_slots_is_refused(weight: Any) -> None:
    with pytest.raises(ConfigError) as err:
        Forklift().job(name="weights.bad", weight=weight)(lambda ctx, payload: None)
    assert err.value.detail["field"] == "weight"
    assert "weights.bad" in err.value.message and "1 to 1000" in err.value.message


def test_the_weight_is_stored_only_above_one(bound: Forklift,
                                             conn: psycopg.Connection[Any]) -> None:
    one = light.enqueue({})
    explicit = light.enqueue({}, weight=1)
    kind = heavy.enqueue({})
    override = heavy.enqueue({}, weight=5)
    lighter = heavy.enqueue({}, weight=1)  # an enqueue may make a heavy kind's job light
    assert (one.weight, explicit.weight, kind.weight, override.weight, lighter.weight) == (
        None, None, 3, 5, None)
    assert stored(conn, [one.id, explicit.id, kind.id, override.id, lighter.id]) == [
        None, None, 3, 5, None]
    # Jobs of one slot leave their queue unweighted; a heavier one flags its queue.
    assert weighted(conn, "weights.light") in (None, False)
    assert weighted(conn, "weights.heavy") is True
    delayed = heavy.enqueue({}, delay=60)  # the timed insert carries it too
    assert delayed.weight == 3 and stored(conn, [delayed.id]) == [3]
    many = light.enqueue_many([{}, {}], weight=2)
    assert stored(conn, many) == [2, 2]
    assert weighted(conn, "weights.light") is True

    async def go() -> int | None:
        job = await light.enqueue_async({}, weight=4)
        await app.aclose()
        return job.weight

    assert asyncio.run(go()) == 4


@pytest.mark.parametrize("weight", [0, 2.5, 1001, True, "2"])
def test_an_enqueue_weight_that_is_not_a_number_of_slots_is_refused_and_nothing_stored(
    bound: Forklift, conn: psycopg.Connection[Any], weight: Any
) -> None:
    before = count(conn)
    with pytest.raises(InvalidOption) as err:
        light.enqueue({}, weight=weight)
    assert err.value.code == "invalid_option" and err.value.detail["field"] == "weight"
    with pytest.raises(InvalidOption):
        light.enqueue_many([{}, {}], weight=weight)
    with pytest.raises(InvalidOption):
        heavy.enqueue({}, weight=weight, unique_key="weights-1")
    assert count(conn) == before
    assert weighted(conn, "weights.light") in (None, False)


def test_a_batch_kind_refuses_an_enqueue_weight(bound: Forklift,
                                                conn: psycopg.Connection[Any]) -> None:
    before = count(conn)
    with pytest.raises(InvalidOption) as err:
        batched.enqueue({}, weight=2)
    assert err.value.detail["field"] == "weight" and "batch kind" in err.value.message
    assert count(conn) == before
    assert batched.enqueue({}).weight is None


def test_a_replacing_enqueue_that_makes_a_job_weighted_flags_its_queue(
        bound: Forklift, conn: psycopg.Connection[Any]) -> None:
    light.enqueue({}, queue="weights.replaced", unique_key="k")
    assert weighted(conn, "weights.replaced") is False  # one slot: the claim it had
    again = light.enqueue({}, queue="weights.replaced", unique_key="k", weight=4,
                          on_conflict="replace")
    assert again.replaced and again.weight == 4
    assert stored(conn, [again.id]) == [4]
    # the update is not an insert: the enqueue's own statement flags the queue
    assert weighted(conn, "weights.replaced") is True
    flow = conn.execute("SELECT flow FROM forklift.queues WHERE name = 'weights.replaced'"
                        ).fetchone()
    assert flow == (True,)


def test_a_debounced_enqueue_carries_its_weight_and_flags_the_queue_of_the_job_it_updates(
        bound: Forklift, conn: psycopg.Connection[Any]) -> None:
    from datetime import timedelta

    from forklift import Debounce

    first = light.enqueue({}, queue="weights.debounced",
                          debounce=Debounce("k", timedelta(minutes=1), timedelta(minutes=5)))
    assert weighted(conn, "weights.debounced") is False
    later = light.enqueue({}, queue="weights.debounced", weight=3,
                          debounce=Debounce("k", timedelta(minutes=1), timedelta(minutes=5)))
    assert later.id == first.id and later.weight == 3
    assert stored(conn, [first.id]) == [3]
    assert weighted(conn, "weights.debounced") is True
