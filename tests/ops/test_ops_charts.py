"""Operator.charts: per-bucket completed, failed attempts, deaths, pickup lag and run time
p50/p95, for all queues or one, in one statement whose plan is bounded by the window.

Expectations are placed by the buckets the call returns (not by the test's clock), so a minute
turning over between the inserts and the query moves nothing.
"""

from __future__ import annotations

import json
import os
from datetime import datetime, timedelta
from typing import Any

import psycopg
import pytest
from apps.ops import insert_job
from test_claim_plan import nodes

from forklift.ops import Operator
from forklift.ops import charts as ops_charts
from forklift.ops.charts import ChartSeries
from forklift.ops.errors import InvalidFilter


def db_now(conn: psycopg.Connection[Any]) -> datetime:
    row = conn.execute("SELECT now()").fetchone()
    assert row is not None
    return row[0]  # type: ignore[no-any-return]


def slot(series: ChartSeries, at: datetime) -> int:
    """The index of the bucket holding ``at``."""
    width = timedelta(seconds=series.bucket_seconds)
    found = [i for i, b in enumerate(series.buckets) if b <= at < b + width]
    assert len(found) == 1, (at, series.buckets[0], series.buckets[-1])
    return found[0]


def test_charts_give_each_bucket_its_counts_and_percentiles_for_all_queues_or_one(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    now = db_now(conn)
    minute = now.replace(second=0, microsecond=0)
    t1 = minute - timedelta(minutes=10) + timedelta(seconds=45)  # a finish 10 minutes ago
    t2 = minute - timedelta(minutes=5) + timedelta(seconds=45)
    for i in range(1, 5):  # run times 1..4 s, pickup lags 10..40 s
        started = t1 - timedelta(seconds=i)
        insert_job(conn, state="completed", queue="mail", attempted_at=started, finished_at=t1,
                   run_at=started - timedelta(seconds=10 * i))
    insert_job(conn, state="dead", queue="mail", attempted_at=t1 - timedelta(seconds=1),
               run_at=t1 - timedelta(seconds=1), finished_at=t1)
    for run in (100, 200):
        started = t2 - timedelta(seconds=run)
        insert_job(conn, state="completed", queue="reports", attempted_at=started,
                   finished_at=t2, run_at=started)
    picked = now - timedelta(minutes=3)
    insert_job(conn, state="running", queue="mail", attempted_at=picked,
               run_at=picked - timedelta(seconds=7), worker_id="w1")
    insert_job(conn, state="retryable", queue="mail", attempt=1,
               errors=[{"code": "error", "at": t1.isoformat(), "message": "boom"}])
    # finished two hours ago: outside the window
    insert_job(conn, state="completed", queue="mail", finished_at=now - timedelta(hours=2),
               attempted_at=now - timedelta(hours=2, seconds=5))

    with Operator(dsn) as op:
        every = op.charts(window=timedelta(hours=1), bucket=timedelta(minutes=1))
        mail = op.charts(window=timedelta(hours=1), bucket=timedelta(minutes=1), queue="mail")
        reports = op.charts(window=timedelta(hours=1), bucket=timedelta(minutes=1),
                            queue="reports")
        day = op.charts(window=timedelta(hours=24), bucket=timedelta(minutes=15))

    assert len(every.buckets) == 60 and every.queue is None and mail.queue == "mail"
    assert {"mail", "reports"} <= set(every.queues)
    a, b = slot(every, t1), slot(every, t2)
    assert (every.completed[a], every.dead[a], every.completed[b]) == (4, 1, 2)
    assert sum(every.completed) == 6 and sum(every.dead) == 1  # not the one 2 h ago
    assert every.run_p50[a] == pytest.approx(2.5)
    assert every.run_p95[a] == pytest.approx(3.85)  # percentile_cont: 1 + 0.95 x 3
    assert every.run_p50[b] == pytest.approx(150.0)
    assert every.failed[a] == 1 and sum(every.failed) == 1
    # Picked up 10 minutes ago: the four completed (lags 10..40 s) and the dead one (0 s).
    assert every.picked[a] == 5
    assert every.lag_p50[a] == pytest.approx(20.0)
    assert every.lag_p95[a] == pytest.approx(38.0)
    p = slot(every, picked)
    assert (every.picked[p], every.lag_p50[p]) == (1, pytest.approx(7.0))  # the running job
    # A bucket where nothing happened has no percentile, not a zero.
    quiet = next(i for i, n in enumerate(every.picked) if n == 0 and every.completed[i] == 0)
    assert every.lag_p95[quiet] is None and every.run_p95[quiet] is None

    assert (sum(mail.completed), sum(mail.failed), sum(mail.picked)) == (4, 1, 6)
    assert mail.run_p50[slot(mail, t2)] is None
    assert (sum(reports.completed), sum(reports.failed), sum(reports.dead)) == (2, 0, 0)
    assert reports.run_p95[slot(reports, t2)] == pytest.approx(195.0)

    assert len(day.buckets) == 96 and sum(day.completed) == 7  # the one 2 h ago too
    assert every.to_json()["lag_p95"][a] == pytest.approx(38.0)


def test_charts_refuse_a_bad_window_and_queue(dsn: str) -> None:
    with Operator(dsn) as op:
        with pytest.raises(InvalidFilter) as e:
            op.charts(window=timedelta(days=30), bucket=timedelta(seconds=1))
        assert e.value.code == "invalid_filter"
        with pytest.raises(InvalidFilter):
            op.charts(bucket=timedelta(milliseconds=10))
        with pytest.raises(InvalidFilter):
            op.charts(queue="mail\x00")


# -- the plan: bounded by the window, not by the history --------------------------------------
#: History rows outside the window (CHART_PLAN_ROWS=1000000 checks the plan at a million rows).
HISTORY = int(os.environ.get("CHART_PLAN_ROWS", "40000"))
IN_WINDOW = 600


@pytest.fixture
def history(conn: psycopg.Connection[Any]) -> psycopg.Connection[Any]:
    # A long history, finished days ago, and the window's few hundred jobs in two queues.
    conn.execute(
        "INSERT INTO forklift.jobs (queue, kind, state, attempt, run_at, created_at,"
        " attempted_at, finished_at)"
        " SELECT CASE WHEN i %% 2 = 0 THEN 'mail' ELSE 'reports' END, 'plan.job',"
        "        CASE WHEN i %% 50 = 0 THEN 'dead' ELSE 'completed' END, 1, t, t, t, t"
        "          + interval '1 second'"
        " FROM generate_series(1, %s) AS i,"
        "      LATERAL (SELECT now() - interval '3 days' + i * interval '1 ms' AS t) x",
        (HISTORY,),
    )
    conn.execute(
        "INSERT INTO forklift.jobs (queue, kind, state, attempt, run_at, created_at,"
        " attempted_at, finished_at)"
        " SELECT CASE WHEN i %% 2 = 0 THEN 'mail' ELSE 'reports' END, 'plan.job', 'completed',"
        "        1, t - interval '2 seconds', t, t, t + interval '1 second'"
        " FROM generate_series(1, %s) AS i,"
        "      LATERAL (SELECT now() - i * interval '5 seconds' AS t) x",
        (IN_WINDOW,),
    )
    return conn


def explain(conn: psycopg.Connection[Any], queue: str | None) -> dict[str, Any]:
    sql = ops_charts.render_sql(queue).replace("{s}", "forklift")
    p = ops_charts.params(timedelta(hours=1), timedelta(minutes=1), queue)
    row = conn.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, p).fetchone()
    assert row is not None
    doc = row[0] if not isinstance(row[0], str) else json.loads(row[0])
    return dict(doc[0]["Plan"])


def problems(plan: dict[str, Any]) -> list[str]:
    bad = []
    for node in nodes(plan):
        kind, rel = node.get("Node Type"), node.get("Relation Name")
        if rel != "jobs":
            continue
        loops = max(1, node.get("Actual Loops", 1))
        read = (node.get("Actual Rows", 0) + node.get("Rows Removed by Filter", 0)
                + node.get("Rows Removed by Index Recheck", 0)) * loops
        if kind in ("Seq Scan", "Bitmap Heap Scan") and read > IN_WINDOW:
            bad.append(f"{kind} read {read} rows")
        elif read > IN_WINDOW:
            bad.append(f"{kind} via {node.get('Index Name')} read {read} rows")
    return bad


@pytest.mark.parametrize("analyzed", [False, True], ids=["before-analyze", "after-analyze"])
def test_the_chart_statement_reads_only_the_window(
    history: psycopg.Connection[Any], analyzed: bool
) -> None:
    conn = history
    if analyzed:
        conn.execute("ANALYZE forklift.jobs")
    for queue in (None, "mail"):  # all queues, one queue
        plan = explain(conn, queue)
        bad = problems(plan)
        assert not bad, f"{queue}: {bad}\n{json.dumps(plan, indent=1)[:6000]}"
