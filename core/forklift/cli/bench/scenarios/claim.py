"""Claim rate against the backlog: 5,000 and 500,000 available jobs, before and after ANALYZE.

A default worker drains the first jobs of each backlog; the rate is the number it claimed over
the span of their claims (``attempted_at``, the server's clock), so start-up is not counted.
"Before ANALYZE" is the freshly loaded table with autovacuum held off (no statistics yet, as
after a bulk load); "after" is the same table, topped up again, once ANALYZE has run. The
figure's ratio is the one of the two (large over small backlog) farthest from 1.

The "before" drains run a worker that may not lead (``Worker(lead=False)``): a leader's
``planner-stats`` chore analyzes a freshly loaded table within seconds, at a moment of its own
(the server's live-row counts arrive up to 10 s late from an idle loader), so with leading
workers "before" measured that moment as much as the claim (0.30x, 0.86x, 0.33x and 1.40x
in four runs of the same code). A non-leading worker leaves the table as a bulk load leaves it
where no forklift leader runs, which is what "before" means to measure.

Why the measurement is taken this way: a drain of 4,000 jobs lasts a few tenths of a second,
and a fresh worker spends the first of them sizing its buffer from a completion rate it has yet
to see, so one drain's rate swung by 2x from run to run (0.74x and 1.94x on the same code).
Each figure is now the median of ``ROUNDS`` drains, the two backlogs drained in alternation
(so a change of load hits both alike), each rate read over the drain's claims after its first
fifth (the warm-up), and the backlog topped up to its size before every drain.
"""

from __future__ import annotations

import statistics
from datetime import datetime
from typing import Any

import psycopg

from forklift.cli.bench.measure import Bench, copy_jobs
from forklift.cli.bench.procs import procs, wait
from forklift.cli.bench.registry import scenario
from forklift.cli.bench.report import Figure, Target

#: Drains per backlog and condition (before, after ANALYZE); the figure takes their median.
ROUNDS = 5
#: The share of a drain's first claims left out of its rate (the worker's warm-up).
WARM_UP = 0.2


def _claim_rate(conn: psycopg.Connection[Any], skip: int, n: int, since: datetime) -> float:
    """Jobs per second over claims ``skip`` to ``n`` made after ``since`` (the server's clock)."""
    row = conn.execute(
        "SELECT count(*), extract(epoch FROM max(a) - min(a))::float8 FROM ("
        " SELECT attempted_at AS a FROM forklift.jobs WHERE attempted_at > %s"
        " ORDER BY attempted_at LIMIT %s OFFSET %s) s", (since, n - skip, skip)
    ).fetchone()
    assert row is not None
    return float(row[0]) / float(row[1]) if row[1] else 0.0


def _finished_since(conn: psycopg.Connection[Any], since: datetime) -> int:
    """Jobs completed since ``since``, read from the stats window's index: the drain's own rows.
    (A count of every completed job, polled every 50 ms, read the whole large table: 10-17 ms
    of the server's time a poll, a fifth of a core taken from the large backlog's drains
    only.)"""
    row = conn.execute("SELECT count(*) FROM forklift.jobs WHERE state = 'completed'"
                       " AND finished_at > %s", (since,)).fetchone()
    return int(row[0]) if row else 0


def _drain(dsn: str, conn: psycopg.Connection[Any], n: int, *, lead: bool) -> float:
    """Start a default worker (one that may not lead, with ``lead`` false), let it finish
    ``n`` jobs, stop it; its claim rate."""
    row = conn.execute("SELECT clock_timestamp()").fetchone()
    assert row is not None
    since: datetime = row[0]
    with procs("worker_main", dsn, 1, settings=None if lead else {"lead": False}) as workers:
        wait("the worker to drain its share", lambda: _finished_since(conn, since) >= n, 600.0,
             workers, 0.05)
    return _claim_rate(conn, int(n * WARM_UP), n, since)


def _top_up(conn: psycopg.Connection[Any], size: int, start: int) -> None:
    """Load available jobs until the backlog holds ``size`` again (ids from ``start``)."""
    row = conn.execute("SELECT count(*) FROM forklift.jobs WHERE state = 'available'").fetchone()
    left = int(row[0]) if row else 0
    if left < size:
        copy_jobs(conn, "forklift.jobs", "bench.noop", start, size - left)


@scenario("claim_backlog", figures=("claim_backlog",), order=80)
def claim_backlog(bench: Bench) -> list[Figure]:
    small, large = bench.sizes.backlog_small, bench.sizes.backlog_large
    n = int(small * 0.8)
    rates: dict[str, dict[int, list[float]]] = {
        "before": {small: [], large: []}, "after": {small: [], large: []}}
    with bench.database(f"backlog{small}") as (dsn_s, conn_s), \
            bench.database(f"backlog{large}") as (dsn_l, conn_l):
        sides = ((small, dsn_s, conn_s), (large, dsn_l, conn_l))
        for _, _, conn in sides:
            conn.execute("ALTER TABLE forklift.jobs SET (autovacuum_enabled = off)")
        loaded = 0
        for condition in ("before", "after"):
            if condition == "after":
                for _, _, conn in sides:
                    conn.execute("ANALYZE forklift.jobs")
            for _ in range(ROUNDS):
                for size, dsn, conn in sides:
                    _top_up(conn, size, loaded)
                    rates[condition][size].append(
                        _drain(dsn, conn, n, lead=condition == "after"))
                loaded += large
    median = {c: {s: statistics.median(v) for s, v in by.items()} for c, by in rates.items()}
    ratios = [median[c][large] / median[c][small] if median[c][small] else 0.0
              for c in ("before", "after")]
    worst = max(ratios, key=lambda r: abs(r - 1.0))
    k = ratios.index(worst)
    cond = ("before", "after")[k]
    return [Figure(
        "claim_backlog", f"claim rate, {large:,} against {small:,} available", "jobs/s",
        median[cond][large], median[cond][small], f"{small:,} backlog", ratio=worst,
        rule=Target("within", 0.10),
        detail={"claimed": n, "rounds": ROUNDS, "warm_up_skipped": int(n * WARM_UP),
                "before_analyze": {"large": median["before"][large],
                                   "small": median["before"][small]},
                "after_analyze": {"large": median["after"][large],
                                  "small": median["after"][small]},
                "each_drain": {c: {"large": rates[c][large], "small": rates[c][small]}
                               for c in ("before", "after")},
                "ratios": ratios},
    )]
