"""Claim rate against the backlog: 5,000 and 500,000 available jobs, before and after ANALYZE.

A default worker drains the first jobs of each backlog; the rate is the number it claimed over
the span of their claims (``attempted_at``, the server's clock), so start-up is not counted.
"Before ANALYZE" is the freshly loaded table with autovacuum held off (no statistics yet, as
after a bulk load); "after" is the same table, half drained, once ANALYZE has run. The figure's
ratio is the one of the two (large over small backlog) farthest from 1.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import psycopg

from forklift_console.bench.measure import Bench, completed, copy_jobs
from forklift_console.bench.procs import procs, wait
from forklift_console.bench.registry import scenario
from forklift_console.bench.report import Figure, Target


def _claim_rate(conn: psycopg.Connection[Any], n: int, since: datetime) -> float:
    """Jobs per second over the first ``n`` claims made after ``since`` (the server's clock)."""
    row = conn.execute(
        "SELECT count(*), extract(epoch FROM max(a) - min(a))::float8 FROM ("
        " SELECT attempted_at AS a FROM forklift.jobs WHERE attempted_at > %s"
        " ORDER BY attempted_at LIMIT %s) s", (since, n)
    ).fetchone()
    assert row is not None
    return float(row[0]) / float(row[1]) if row[1] else 0.0


def _drain(dsn: str, conn: psycopg.Connection[Any], n: int) -> float:
    """Start a default worker, let it finish ``n`` jobs, stop it; its claim rate."""
    target = completed(conn) + n
    row = conn.execute("SELECT clock_timestamp()").fetchone()
    assert row is not None
    since: datetime = row[0]
    with procs("worker_main", dsn, 1) as workers:
        wait("the worker to drain its share", lambda: completed(conn) >= target, 600.0,
             workers, 0.05)
    return _claim_rate(conn, n, since)


def _backlog(bench: Bench, size: int, n: int) -> tuple[float, float]:
    """(rate before ANALYZE, rate after) draining ``n`` jobs from a backlog of ``size``."""
    with bench.database(f"backlog{size}") as (dsn, conn):
        conn.execute("ALTER TABLE forklift.jobs SET (autovacuum_enabled = off)")
        copy_jobs(conn, "forklift.jobs", "bench.noop", 0, size)
        before = _drain(dsn, conn, n)
        # Top the backlog up to its size again, so "after" claims from as many jobs.
        left = conn.execute("SELECT count(*) FROM forklift.jobs WHERE state = 'available'"
                            ).fetchone()
        copy_jobs(conn, "forklift.jobs", "bench.noop", size, size - int(left[0] if left else 0))
        conn.execute("ANALYZE forklift.jobs")
        after = _drain(dsn, conn, n)
    return before, after


@scenario("claim_backlog", figures=("claim_backlog",), order=80)
def claim_backlog(bench: Bench) -> list[Figure]:
    small, large = bench.sizes.backlog_small, bench.sizes.backlog_large
    n = int(small * 0.8)
    s_before, s_after = _backlog(bench, small, n)
    l_before, l_after = _backlog(bench, large, n)
    ratios = [l_before / s_before if s_before else 0.0, l_after / s_after if s_after else 0.0]
    worst = max(ratios, key=lambda r: abs(r - 1.0))
    k = ratios.index(worst)
    return [Figure(
        "claim_backlog", f"claim rate, {large:,} against {small:,} available", "jobs/s",
        (l_before, l_after)[k], (s_before, s_after)[k], f"{small:,} backlog", ratio=worst,
        rule=Target("within", 0.10),
        detail={"claimed": n, "before_analyze": {"large": l_before, "small": s_before},
                "after_analyze": {"large": l_after, "small": s_after}, "ratios": ratios},
    )]
