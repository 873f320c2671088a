"""Events: published in the caller's transaction (committed or rolled back with it), refused
when they are not storable (nothing stored), expiring and purged by the leader's chore."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from helpers import wait_until

from forklift import Forklift, ForkliftError
from forklift._worker.maintenance.workflows import purge


@pytest.fixture
def app(dsn: str) -> Iterator[Forklift]:
    a = Forklift(dsn, payload_limit=1000)
    try:
        yield a
    finally:
        a.close()


def count(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute("SELECT count(*) FROM forklift.events").fetchone()
    return int(row[0]) if row else 0


def test_publish_stores_the_event_with_the_databases_clock(
    app: Forklift, conn: psycopg.Connection[Any]
) -> None:
    event = app.publish_event("order.paid", {"order": 42, "amount": 9.5}, ttl=timedelta(hours=2))
    row = conn.execute(
        "SELECT name, data, expires_at - published_at, published_at <= now() FROM forklift.events"
        " WHERE id = %s", (event.id,)).fetchone()
    assert row == ("order.paid", {"order": 42, "amount": 9.5}, timedelta(hours=2), True)
    assert event.data == {"order": 42, "amount": 9.5} and event.name == "order.paid"


def test_a_publish_commits_and_rolls_back_with_the_callers_transaction(
    app: Forklift, dsn: str, conn: psycopg.Connection[Any]
) -> None:
    with psycopg.connect(dsn) as mine:
        app.publish_event("order.paid", {"order": 1}, conn=mine)
        assert count(conn) == 0  # not visible before the caller commits
        mine.rollback()
        assert count(conn) == 0
        app.publish_event("order.paid", {"order": 2}, conn=mine)
        mine.commit()
    assert conn.execute("SELECT data FROM forklift.events").fetchall() == [({"order": 2},)]


def test_publish_async_in_the_callers_transaction(app: Forklift, dsn: str,
                                                  conn: psycopg.Connection[Any]) -> None:
    async def main() -> None:
        async with await psycopg.AsyncConnection.connect(dsn) as mine:
            await app.publish_event_async("a", 1, conn=mine)
            await mine.rollback()
            await app.publish_event_async("b", 2, conn=mine)
            await mine.commit()
        await app.publish_event_async("c", 3)
        await app.aclose()

    asyncio.run(main())
    assert conn.execute("SELECT name FROM forklift.events ORDER BY id").fetchall() == [("b",), ("c",)]


@pytest.mark.parametrize(("name", "data", "code"), [
    ("", 1, "invalid_name"),
    ("x" * 201, 1, "invalid_name"),
    ("order\x1b[0m", 1, "invalid_name"),
    ("order\u200b", 1, "invalid_name"),
    (" order", 1, "invalid_name"),
    (42, 1, "invalid_name"),
    ("order", {1, 2}, "not_json"),
    ("order", float("nan"), "not_json"),
    ("order", object(), "not_json"),
    ("order", {"x": "a\x00b"}, "nul_character"),
    ("order", "x" * 2000, "payload_too_large"),
])
def test_an_event_that_cannot_be_stored_is_refused_with_a_code(
    app: Forklift, conn: psycopg.Connection[Any], name: Any, data: Any, code: str
) -> None:
    with pytest.raises(ForkliftError) as caught:
        app.publish_event(name, data)
    assert caught.value.code == code
    assert count(conn) == 0


def test_a_bad_ttl_is_refused(app: Forklift, conn: psycopg.Connection[Any]) -> None:
    for ttl in (0, -1, timedelta(days=4000)):
        with pytest.raises(ForkliftError) as caught:
            app.publish_event("x", 1, ttl=ttl)
        assert caught.value.code == "invalid_option"
    assert count(conn) == 0


def test_expired_events_are_purged_and_live_ones_kept(
    app: Forklift, dsn: str, conn: psycopg.Connection[Any]
) -> None:
    short = app.publish_event("short", 1, ttl=0.05)
    long = app.publish_event("long", 2, ttl=3600)
    wait_until(lambda: conn.execute("SELECT now() > %s", (short.expires_at,)).fetchone() == (True,),
               timeout=10)

    async def run() -> int:
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as c:
            return await purge(c, "forklift")

    assert asyncio.run(run()) == 1
    assert conn.execute("SELECT id FROM forklift.events").fetchall() == [(long.id,)]


def test_steps_and_dependencies_of_jobs_that_are_gone_are_deleted(
    app: Forklift, dsn: str, conn: psycopg.Connection[Any]
) -> None:
    from forklift._worker.maintenance.workflows import orphans

    kept = conn.execute("INSERT INTO forklift.jobs (kind) VALUES ('k') RETURNING id").fetchone()
    gone = conn.execute("INSERT INTO forklift.jobs (kind) VALUES ('k') RETURNING id").fetchone()
    assert kept is not None and gone is not None
    for job in (kept[0], gone[0]):
        conn.execute("INSERT INTO forklift.job_steps (job_id, name, state, fence, attempt)"
                     " VALUES (%s, 's', 'completed', 1, 1)", (job,))
        conn.execute("INSERT INTO forklift.job_deps (job_id, depends_on) VALUES (%s, %s)",
                     (job, kept[0]))
    conn.execute("DELETE FROM forklift.jobs WHERE id = %s", (gone[0],))

    async def run() -> int:
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as c:
            cursors: dict[str, int] = {}
            n = await orphans(c, "forklift", cursors, batch=1)  # a slice of one job id
            n += await orphans(c, "forklift", cursors, batch=1)
            return n

    assert asyncio.run(run()) == 2
    assert conn.execute("SELECT job_id FROM forklift.job_steps").fetchall() == [(kept[0],)]
    assert conn.execute("SELECT job_id FROM forklift.job_deps").fetchall() == [(kept[0],)]


@pytest.mark.parametrize("name", ["order\u200b", "order ", "", "or\x1bder", "order\u202e"])
def test_operator_filters_by_a_name_that_hides_characters_are_refused(
    dsn: str, conn: psycopg.Connection[Any], name: str
) -> None:
    from forklift import InvalidName
    from forklift.ops import Operator

    conn.execute("INSERT INTO forklift.outbox (topic, payload, state) VALUES ('order', '{}',"
                 " 'dead')")
    with Operator(dsn, actor="tester") as op:
        for call in (lambda: op.events(name=name), lambda: op.event_waits(name=name),
                     lambda: op.outbox_messages(topic=name),
                     lambda: op.retry_outbox(topic=name)):
            with pytest.raises(InvalidName) as info:
                call()
            assert info.value.code == "invalid_name"
    assert conn.execute("SELECT state FROM forklift.outbox").fetchall() == [("dead",)]
    assert conn.execute("SELECT count(*) FROM forklift.audit").fetchone() == (0,)
