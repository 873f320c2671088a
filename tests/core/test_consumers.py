"""Consumers with an in-process worker on a real database: batches applied once with their
cursor, a table source that waits for a smaller key still being written, back-off after
failures, pause, and the declaration's refusals."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from apps.basic import running_worker
from helpers import wait_until

from forklift import Forklift
from forklift._features.consumers.table import TableSource


@pytest.fixture
def db(conn: psycopg.Connection[Any]) -> psycopg.Connection[Any]:
    conn.execute("CREATE TABLE public.feed (id bigserial PRIMARY KEY, body text NOT NULL)")
    conn.execute("CREATE TABLE public.applied (id bigint NOT NULL)")
    return conn


@pytest.fixture
def app(dsn: str) -> Iterator[Forklift]:
    a = Forklift(dsn)
    yield a
    a.close()


def add(conn: psycopg.Connection[Any], n: int) -> None:
    conn.execute("INSERT INTO public.feed (body) SELECT 'row ' || g FROM generate_series(1, %s) g",
                 (n,))


def applied(conn: psycopg.Connection[Any]) -> list[int]:
    return [r[0] for r in conn.execute("SELECT id FROM public.applied ORDER BY id")]


def job_state(conn: psycopg.Connection[Any], job_id: int) -> str | None:
    got = conn.execute("SELECT state FROM forklift.jobs WHERE id = %s", (job_id,)).fetchone()
    return str(got[0]) if got else None


def consumer_row(conn: psycopg.Connection[Any], name: str = "feed") -> dict[str, Any]:
    with conn.cursor(row_factory=psycopg.rows.dict_row) as cur:
        got = cur.execute("SELECT * FROM forklift.consumers WHERE name = %s", (name,)).fetchone()
    return dict(got) if got else {}


def test_batches_apply_once_and_the_cursor_follows(app: Forklift, db: psycopg.Connection[Any]) -> None:
    @app.consumer("feed", source=TableSource("public.feed"), batch_size=7, slice_seconds=0.05)
    def apply(items: list[dict[str, Any]], conn: psycopg.Connection[Any]) -> None:
        conn.execute("INSERT INTO public.applied SELECT unnest(%s::bigint[])",
                     ([r["id"] for r in items],))

    add(db, 30)
    with running_worker(app, concurrency=2):
        job = apply.start()
        assert job is not None
        wait_until(lambda: consumer_row(db).get("caught_up_at") is not None, timeout=30,
                   message=lambda: f"not caught up: {consumer_row(db)}")
        assert applied(db) == list(range(1, 31))
        wait_until(lambda: job_state(db, job.id) == "completed", timeout=30)
        add(db, 5)
        again = apply.start()  # the run ended: a new one
        assert again is not None and again.id != job.id
        wait_until(lambda: consumer_row(db)["items_done"] == 35, timeout=30,
                   message=lambda: f"not applied: {consumer_row(db)}")
    row = consumer_row(db)
    assert (row["cursor"], row["items_done"], row["batches_done"], row["failures"]) == (35, 35, 6, 0)
    assert applied(db) == list(range(1, 36))
