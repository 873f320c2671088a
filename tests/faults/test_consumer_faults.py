"""Consumers against real worker processes: one killed with SIGKILL in the middle of a batch
resumes without skipping or applying a row twice (counted in the work's own table), and two
workers with several runs of one consumer enqueued never run two at once."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from apps import consumers
from helpers import wait_until


@pytest.fixture
def feed(dsn: str, conn: psycopg.Connection[Any]) -> Iterator[Any]:
    consumers.setup(conn)
    consumers.app.use(dsn)
    yield consumers.apply_feed
    consumers.app.close()


@pytest.fixture
def procs() -> Iterator[list[consumers.Proc]]:
    started: list[consumers.Proc] = []
    try:
        yield started
    finally:
        for p in started:
            p.stop()
        for i, p in enumerate(started):
            print(f"--- worker {i} (pid {p.popen.pid}) ---\n{p.log()}")


def row(conn: psycopg.Connection[Any]) -> tuple[Any, ...]:
    got = conn.execute("SELECT cursor, items_done, failures FROM forklift.consumers"
                       " WHERE name = 'feed'").fetchone()
    return tuple(got) if got is not None else ()


def applied(conn: psycopg.Connection[Any]) -> list[int]:
    return [r[0] for r in conn.execute("SELECT id FROM public.applied ORDER BY id")]


def test_killed_mid_batch_resumes_without_skipping_or_applying_twice(
    dsn: str, conn: psycopg.Connection[Any], feed: Any, procs: list[consumers.Proc],
    tmp_path: Path,
) -> None:
    marker = tmp_path / "batch"
    a = consumers.Proc(dsn, tmp_path / "a.log", FEED_HANG_ID="55", FEED_MARKER=str(marker))
    procs.append(a)
    first = feed.start()
    wait_until(marker.exists, timeout=30, message="the batch never started")
    # Rows 51..60 are applied in the batch's transaction, which has not committed: the
    # cursor and the work's table both stand at 50.
    assert row(conn)[:2] == (50, 50)
    assert applied(conn) == list(range(1, 51))
    a.kill()
    procs.append(consumers.Proc(dsn, tmp_path / "b.log"))
    wait_until(lambda: row(conn)[:2] == (consumers.ROWS, consumers.ROWS), timeout=60,
               message=lambda: f"not caught up: {row(conn)}")
    assert applied(conn) == list(range(1, consumers.ROWS + 1))  # each once: none twice, none skipped
    # The killed attempt was rescued after its lease expired and the same job went on.
    job = conn.execute("SELECT attempt, errors->0->>'code' FROM forklift.jobs WHERE id = %s",
                       (first.id,)).fetchone()
    assert job is not None and job[1] == "lease_expired" and job[0] >= 2


def test_one_run_at_a_time_across_two_workers(
    dsn: str, conn: psycopg.Connection[Any], feed: Any, procs: list[consumers.Proc],
    tmp_path: Path,
) -> None:
    procs.append(consumers.Proc(dsn, tmp_path / "a.log", FEED_SLOW="0.1"))
    procs.append(consumers.Proc(dsn, tmp_path / "b.log", FEED_SLOW="0.1"))
    runs = [feed.start()] + [feed.kind.enqueue({}) for _ in range(3)]  # four live runs
    assert len({r.id for r in runs}) == 4
    again = feed.start()  # the unique key: the live run, not a fifth
    assert again is not None and again.id == runs[0].id
    wait_until(
        lambda: conn.execute("SELECT count(*) FROM forklift.jobs WHERE kind = 'feed'"
                             " AND state <> 'completed'").fetchone() == (0,),
        timeout=90, message=lambda: f"runs not finished: {row(conn)}")
    assert applied(conn) == list(range(1, consumers.ROWS + 1))
    # Each batch counted the runs of `feed` running as it committed: never more than its own.
    seen = conn.execute("SELECT min(running), max(running), count(*) FROM public.overlap").fetchone()
    assert seen == (1, 1, consumers.ROWS // consumers.BATCH)
    pids = conn.execute("SELECT count(DISTINCT pid) FROM public.applied").fetchone()
    print(f"workers that applied rows: {pids}")
