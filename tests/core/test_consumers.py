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

from forklift import Backoff, ConfigError, Forklift, Page, TableSource


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


#: How long a test waits for rows to be read. A table source reads a row only once every
#: transaction holding an xid that began before it has ended, on the whole server: other tests'
#: databases share it, and one of them may hold a writing transaction open for a while.
READ_WAIT = 120


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
        wait_until(lambda: consumer_row(db).get("caught_up_at") is not None, timeout=READ_WAIT,
                   message=lambda: f"not caught up: {consumer_row(db)}")
        assert applied(db) == list(range(1, 31))
        wait_until(lambda: job_state(db, job.id) == "completed", timeout=READ_WAIT)
        add(db, 5)
        again = apply.start()  # the run ended: a new one
        assert again is not None and again.id != job.id
        wait_until(lambda: consumer_row(db)["items_done"] == 35, timeout=READ_WAIT,
                   message=lambda: f"not applied: {consumer_row(db)}")
    row = consumer_row(db)
    assert (row["cursor"], row["items_done"], row["batches_done"], row["failures"]) == (35, 35, 6, 0)
    assert applied(db) == list(range(1, 36))


def test_a_table_source_waits_for_a_smaller_key_still_being_written(
    dsn: str, db: psycopg.Connection[Any]
) -> None:
    add(db, 3)
    source = TableSource("public.feed", columns=["body"])

    def read(cursor: Any) -> Page:
        with psycopg.connect(dsn, autocommit=True) as c, c.transaction():
            return source.read(cursor, 100, c)

    first = wait_until(lambda: (p := read(None)).items and p, timeout=READ_WAIT)
    assert [r["id"] for r in first.items] == [1, 2, 3] and first.cursor == 3
    assert set(first.items[0]) == {"id", "body"}  # the columns asked for, and the key
    with psycopg.connect(dsn) as slow:  # takes key 4 and does not commit yet
        slow.execute("INSERT INTO public.feed (body) VALUES ('slow')")
        add(db, 1)  # key 5, committed
        # Passing over 5 now would skip 4 for good: the read stops before both.
        assert read(3) == Page(items=(), cursor=3)
        slow.commit()
    later = wait_until(lambda: (p := read(3)).items and p, timeout=READ_WAIT)
    assert [r["id"] for r in later.items] == [4, 5] and later.cursor == 5



def test_a_writing_transaction_in_another_database_delays_the_read(
    dsn: str, admin_dsn: str, db: psycopg.Connection[Any]
) -> None:
    source = TableSource("public.feed")

    def read(cursor: Any) -> Page:
        with psycopg.connect(dsn, autocommit=True) as c, c.transaction():
            return source.read(cursor, 100, c)

    with psycopg.connect(admin_dsn) as elsewhere:  # the server's postgres database
        elsewhere.execute("SELECT pg_current_xact_id()")  # holds a transaction id, open
        add(db, 2)
        # The server's snapshot xmin is that transaction's: rows written since wait for it.
        assert read(None) == Page(items=(), cursor=None)
        elsewhere.rollback()
    got = wait_until(lambda: (p := read(None)).items and p, timeout=READ_WAIT)
    assert [r["id"] for r in got.items] == [1, 2]

def test_a_failing_batch_rolls_back_and_backs_off_by_its_streak(
    app: Forklift, db: psycopg.Connection[Any]
) -> None:
    seen: list[tuple[int, float | None]] = []
    policy = Backoff(kind="exponential", base=0.2, max=10.0, jitter="none")

    @app.consumer("feed", source=TableSource("public.feed"), batch_size=50, retry=policy)
    def apply(items: list[dict[str, Any]], conn: psycopg.Connection[Any]) -> None:
        conn.execute("INSERT INTO public.applied SELECT unnest(%s::bigint[])",
                     ([r["id"] for r in items],))
        row = consumer_row(db)
        gap = row["retry_at"] - row["failed_at"] if row["retry_at"] else None
        seen.append((row["failures"], gap.total_seconds() if gap else None))
        if len(seen) <= 3:
            raise RuntimeError("the downstream service is down")

    add(db, 4)
    with running_worker(app, concurrency=2):
        job = apply.start()
        assert job is not None
        wait_until(lambda: job_state(db, job.id) == "completed", timeout=READ_WAIT,
                   message=lambda: f"not done: {consumer_row(db)}")
    # Each failure grew the streak and its delay (0.2 s doubling); the success ended it.
    assert seen == [(0, None), (1, 0.2), (2, 0.4), (3, 0.8)]
    row = consumer_row(db)
    assert (row["failures"], row["retry_at"], row["cursor"]) == (0, None, 4)
    assert row["last_error"]["message"] == "the downstream service is down"
    assert applied(db) == [1, 2, 3, 4]  # the failed batches' writes rolled back with them
    errors = db.execute("SELECT attempt, jsonb_array_length(errors) FROM forklift.jobs"
                        " WHERE id = %s", (job.id,)).fetchone()
    assert errors == (4, 3)


def test_a_paused_consumer_starts_nothing_and_a_run_stops_before_reading(
    app: Forklift, db: psycopg.Connection[Any]
) -> None:
    reads: list[Any] = []

    class Counting:
        def read(self, cursor: Any, limit: int, conn: psycopg.Connection[Any]) -> Page:
            reads.append(cursor)
            return Page(items=(), cursor=cursor)

    @app.consumer("feed", source=Counting())
    def apply(items: list[Any], conn: psycopg.Connection[Any]) -> None:
        raise AssertionError("nothing to process")

    with running_worker(app, concurrency=1):
        job = apply.start()
        assert job is not None
        wait_until(lambda: job_state(db, job.id) == "completed", timeout=READ_WAIT)
        assert reads == [None]
        db.execute("UPDATE forklift.consumers SET paused = true WHERE name = 'feed'")
        assert apply.start() is None
        run = apply.kind.enqueue({})  # a run enqueued anyway stops at its first batch
        wait_until(lambda: job_state(db, run.id) == "completed", timeout=READ_WAIT)
    assert reads == [None]
    result = db.execute("SELECT result FROM forklift.jobs WHERE id = %s", (run.id,)).fetchone()
    assert result is not None and result[0]["stopped"] == "paused"


@pytest.mark.parametrize(("options", "field"), [
    ({"batch_size": 0}, "batch_size"),
    ({"batch_size": 10_001}, "batch_size"),
    ({"max_attempts": 0}, "max_attempts"),
    ({"slice_seconds": 0}, "slice_seconds"),
    ({"source": object()}, "source"),
    ({"retry": 5}, "retry"),
])
def test_a_bad_declaration_is_refused_naming_the_field(
    app: Forklift, options: dict[str, Any], field: str
) -> None:
    kwargs: dict[str, Any] = {"source": TableSource("public.feed"), **options}
    with pytest.raises(ConfigError) as refused:
        app.consumer("feed", **kwargs)(lambda items, conn: None)
    assert refused.value.detail.get("field") == field
    assert "feed" not in app.kinds  # nothing declared


def test_an_async_process_and_a_bad_table_name_are_refused(app: Forklift) -> None:
    async def process(items: list[Any], conn: Any) -> None: ...

    with pytest.raises(ConfigError, match="plain function"):
        app.consumer("feed", source=TableSource("public.feed"))(process)  # type: ignore[arg-type]
    with pytest.raises(ConfigError) as refused:
        TableSource("a.b.c")
    assert refused.value.detail["field"] == "table"


def test_the_supervisor_starts_a_run_and_waits_out_a_back_off(
    app: Forklift, db: psycopg.Connection[Any]
) -> None:
    @app.consumer("feed", source=TableSource("public.feed"), every="0 3 * * *")
    def apply(items: list[dict[str, Any]], conn: psycopg.Connection[Any]) -> None:
        conn.execute("INSERT INTO public.applied SELECT unnest(%s::bigint[])",
                     ([r["id"] for r in items],))

    assert apply.supervisor.name == "feed.supervisor" and apply.supervisor.cron == "0 3 * * *"
    add(db, 3)
    with running_worker(app, concurrency=2):
        tick = app.enqueue("forklift.consumers.supervise", {"consumer": "feed"})
        wait_until(lambda: applied(db) == [1, 2, 3], timeout=READ_WAIT,
                   message=lambda: f"applied {applied(db)}, the run {job_state(db, tick.id)}")
        assert job_state(db, tick.id) == "completed"
        unknown = app.enqueue("forklift.consumers.supervise", {"consumer": "nope"})
        wait_until(lambda: job_state(db, unknown.id) == "dead", timeout=READ_WAIT)
        code = db.execute("SELECT errors->-1->>'code' FROM forklift.jobs WHERE id = %s",
                          (unknown.id,)).fetchone()
        assert code == ("unknown_consumer",)
    # A consumer backing off: the next run is enqueued for when its back-off ends, not now.
    db.execute("UPDATE forklift.consumers SET failures = 4, failed_at = now(),"
               " retry_at = now() + interval '1 hour' WHERE name = 'feed'")
    later = apply.start()
    assert later is not None and later.state == "scheduled"
    due = db.execute("SELECT j.run_at = c.retry_at FROM forklift.jobs j, forklift.consumers c"
                     " WHERE j.id = %s AND c.name = 'feed'", (later.id,)).fetchone()
    assert due == (True,)
