"""The leader killed (SIGKILL) at the moment it fires a tick: the tick is still enqueued, once."""

from __future__ import annotations

import itertools
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from apps import scheduled
from helpers import wait_until


def leader_of(conn: psycopg.Connection[Any]) -> str | None:
    row = conn.execute(
        "SELECT worker_id FROM forklift.leader WHERE name = 'leader' AND expires_at > now()"
    ).fetchone()
    return str(row[0]) if row else None


def ticks(conn: psycopg.Connection[Any]) -> list[tuple[datetime, int | None]]:
    return conn.execute(
        "SELECT tick_at, job_id FROM forklift.schedule_ticks WHERE schedule = 'beat' ORDER BY tick_at"
    ).fetchall()


@pytest.mark.parametrize("point", ["before_commit", "after_commit"])
def test_leader_killed_at_fire_time_enqueues_the_tick_exactly_once(
    dsn: str, conn: psycopg.Connection[Any], tmp_path: Path, point: str
) -> None:
    marker = tmp_path / "tick"
    with scheduled.procs(dsn, tmp_path) as started:
        a = scheduled.Proc(dsn, tmp_path / "a.log", CRON_HANG=point, CRON_MARKER=str(marker))
        started.append(a)
        a_id = wait_until(lambda: a.worker_id(conn), timeout=30, message="A did not register")
        wait_until(lambda: leader_of(conn) == a_id, timeout=30, message="A never led")
        b = scheduled.Proc(dsn, tmp_path / "b.log")
        started.append(b)
        b_id = wait_until(lambda: b.worker_id(conn), timeout=30, message="B did not register")
        wait_until(marker.exists, timeout=30, message="A never fired a tick")
        a.kill()  # in the middle of firing: inside its transaction, or just after its commit
        tick = datetime.fromisoformat(marker.read_text())
        wait_until(lambda: leader_of(conn) == b_id, timeout=30, message="B never took over")
        wait_until(lambda: any(t >= tick + timedelta(seconds=4) for t, _ in ticks(conn)),
                   timeout=30, message="B fired nothing after the kill")
    jobs = conn.execute(
        "SELECT id, meta->>'tick' FROM forklift.jobs WHERE kind = 'sched.beat' ORDER BY id"
    ).fetchall()
    assert [i for i, t in jobs if t == tick.isoformat()] != []
    assert len([i for i, t in jobs if t == tick.isoformat()]) == 1
    rows = ticks(conn)
    assert sorted(j for _, j in rows) == sorted(i for i, _ in jobs)
    assert len({t for _, t in jobs}) == len(jobs)
    # catch_up: the tick A died on is there, and no tick around it is missing.
    times = [t for t, _ in rows]
    assert tick in times
    assert all(b - a == timedelta(seconds=2) for a, b in itertools.pairwise(times))
