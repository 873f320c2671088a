"""The starvation alarm: the oldest waiting job of each queue and priority, read from the claim
index without scanning the backlog; past the threshold it is a health alert (text, --json and
its exit code), a metric, and an alert on the console's Overview; below it, none."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from apps.ops import insert_job
from typer.testing import CliRunner

from forklift import metrics
from forklift.cli.main import app as cli
from forklift.ops import Operator, OpsContext
from forklift.ops import health as h
from forklift.ops.settings import InvalidSetting
from forklift.ops.starvation import OLDEST_SQL, OldestWait, oldest_waits

CTX = OpsContext(actor="tester")


def run(dsn: str, *args: str) -> Any:
    return CliRunner().invoke(cli, list(args), env={"FORKLIFT_DSN": dsn})


def starving(conn: psycopg.Connection[Any], queue: str = "mail", minutes: float = 30) -> int:
    """A low-priority job waiting ``minutes`` behind fresh high-priority ones."""
    now = datetime.now(UTC)
    insert_job(conn, queue=queue, priority=0, run_at=now)
    return insert_job(conn, queue=queue, priority=5, run_at=now - timedelta(minutes=minutes))


def plan_of(conn: psycopg.Connection[Any]) -> dict[str, Any]:
    sql = OLDEST_SQL.replace("{s}", "forklift")
    got = conn.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + sql,
                       {"cap": 1000}).fetchone()
    assert got is not None
    return dict(got[0][0])


def nodes(plan: dict[str, Any]) -> list[dict[str, Any]]:
    out = [plan]
    for child in plan.get("Plans", []):
        out += nodes(child)
    return out


def test_the_read_walks_the_claim_index_not_the_backlog(conn: psycopg.Connection[Any]) -> None:
    # 100k waiting jobs over 4 queues, 5 kinds and 5 priorities, and as many finished ones.
    conn.execute("""
        INSERT INTO forklift.jobs (queue, kind, priority, state, run_at, finished_at)
        SELECT 'q' || ((i / 2) % 4), 'k' || ((i / 8) % 5), (i / 40) % 5,
               CASE WHEN i % 2 = 0 THEN 'available' ELSE 'completed' END,
               now() - make_interval(secs => i),
               CASE WHEN i % 2 = 0 THEN NULL ELSE now() END
        FROM generate_series(1, 200000) i""")
    conn.execute("ANALYZE forklift.jobs")
    plan = plan_of(conn)["Plan"]
    scans = nodes(plan)
    assert not [n for n in scans if n["Node Type"] == "Seq Scan"
                and n.get("Relation Name") == "jobs"], scans
    assert {n.get("Index Name") for n in scans if "Index Name" in n} == {"jobs_claim_idx"}
    # One descent per (queue, kind, priority) group, not a read of the 100k entries.
    touched = sum(n.get("Shared Hit Blocks", 0) + n.get("Shared Read Blocks", 0)
                  for n in scans if "Index Name" in n)
    assert touched < 2_000, touched
    waits = oldest_waits(conn, CTX)
    assert len(waits) == 4 * 5  # every queue has jobs of every priority
    expected = conn.execute("""
        SELECT queue, priority, min(run_at) FROM forklift.jobs WHERE state = 'available'
        GROUP BY 1, 2 ORDER BY 1, 2""").fetchall()
    assert [(w.queue, w.priority) for w in waits] == [(q, p) for q, p, _ in expected]
    oldest = {(q, p): at for q, p, at in expected}
    now = conn.execute("SELECT now()").fetchone()
    assert now is not None
    for w in waits:  # its wait is that of the oldest job of its group
        assert w.wait_seconds == pytest.approx(
            (now[0] - oldest[(w.queue, w.priority)]).total_seconds(), abs=60)


def test_a_starving_queue_is_a_health_alert_with_advice(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    starving(conn, "mail", minutes=30)
    insert_job(conn, queue="fresh", priority=9)  # waiting, but not long
    report = h.health(conn, CTX)
    alerts = [a for a in report.alerts if a.code == "starvation"]
    assert [(a.subject, a.level) for a in alerts] == [("mail", "warning")]
    assert "priority 5" in alerts[0].message
    assert "forklift queues aging mail 30s" in alerts[0].action
    check = next(c for c in report.checks if c.name == "starvation")
    assert check.level == "warning" and "queue mail, priority 5" in check.summary
    # Aging on: the advice is capacity, not aging again.
    with Operator(dsn, actor="ops") as op:
        op.queues.set_aging("mail", "1m")
    alert = next(a for a in h.health(conn, CTX).alerts if a.code == "starvation")
    assert "priority aging is on (a step every 60s)" in alert.action
    assert "forklift queues aging" not in alert.action
    # Ten times past the threshold it is critical.
    assert next(a for a in h.health(conn, CTX, overrides={"starvation_seconds": 60}).alerts
                if a.code == "starvation").level == "critical"


def test_below_the_threshold_there_is_no_alert(dsn: str, conn: psycopg.Connection[Any]) -> None:
    starving(conn, "mail", minutes=5)
    report = h.health(conn, CTX)
    assert not [a for a in report.alerts if a.code == "starvation"]
    assert next(c for c in report.checks if c.name == "starvation").level == "ok"
    assert [(w.queue, w.priority) for w in report.oldest_waits] == [("mail", 0), ("mail", 5)]
    calm = run(dsn, "health", "--json")
    assert calm.exit_code == 0, calm.stdout
    assert "starvation" not in {a["code"] for a in json.loads(calm.stdout)["alerts"]}


def test_the_cli_reports_it_and_exits_with_its_level(dsn: str, conn: psycopg.Connection[Any]
                                                     ) -> None:
    starving(conn, "mail", minutes=30)
    got = run(dsn, "health", "--json")
    assert got.exit_code == 1, got.stdout  # warning
    data = json.loads(got.stdout)
    (alert,) = [a for a in data["alerts"] if a["code"] == "starvation"]
    assert alert["subject"] == "mail" and alert["level"] == "warning"
    assert {"queue": "mail", "priority": 5} .items() <= next(
        w for w in data["oldest_waits"] if w["priority"] == 5).items()
    text = run(dsn, "health", "--fail-on-alert")
    assert text.exit_code == 1
    assert "starvation" in text.stdout and "forklift queues aging mail 30s" in text.stdout
    # A higher threshold, stored: no alert any more.
    assert run(dsn, "health", "set", "starvation_seconds", "3600").exit_code == 0
    assert run(dsn, "health", "--json").exit_code == 0


def test_the_threshold_is_stored_audited_and_refused_when_absurd(
    conn: psycopg.Connection[Any]
) -> None:
    assert h.thresholds(conn, CTX)["starvation_seconds"] == 600
    h.set_threshold(conn, CTX, "starvation_seconds", 120, reason="tighter")
    assert h.thresholds(conn, CTX)["starvation_seconds"] == 120
    row = conn.execute("SELECT action, target->>'name', reason FROM forklift.audit"
                       " ORDER BY id DESC LIMIT 1").fetchone()
    assert row == ("setting", "health.starvation_seconds", "tighter")
    for absurd in (0, -5, 1e9):
        with pytest.raises(InvalidSetting, match="starvation_seconds"):
            h.set_threshold(conn, CTX, "starvation_seconds", absurd)
    assert h.thresholds(conn, CTX)["starvation_seconds"] == 120


def test_the_leaders_sample_exports_each_queue_and_prioritys_oldest_wait(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    starving(conn, "mail", minutes=30)

    def sample() -> None:
        async def go() -> None:
            async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as aconn:
                await metrics._sample_depth("forklift")(aconn)

        asyncio.run(go())

    def gauge(priority: str) -> float | None:
        return metrics.registry.get_sample_value(
            "forklift_queue_oldest_wait_seconds", {"queue": "mail", "priority": priority})

    sample()
    assert (gauge("5") or 0) >= 30 * 60
    assert (gauge("0") or 0) < 60
    conn.execute("DELETE FROM forklift.jobs WHERE priority = 5")
    sample()
    assert gauge("5") is None  # nothing waits there any more: the series is gone
    assert gauge("0") is not None


def test_the_console_overview_shows_a_starving_queue(dsn: str, conn: psycopg.Connection[Any]
                                                     ) -> None:
    from console_seed import drive, loaded, make_app
    from textual.widgets import OptionList

    starving(conn, "mail", minutes=30)
    insert_job(conn, queue="fresh", priority=9)

    async def scenario(app: Any, pilot: Any) -> None:
        overview = app.views["overview"]
        await loaded(app, overview)
        box = overview.query_one("#alerts", OptionList)
        lines = [str(box.get_option_at_index(i).prompt) for i in range(box.option_count)]
        starved = [line for line in lines if "starving" in line]
        assert len(starved) == 1, lines
        assert "queue mail starving: a priority 5 job has waited 30" in starved[0]
        assert "forklift queues aging mail 30s" in starved[0]

    drive(make_app(dsn), scenario)


def test_the_console_shows_no_starvation_below_the_threshold(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    from forklift_console.screens.insight import health_alerts

    starving(conn, "mail", minutes=5)
    assert not [a for a in health_alerts(h.health(conn, CTX)) if "starving" in a.text.plain]
    waits = [OldestWait("mail", 5, 700.0)]
    (alert,) = health_alerts(h.health(conn, CTX, overrides={"starvation_seconds": 60}))
    assert alert.jobs_filter == "queue:mail state:available"
    assert h.starvation_alerts(waits, 600)[0].subject == "mail"
