"""The fast bulk path stores exactly what one-at-a-time enqueue stores: it only leaves columns to
the table's defaults when every row has the default, and serialises payloads in one step."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import psycopg
import pytest
from bound import bound_to

from forklift import Backoff, Forklift, JobContext
from forklift._jobs.insert import COPY_DEFAULTS, _bulk_ids
from forklift._jobs.payload import to_json_text

app = Forklift(schema="forklift")


@dataclasses.dataclass
class Order:
    sku: str
    qty: int
    price: Decimal
    when: datetime
    ratio: float


@app.job(name="perf_enqueue.order", queue="orders", priority=3, max_attempts=7)
def order(ctx: JobContext, payload: Order) -> None:
    return None


@app.job(name="perf_enqueue.plain")
def plain(ctx: JobContext, payload: dict[str, Any]) -> None:
    return None


@pytest.fixture
def bound(dsn: str) -> Iterator[Forklift]:
    with bound_to(app, dsn) as bound_app:
        yield bound_app


COLUMNS = ("queue, kind, args, state, priority, max_attempts, unique_key, tags, meta, retry,"
           " expires_at")


def _rows(conn: psycopg.Connection[Any], ids: list[int]) -> list[tuple[Any, ...]]:
    return conn.execute(
        f"SELECT {COLUMNS} FROM forklift.jobs WHERE id = ANY(%s) ORDER BY id", (ids,)
    ).fetchall()


def test_the_copy_defaults_are_the_tables(conn: psycopg.Connection[Any]) -> None:
    got = dict(conn.execute(
        "SELECT column_name, column_default FROM information_schema.columns"
        " WHERE table_schema = 'forklift' AND table_name = 'jobs'"
    ).fetchall())
    expected = {
        "priority": "0", "max_attempts": "20", "unique_key": None,
        "tags": "'{}'::text[]", "meta": "'{}'::jsonb", "retry": None, "traceparent": None,
        "keys": None, "tenant": None, "enqueued_by": None, "expires_at": None,
        "payload_version": None, "weight": None,
    }
    assert {c: got[c] for c in COPY_DEFAULTS} == expected
    assert COPY_DEFAULTS == {"priority": 0, "max_attempts": 20, "unique_key": None, "tags": [],
                             "meta": "{}", "retry": None, "traceparent": None, "keys": None,
                             "tenant": None, "enqueued_by": None, "expires_at": None,
                             "payload_version": None, "weight": None}
    assert got["state"] == "'available'::text" and got["run_at"] == "now()"


@pytest.mark.parametrize("options", [
    {},
    {"priority": -4, "max_attempts": 2},
    {"tags": ['a,b', 'q"uote', 'back\\slash', 'in side', '{brace}', 'ü', 'NULL']},
    {"meta": {"k": 'v"\\\n\t', "n": [1, None, 2.5], "ü": {}}},
    {"retry": Backoff(kind="fixed", base=3.0, max=9.0, jitter="none")},
    {"delay": 3600.0},
    {"at": datetime(2000, 1, 1, tzinfo=UTC)},
    {"expires": datetime(2999, 1, 1, tzinfo=UTC)},
])
def test_enqueue_many_stores_what_enqueue_stores(
    bound: Forklift, conn: psycopg.Connection[Any], options: dict[str, Any]
) -> None:
    payloads = [{"n": i, "s": 'x"\\\t\n\u2028é'} for i in range(3)]
    one = [plain.enqueue(p, **options).id for p in payloads]
    many = plain.enqueue_many(payloads, **options)
    assert _rows(conn, many) == _rows(conn, one)
    assert [r[0] for r in conn.execute(
        "SELECT (args->>'n')::int FROM forklift.jobs WHERE id = ANY(%s) ORDER BY id", (many,)
    ).fetchall()] == [0, 1, 2]  # ids follow the payloads' order


def test_typed_payloads_are_stored_as_the_same_json(
    bound: Forklift, conn: psycopg.Connection[Any]
) -> None:
    value = Order("A-1", 2, Decimal("19.90"), datetime(2026, 3, 1, 12, 30, tzinfo=UTC), 1e-7)
    [job_id] = order.enqueue_many([value])
    stored = conn.execute("SELECT args, queue, priority, max_attempts FROM forklift.jobs"
                          " WHERE id = %s", (job_id,)).fetchone()
    assert stored is not None
    expected = json.loads(to_json_text(order.payload.dump(value, kind="k"), what="payload",
                                       kind="k", limit=1 << 20))
    assert stored == (expected, "orders", 3, 7)


def test_a_mixed_bulk_sends_every_column_some_row_needs(
    bound: Forklift, conn: psycopg.Connection[Any]
) -> None:
    ids = app.enqueue_many([
        ("perf_enqueue.plain", {"n": 0}),
        ("perf_enqueue.plain", {"n": 1}, {"delay": timedelta(hours=1), "tags": ["t"]}),
        ("perf_enqueue.order", Order("B", 1, Decimal("1"), datetime.now(UTC), 0.5)),
    ])
    rows = conn.execute(
        "SELECT state, priority, max_attempts, tags, run_at > now() + interval '30 minutes'"
        " FROM forklift.jobs WHERE id = ANY(%s) ORDER BY id", (ids,)
    ).fetchall()
    assert rows == [
        ("available", 0, 20, [], False),
        ("scheduled", 0, 20, ["t"], True),
        ("available", 3, 7, [], False),
    ]


def test_bulk_ids_come_as_a_range_or_as_the_list_the_server_gave() -> None:
    assert _bulk_ids((5, 9, None), 5) == [5, 6, 7, 8, 9]
    assert _bulk_ids((5, 12, [5, 7, 12]), 3) == [5, 7, 12]


def test_many_bulks_at_once_get_distinct_ids_in_order(
    bound: Forklift, conn: psycopg.Connection[Any]
) -> None:
    from concurrent.futures import ThreadPoolExecutor

    def load(k: int) -> list[int]:
        return plain.enqueue_many([{"k": k, "n": i} for i in range(500)])

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(load, range(8)))
    flat = [i for ids in results for i in ids]
    assert len(set(flat)) == len(flat) == 4000
    for k, ids in enumerate(results):
        got = conn.execute(
            "SELECT (args->>'k')::int, (args->>'n')::int FROM forklift.jobs"
            " WHERE id = ANY(%s) ORDER BY id", (ids,)
        ).fetchall()
        assert got == [(k, i) for i in range(500)]
        assert ids == sorted(ids)


@pytest.mark.parametrize("options", [{}, {"delay": 60.0}, {"at": datetime(2001, 1, 1, tzinfo=UTC)},
                                     {"priority": 9, "tags": ["x"], "meta": {"m": [1]}}])
def test_the_job_enqueue_returns_is_the_job_stored(bound: Forklift, options: dict[str, Any]) -> None:
    job = plain.enqueue({"b": 1, "a": [1.5, "é"], "n": None}, **options)
    stored = app.get_job(job.id)
    assert stored is not None and job == stored


def test_the_job_enqueue_async_returns_is_the_job_stored(bound: Forklift) -> None:
    import asyncio

    async def go() -> Any:
        try:
            return await plain.enqueue_async({"n": 1}, delay=5.0)
        finally:
            await app.aclose()

    job = asyncio.run(go())
    assert job == app.get_job(job.id)
