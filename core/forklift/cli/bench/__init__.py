"""`forklift bench`: forklift against a plain-SQL reference, in one run, on one server.

Every scenario gets a fresh database on the same server (cloned from a migrated template) and is
measured against the plainest SQL that does the same job on a table of the same shape without
forklift's trigger. Ratios are what matter; absolute figures depend on the machine and its disk
(the server's fsync and synchronous_commit settings are reported).

The package
    report.py    figures, targets (PASS/SHORT), the report and its text table
    server.py    the server and its scratch databases (all dropped at the end)
    procs.py     the bench app, worker and producer subprocesses, the raw reference loops
    measure.py   loading jobs, spans, CPU of backends; the context a scenario gets
    runs.py      throughput runs shared by scenarios (worker processes, the plain loop)
    steady.py    the long scenarios' fixed-rate producer, depth and dead-tuple probe, stretches
    registry.py  ``@scenario(...)``: how a scenario module registers itself
    scenarios/   one module per concern; a new module there is picked up by itself
    run.py       run_bench: the chosen scenarios into one report

How each figure is taken
    Throughput of a run is ``max(finished_at) - min(attempted_at)`` read from the database, for
    forklift and the plain loop alike, so process start-up is not counted and both sides use
    the same clock. Pickup latency runs from the enqueuing client's clock just before COMMIT to
    the handler's first line (forklift) or the return of the claim (raw loop). Database CPU is
    the CPU time of the client backends connected to the scenario's database (psutil; only when
    the server runs on this machine), divided by jobs. Each scenario module says the rest.
"""

from __future__ import annotations

from forklift.cli.bench import registry
from forklift.cli.bench.procs import raw_listener_main, worker_main
from forklift.cli.bench.registry import Scenario, scenario, scenarios
from forklift.cli.bench.report import (
    EXTRA_KEYS,
    FULL,
    QUICK,
    TABLE_KEYS,
    BenchReport,
    Figure,
    ServerInfo,
    Sizes,
    Target,
    format_report,
    header_lines,
    table_rows,
    tiny_sizes,
)
from forklift.cli.bench.run import machine, run_bench, scenario_names

#: Every scenario's name, in run order (``--only`` takes these).
SCENARIOS: tuple[str, ...] = scenario_names()

__all__ = [
    "EXTRA_KEYS", "FULL", "QUICK", "SCENARIOS", "TABLE_KEYS", "BenchReport", "Figure", "Scenario",
    "ServerInfo", "Sizes", "Target", "format_report", "header_lines", "machine", "raw_listener_main",
    "registry",
    "run_bench", "scenario", "scenario_names", "scenarios", "table_rows", "tiny_sizes",
    "worker_main",
]
