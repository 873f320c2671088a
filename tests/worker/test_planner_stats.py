"""The leader analyzes the jobs table when its planner statistics describe a far smaller table
(never analyzed, or taken when it was nearly empty): a real worker as leader, autovacuum off for
the table so only the chore can do it."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from apps import basic
from helpers import wait_until

from forklift import Forklift
from forklift._worker.maintenance import planner_stats
from forklift._worker.maintenance.planner_stats import Seen, look, stale


@pytest.fixture
def app(dsn: str) -> Iterator[Forklift]:
    with basic.bound(dsn) as bound_app:
        yield bound_app


def _stats(conn: psycopg.Connection[Any]) -> tuple[float, int]:
    row = conn.execute("SELECT reltuples, relpages FROM pg_class"
                       " WHERE oid = 'forklift.jobs'::regclass").fetchone()
    assert row is not None
    return float(row[0]), int(row[1])


def _insert(conn: psycopg.Connection[Any], n: int) -> None:
    # Jobs in a queue the worker does not serve: they stay, and so does the table's size.
    conn.execute("INSERT INTO forklift.jobs (queue, kind) SELECT 'elsewhere', 'basic.noop'"
                 " FROM generate_series(1, %s)", (n,))


def _load(conn: psycopg.Connection[Any], n: int) -> None:
    """Commit ``n`` jobs and wait until the server counts them live (a backend reports its
    counts at the end of a transaction, at most once a second: these polls end some)."""
    _insert(conn, n)

    def live() -> int:
        row = conn.execute("SELECT pg_stat_get_live_tuples('forklift.jobs'::regclass)").fetchone()
        return int(row[0]) if row else 0

    wait_until(lambda: live() >= n, timeout=30,
               message=lambda: f"the server counts {live()} live rows, not {n}")


def test_what_counts_as_stale() -> None:
    rows = planner_stats.MIN_ROWS
    assert not stale(Seen(-1, 0, 100, rows - 1, False))  # small: the defaults do no harm
    assert stale(Seen(-1, 0, 100, rows, False))  # never analyzed
    assert stale(Seen(5000, 100, 100, 5000, False))  # vacuumed, never analyzed: no columns
    assert stale(Seen(0, 0, 100, 5000, True))  # analyzed while empty, loaded since
    assert stale(Seen(1000, 20, 20, 4001, True)) and not stale(Seen(1000, 20, 80, 4000, True))
    assert not stale(Seen(1e6, 5000, 5000, 1000, True))  # shrunk: autovacuum's business


def test_a_load_still_in_flight_is_not_analyzed_for_its_pages() -> None:
    # Its pages are there before its rows are visible: an ANALYZE now would see no rows.
    assert not stale(Seen(-1, 0, 800, 0, False))
    assert not stale(Seen(0, 0, 800, 0, True))


def test_without_counts_it_goes_by_pages() -> None:
    pages = planner_stats.MIN_PAGES
    assert not stale(Seen(-1, 0, pages - 1, 0, False, counts=False))
    assert stale(Seen(-1, 0, pages, 0, False, counts=False))
    assert stale(Seen(1000, 20, 81, 0, True, counts=False))
    assert not stale(Seen(1000, 20, 80, 0, True, counts=False))


def test_the_leader_analyzes_a_table_loaded_since_its_statistics(
    app: Forklift, dsn: str, conn: psycopg.Connection[Any]
) -> None:
    conn.execute("ALTER TABLE forklift.jobs SET (autovacuum_enabled = false)")
    conn.execute("ANALYZE forklift.jobs")  # statistics of an empty table
    assert _stats(conn) == (0.0, 0)
    _load(conn, 5000)
    with basic.running_worker(app, queues=["default"]) as worker:
        wait_until(lambda: worker.is_leader, message="the worker did not become the leader")
        chore = next(c for c in worker.chores if isinstance(c, planner_stats.PlannerStats))
        # The count goes up once the ANALYZE's transaction is back, after its commit.
        wait_until(lambda: chore.analyzed == 1 and _stats(conn)[0] >= 4500, timeout=30,
                   message=lambda: f"statistics still {_stats(conn)}, {chore.analyzed} runs")
        # The statistics it took describe the table: the rule sees nothing more to do.
        assert asyncio.run(_is_stale(dsn)) is False
        assert chore.analyzed == 1 and chore.failures == 0


def test_a_load_in_flight_waits_for_its_commit(
    app: Forklift, dsn: str, conn: psycopg.Connection[Any]
) -> None:
    conn.execute("ALTER TABLE forklift.jobs SET (autovacuum_enabled = false)")
    with psycopg.connect(dsn) as loader, \
            basic.running_worker(app, queues=["default"]) as worker:
        before = _stats(conn)
        _insert(loader, 5000)  # in the loader's open transaction: pages, but no visible rows
        wait_until(lambda: worker.is_leader, message="the worker did not become the leader")
        chore = next(c for c in worker.chores if isinstance(c, planner_stats.PlannerStats))
        seen = chore.looks
        wait_until(lambda: chore.looks >= seen + 3, message="the chore stopped looking")
        # An ANALYZE now would count none of the rows and leave statistics of an empty table.
        assert chore.analyzed == 0 and _stats(conn) == before
        loader.commit()
        wait_until(lambda: chore.analyzed == 1 and _stats(conn)[0] >= 4500, timeout=30,
                   message=lambda: f"statistics still {_stats(conn)}, {chore.analyzed} runs")


async def _is_stale(dsn: str) -> bool:
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as c:
        return (await look(c, "forklift"))[0]


def test_a_role_that_may_not_analyze_is_seen_as_such(
    conn: psycopg.Connection[Any], dsn: str
) -> None:
    role = f"forklift_reader_{conn.info.backend_pid}"
    conn.execute(f"CREATE ROLE {role}")
    try:
        conn.execute(f"GRANT USAGE ON SCHEMA forklift TO {role}")
        # Autovacuum would analyze a load this size on its own, and the statistics be fresh.
        conn.execute("ALTER TABLE forklift.jobs SET (autovacuum_enabled = false)")
        _load(conn, 2000)

        async def seen() -> tuple[bool, bool, str]:
            async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as c:
                await c.execute(f"SET ROLE {role}")
                return await look(c, "forklift")

        is_stale, may, what = asyncio.run(seen())
        assert is_stale and not may, what
    finally:
        conn.execute(f"REVOKE ALL ON SCHEMA forklift FROM {role}")
        conn.execute(f"DROP ROLE {role}")
