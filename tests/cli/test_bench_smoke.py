"""`forklift bench` runs end to end and reports every figure (tiny sizes; times never asserted)."""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import math
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import psycopg
import pytest
from helpers import wait_until

from forklift._db.embedded import files
from forklift.cli.bench import (
    SCENARIOS,
    TABLE_KEYS,
    Figure,
    Target,
    format_report,
    registry,
    run_bench,
    tiny_sizes,
)

#: The main performance table, in its order, then the further figures the bench reports.
KEYS = ["e2e", "e2e_preloaded", "client_cpu", "c1", "enqueue", "enqueue_16", "bulk_1000",
        "bulk_10000", "latency_p50", "latency_p99", "e2e_4w", "stats_1m", "claim_backlog",
        "e2e_2w", "e2e_8w", "db_cpu", "memory", "flow_keyed", "flow_fair", "wake", "e2e_unused"]
#: Figures whose target is on their own value: the reference is there for reading only.
ABSOLUTE = {"client_cpu", "stats_1m", "wake"}


@pytest.fixture(autouse=True)
def _one_bench_at_a_time() -> Iterator[None]:
    """These tests check the bench's scratch databases server-wide, and every pytest process
    on this machine (xdist workers, another run) shares the test server: one bench at a time."""
    with open(Path(tempfile.gettempdir()) / "forklift-bench-smoke.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _scratch_left(conn: psycopg.Connection[Any]) -> list[str]:
    rows = conn.execute(
        "SELECT datname FROM pg_database WHERE datname LIKE 'forklift\\_bench\\_%%'"
    ).fetchall()
    return [r[0] for r in rows]


def test_every_scenario_reports_its_figures(dsn: str, conn: psycopg.Connection[Any]) -> None:
    before = set(_scratch_left(conn))
    report = run_bench(dsn, quick=True, sizes=tiny_sizes())
    assert report.errors == {}
    assert [f.key for f in report.figures] == KEYS
    assert tuple(KEYS[:len(TABLE_KEYS)]) == TABLE_KEYS
    for f in report.figures:
        assert f.title and f.unit and f.target, f
        if f.key in ("db_cpu", "client_cpu") and not report.server.local:
            continue
        assert f.forklift is not None and math.isfinite(f.forklift) and f.forklift >= 0, f
        assert f.reference is not None and math.isfinite(f.reference), f
        # every figure of the table is judged against its target
        assert f.ok is not None and f.verdict in ("PASS", "SHORT"), f
        assert f.target != "reported", f
        # (the plain loop's server CPU can read 0 at these tiny sizes: psutil counts in clock
        # ticks, and there is no ratio to 0)
        if f.key not in ABSOLUTE and not (f.key == "db_cpu" and f.reference == 0):
            assert f.ratio is not None, f
    by_key = {f.key: f for f in report.figures}
    sizes = tiny_sizes()
    assert by_key["e2e"].detail["jobs"] == sizes.e2e_jobs
    assert by_key["e2e_preloaded"].detail["jobs"] == sizes.e2e_jobs
    assert by_key["c1"].detail["jobs"] == sizes.c1_jobs
    assert by_key["enqueue_16"].detail["producers"] == sizes.producers
    assert by_key["bulk_1000"].detail["jobs"] == sizes.bulk_small_jobs
    assert by_key["latency_p50"].detail["samples"] == sizes.latency_jobs
    assert by_key["memory"].detail["jobs"] == sizes.memory_jobs
    assert by_key["stats_1m"].detail["finished"] == sizes.stats_finished
    backlog = by_key["claim_backlog"].detail
    assert set(backlog) >= {"before_analyze", "after_analyze"}
    assert all(v > 0 for side in ("before_analyze", "after_analyze")
               for v in backlog[side].values()), backlog
    assert report.server.fsync in ("on", "off") and report.server.version
    assert report.machine["cpus"] >= 1
    doc = report.to_json()
    json.dumps(doc)  # serialisable as it is
    assert [f["key"] for f in doc["figures"]] == KEYS
    assert all({"key", "forklift", "reference", "unit", "verdict"} <= set(f) for f in doc["figures"])
    text = format_report(report)
    assert "end-to-end no-op, 1 worker" in text and "fsync=" in text
    assert "PASS" in text or "SHORT" in text
    assert set(_scratch_left(conn)) == before  # every scratch database was dropped


def test_scenarios_can_be_chosen_and_unknown_ones_are_refused(dsn: str) -> None:
    report = run_bench(dsn, scenarios=["bulk"], sizes=tiny_sizes())
    assert [f.key for f in report.figures] == ["bulk_1000", "bulk_10000"]
    try:
        run_bench(dsn, scenarios=["nope"])
    except ValueError as exc:
        assert "nope" in str(exc) and all(s in str(exc) for s in SCENARIOS)
    else:
        raise AssertionError("an unknown scenario was accepted")


@pytest.mark.parametrize(
    ("rule", "value", "ratio", "ok"),
    [(Target("ratio>=", 0.85), 1.0, 0.86, True), (Target("ratio>=", 0.85), 1.0, 0.84, False),
     (Target("ratio<=", 1.3), 1.0, 1.29, True), (Target("ratio<=", 1.3), 1.0, 1.31, False),
     (Target("value<=", 15.0), 14.9, None, True), (Target("value<=", 15.0), 15.1, None, False),
     (Target("within", 0.10), 1.0, 0.91, True), (Target("within", 0.10), 1.0, 1.11, False),
     (Target("ratio>=", 0.85), 1.0, None, False), (Target("reported"), 1.0, 1.0, None)],
)
def test_targets_judge_pass_and_short(rule: Target, value: float, ratio: float | None,
                                      ok: bool | None) -> None:
    f = Figure("x", "x", "jobs/s", value, None, "", ratio=ratio, rule=rule).judged()
    assert f.ok is ok
    assert f.verdict == {True: "PASS", False: "SHORT", None: ""}[ok]


def test_a_scenario_module_registers_itself() -> None:
    names = [s.name for s in registry.scenarios()]
    assert tuple(names) == SCENARIOS
    assert len(set(names)) == len(names)
    keys = registry.figure_keys()
    assert set(TABLE_KEYS) <= set(keys) and len(set(keys)) == len(keys)

    @registry.scenario("smoke_extra", figures=("smoke_extra",), order=999)
    def extra(bench: Any) -> list[Figure]:
        return []

    try:
        assert registry.scenarios()[-1].name == "smoke_extra"
        with pytest.raises(ValueError, match="twice"):
            registry.scenario("smoke_extra", figures=())(lambda b: [])
    finally:
        registry._REGISTERED.pop("smoke_extra")


def test_the_command_prints_json_and_refuses_unknown_scenarios(dsn: str) -> None:
    cli = [sys.executable, "-m", "forklift.cli.main", "bench", "--dsn", dsn]
    bad = subprocess.run([*cli, "--only", "nope"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "nope" in bad.stderr
    done = subprocess.run([*cli, "--only", "enqueue", "--quick", "--json"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert [f["key"] for f in doc["figures"]] == ["enqueue"]
    figure = doc["figures"][0]
    assert figure["unit"] == "jobs/s" and figure["forklift"] > 0 and figure["reference"] > 0
    assert figure["verdict"] in ("PASS", "SHORT")
    assert doc["server"]["fsync"] in ("on", "off") and doc["errors"] == {}


def test_without_a_configured_server_the_bench_runs_on_a_throwaway_one_and_removes_it(
    scratch_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = scratch_home / "bench-home"
    home.mkdir(mode=0o700)  # as root, unreachable by the server's account: data goes outside
    root_base = scratch_home / "var-lib-forklift-bench"
    monkeypatch.setattr(files, "ROOT_BASE", root_base)
    monkeypatch.setenv("FORKLIFT_HOME", str(home))
    monkeypatch.delenv("FORKLIFT_DSN", raising=False)
    monkeypatch.delenv("DATABASE_URL", raising=False)
    seen: list[str] = []

    report = run_bench(None, scenarios=["bulk"], sizes=tiny_sizes(), progress=seen.append)

    assert report.errors == {} and report.server.origin == "embedded (throwaway)"
    assert any("throwaway embedded server" in m for m in seen)
    assert not (home / "bench").exists()  # its home, data and server are gone
    assert list(home.iterdir()) == []
    outside = root_base / "embedded"
    assert not outside.exists() or list(outside.iterdir()) == []


@pytest.mark.slow
def test_the_fleet_scenario_runs_only_when_named_and_reports_each_count(dsn: str) -> None:
    assert "fleet" in SCENARIOS
    assert not [k for k in registry.figure_keys() if k.startswith("fleet_")]  # not in a full run
    report = run_bench(dsn, scenarios=["fleet"], sizes=tiny_sizes())
    assert report.errors == {}
    assert [f.key for f in report.figures] == ["fleet_2w", "fleet_4w", "fleet_8w", "fleet_16w"]
    for f in report.figures:
        assert f.forklift is not None and f.forklift > 0 and f.reference is not None, f
        assert f.ok is None and f.verdict == "", f  # reported, not judged
        # claim, complete, heartbeat and listen at least, and one worker leads
        assert f.detail["connections_per_worker"] >= 4, f


def test_the_steady_scenarios_run_only_when_named_and_report_their_keys(dsn: str) -> None:
    keys = registry.figure_keys()
    assert not {"sustained_p99", "sustained_depth", "horizon_rate", "horizon_p99"} & set(keys)
    sizes = dataclasses.replace(tiny_sizes(), horizon_seconds=3.0)
    report = run_bench(dsn, scenarios=["sustained", "horizon"], sizes=sizes)
    assert report.errors == {}
    assert [f.key for f in report.figures] == [
        "sustained_p99", "sustained_depth", "horizon_rate", "horizon_p99", "horizon_dead"]
    by_key = {f.key: f for f in report.figures}
    low = by_key["sustained_p99"].detail
    assert low["offered_rate"] == sizes.sustained_rate and low["sent"] > 0
    assert low["not_picked_up"] == 0 and low["completed"] > 0
    assert low["pickup_p50_ms"] <= low["pickup_p99_ms"]
    assert by_key["sustained_p99"].target == "<= 25" and by_key["sustained_p99"].ok is not None
    high = by_key["sustained_depth"]
    assert high.reference == sizes.sustained_high_rate and high.detail["depth_late_max"] >= 0
    assert high.ok is (high.forklift is not None and high.forklift <= sizes.sustained_high_rate)
    run = by_key["horizon_rate"].detail
    assert set(run) == {"before", "held", "after"}
    assert run["held"]["pinned_xmin"] is not None  # the hold really pinned a horizon
    for stretch in run.values():
        assert stretch["completed"] > 0 and stretch["not_picked_up"] == 0, stretch
        assert {"rate", "pickup_p50_ms", "pickup_p99_ms", "depth_max", "dead_per_1000_jobs",
                "db_cpu_us_per_job"} <= set(stretch)
    # held, nothing the jobs' updates leave behind can be vacuumed: dead tuples only grow
    assert run["held"]["dead_end"] > run["held"]["dead_start"]
    rate = by_key["horizon_rate"]
    assert rate.ratio == pytest.approx(run["held"]["rate"] / run["before"]["rate"])
    assert rate.ok is (rate.ratio >= 0.9)
    p99 = by_key["horizon_p99"]
    assert p99.forklift == run["held"]["pickup_p99_ms"] and p99.ok is (p99.forklift <= 50.0)
    assert by_key["horizon_dead"].ok is None and by_key["horizon_dead"].verdict == ""
    doc = report.to_json()
    json.dumps(doc)
    assert {f["key"] for f in doc["figures"]} >= {"sustained_p99", "horizon_rate", "horizon_p99"}


def test_the_command_takes_the_steady_lengths(dsn: str) -> None:
    cli = [sys.executable, "-m", "forklift.cli.main", "bench", "--dsn", dsn]
    bad = subprocess.run([*cli, "--only", "horizon", "--hold", "0"], capture_output=True,
                         text=True, timeout=60)
    assert bad.returncode == 2 and "--hold" in bad.stderr
    done = subprocess.run([*cli, "--only", "sustained", "--sustain", "2", "--rate", "100",
                           "--json"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["sizes"]["sustained_seconds"] == 2 and doc["sizes"]["sustained_rate"] == 100
    assert [f["key"] for f in doc["figures"]] == ["sustained_p99", "sustained_depth"]
    assert doc["figures"][0]["detail"]["offered_rate"] == 100


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_a_bench_worker_ends_when_the_bench_that_started_it_is_killed_outright(
    dsn: str, tmp_path: Path
) -> None:
    """SIGKILL leaves the bench no chance to stop its workers: they notice and stop, even one
    killed before it has finished starting."""
    script = tmp_path / "parent.py"
    script.write_text(
        "import sys\n"
        "from forklift.cli.bench.procs import Proc\n"
        f"proc = Proc('worker_main', {dsn!r})\n"
        "print(proc.pid, flush=True)\n"
        "sys.stdin.read()\n"
    )
    parent = subprocess.Popen([sys.executable, str(script)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        parent.kill()  # at once: the worker is still importing
        parent.wait(10)
        wait_until(lambda: _gone(child), timeout=30,
                   message=lambda: f"bench worker {child} outlived its bench:"
                   f" {psutil.Process(child).as_dict(['status', 'ppid', 'cmdline'])}")
    finally:
        parent.kill()
        with contextlib.suppress(psutil.NoSuchProcess):
            psutil.Process(child).kill()


def test_sigterm_ends_the_bench_like_ctrl_c_leaving_no_process_or_database(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    bench = subprocess.Popen(
        [sys.executable, "-m", "forklift.cli.main", "bench", "--dsn", dsn, "--only",
         "sustained", "--sustain", "120"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        me = psutil.Process(bench.pid)
        wait_until(lambda: _scratch_left(conn) and me.children(), timeout=60,
                   message=lambda: "the sustained scenario never started its worker")
        children = [c.pid for c in me.children(recursive=True)]
        bench.send_signal(signal.SIGTERM)
        assert bench.wait(60) != 0
        wait_until(lambda: all(_gone(pid) for pid in children), timeout=30,
                   message=lambda: f"left running: {[p for p in children if not _gone(p)]}")
        wait_until(lambda: not _scratch_left(conn), timeout=30,
                   message=lambda: f"scratch databases left: {_scratch_left(conn)}")
    finally:
        bench.kill()
        bench.wait(10)
