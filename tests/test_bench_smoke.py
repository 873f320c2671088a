"""`forklift bench` runs end to end and reports every figure (tiny sizes; times never asserted)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from typing import Any

import psycopg

from forklift_console.bench import SCENARIOS, format_report, run_bench, tiny_sizes

KEYS = {"e2e", "e2e_2w", "db_cpu", "client_cpu", "enqueue", "bulk", "latency_p50",
        "latency_p99", "memory", "flow_keyed", "flow_fair"}


def _scratch_left(conn: psycopg.Connection[Any]) -> list[str]:
    rows = conn.execute(
        "SELECT datname FROM pg_database WHERE datname LIKE 'forklift\\_bench\\_%%'"
    ).fetchall()
    return [r[0] for r in rows]


def test_every_scenario_reports_its_figures(dsn: str, conn: psycopg.Connection[Any]) -> None:
    before = set(_scratch_left(conn))
    report = run_bench(dsn, quick=True, sizes=tiny_sizes())
    assert report.errors == {}
    assert {f.key for f in report.figures} == KEYS
    for f in report.figures:
        assert f.title and f.unit and f.target, f
        if f.key in ("db_cpu", "client_cpu") and not report.server.local:
            continue
        assert f.forklift is not None and math.isfinite(f.forklift) and f.forklift >= 0, f
        if f.key != "memory":
            assert f.reference is not None and math.isfinite(f.reference), f
        if f.key in ("e2e", "e2e_2w", "enqueue", "bulk", "latency_p50", "latency_p99", "memory"):
            assert f.ratio is not None and f.ok is not None, f
    by_key = {f.key: f for f in report.figures}
    assert by_key["e2e"].detail["jobs"] == tiny_sizes().e2e_jobs
    assert by_key["latency_p50"].detail["samples"] == tiny_sizes().latency_jobs
    assert by_key["memory"].detail["jobs"] == tiny_sizes().memory_jobs
    assert report.server.fsync in ("on", "off") and report.server.version
    assert report.machine["cpus"] >= 1
    json.dumps(report.to_json())  # serialisable as it is
    text = format_report(report)
    assert "end-to-end no-op, 1 worker" in text and "fsync=" in text
    assert set(_scratch_left(conn)) == before  # every scratch database was dropped


def test_scenarios_can_be_chosen_and_unknown_ones_are_refused(dsn: str) -> None:
    report = run_bench(dsn, scenarios=["bulk"], sizes=tiny_sizes())
    assert [f.key for f in report.figures] == ["bulk"]
    try:
        run_bench(dsn, scenarios=["nope"])
    except ValueError as exc:
        assert "nope" in str(exc) and all(s in str(exc) for s in SCENARIOS)
    else:
        raise AssertionError("an unknown scenario was accepted")


def test_the_command_prints_json_and_refuses_unknown_scenarios(dsn: str) -> None:
    cli = [sys.executable, "-m", "forklift_console.cli", "bench", "--dsn", dsn]
    bad = subprocess.run([*cli, "--only", "nope"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "nope" in bad.stderr
    done = subprocess.run([*cli, "--only", "enqueue", "--quick", "--json"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert [f["key"] for f in doc["figures"]] == ["enqueue"]
    assert doc["server"]["fsync"] in ("on", "off") and doc["errors"] == {}
