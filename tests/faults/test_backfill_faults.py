"""A backfill worker killed (SIGKILL) in the middle of a page: the next worker resumes at the
checkpoint; no page is applied twice and none is skipped (its writes share the checkpoint's
transaction)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
from apps import scheduled
from helpers import wait_until

from forklift.ops import backfills as ops
from forklift.ops.context import OpsContext

OPS = OpsContext(schema="forklift", actor="tester")


def test_killed_mid_page_resumes_at_the_checkpoint(
    dsn: str, conn: psycopg.Connection[Any], tmp_path: Path
) -> None:
    scheduled.setup(conn)
    marker = tmp_path / "page"
    ops.start(conn, OPS, "bf.items", definition=scheduled.app.backfills["bf.items"])
    with scheduled.procs(dsn, tmp_path) as started:
        a = scheduled.Proc(dsn, tmp_path / "a.log", BF_HANG_ITEM="95", BF_MARKER=str(marker))
        started.append(a)
        wait_until(marker.exists, timeout=30, message="the page never started")
        # The page of items 90..99 has written its rows but not committed them or its checkpoint.
        info = ops.get_backfill(conn, OPS, "bf.items")
        assert (info.pages_done, info.items_done, info.cursor) == (9, 90, 90)
        a.kill()
        b = scheduled.Proc(dsn, tmp_path / "b.log")
        started.append(b)
        done = wait_until(
            lambda: (i := ops.get_backfill(conn, OPS, "bf.items")).state == "completed" and i,
            timeout=60, message=lambda: f"not completed: {ops.get_backfill(conn, OPS, 'bf.items')}",
        )
    items = [r[0] for r in conn.execute("SELECT item FROM public.bf_items ORDER BY item")]
    assert items == list(range(scheduled.ITEMS))  # each item exactly once: none twice, none skipped
    assert (done.pages_done, done.items_done) == (scheduled.ITEMS // scheduled.PAGE, scheduled.ITEMS)
    # The killed attempt was rescued (lease expired) and resumed; then the run moved on to a
    # fresh job so later pages have their whole retry budget.
    jobs = conn.execute(
        "SELECT attempt, state, errors->0->>'code' FROM forklift.jobs"
        " WHERE kind = 'forklift.backfill' ORDER BY id"
    ).fetchall()
    assert jobs[0] == (2, "completed", "lease_expired")
    assert all(state == "completed" for _, state, _ in jobs)
