"""The autoscaling signal's three faces give one number: the Prometheus gauge
``forklift_queue_desired_workers`` (scraped from a real worker's ``/metrics``: the leader
samples it with the queue depth), ``op.queues.scale()`` and ``forklift queues scale --json``;
and the command refuses out-of-range options with exit 2."""

from __future__ import annotations

import json
import re
import socket
import urllib.request
from typing import Any

import psycopg
import pytest
from apps import faults
from apps.faults import Procs, registered
from apps.ops import insert_job
from helpers import wait_until
from typer.testing import CliRunner

from forklift.cli.main import app as cli
from forklift.ops import Operator

procs = faults.procs  # a fixture


def run(dsn: str, *args: str) -> Any:
    return CliRunner().invoke(cli, list(args), env={"FORKLIFT_DSN": dsn})


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def gauge(port: int, queue: str) -> float | None:
    """The gauge's value for ``queue`` on a worker's /metrics page, None until sampled."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            page = r.read().decode()
    except OSError:
        return None
    m = re.search(rf'^forklift_queue_desired_workers{{queue="{re.escape(queue)}"}} (\S+)$',
                  page, re.M)
    return float(m.group(1)) if m else None


def test_the_gauge_the_client_and_the_command_agree(
    dsn: str, conn: psycopg.Connection[Any], procs: Procs
) -> None:
    with Operator(dsn) as op:
        op.queues.set_concurrency("mail", None, create=True)  # a queue with a row, no worker
        for _ in range(25):
            insert_job(conn, queue="mail", state="available")
        # A worker of another queue leads, and samples every queue's signal.
        port = free_port()
        w = procs.start(app="apps.probes:app", queues="probes", lease=3.0,
                        extra=["--metrics-port", str(port)])
        registered(conn, w)
        seen = wait_until(lambda: gauge(port, "mail"), timeout=30, interval=0.2,
                          message=lambda: f"no gauge for mail:\n{w.log()[-3000:]}")
        (signal,) = op.queues.scale(["mail"])
        every = {q.queue: q.desired for q in op.queues.scale()}
    got = run(dsn, "queues", "scale", "mail", "--json")
    assert got.exit_code == 0, got.stderr
    (shown,) = json.loads(got.stdout)
    # 25 jobs waiting, no rate known, no worker of the queue: a slot each, 10 a worker.
    assert (seen, signal.desired, shown["desired"]) == (3.0, 3, 3)
    assert (shown["per_worker"], shown["running"], shown["waiting"], shown["rate"]) == (
        10, 0, 25, None)
    assert every["mail"] == 3 and "probes" in every  # default: the live workers' queues too
    assert gauge(port, "probes") == float(every["probes"])
    text = run(dsn, "queues", "scale", "mail", "--per-worker", "5")
    assert text.exit_code == 0, text.stderr
    row = next(line.split() for line in text.stdout.splitlines() if line.startswith("mail"))
    assert row[:5] == ["mail", "5", "5", "0", "25"]
    assert "SELECT forklift.desired_workers('mail', 5, 100, 30.0)" in text.stdout


@pytest.mark.parametrize("args", [
    ["--per-worker", "0"], ["--max", "-1"], ["--target", "0"], ["--target", "-5"],
])
def test_out_of_range_options_exit_2(dsn: str, args: list[str]) -> None:
    got = run(dsn, "queues", "scale", "mail", *args)
    assert got.exit_code == 2, (got.stdout, got.stderr)
    assert run(dsn, "queues", "scale", "mail", "--json", *args).exit_code == 2
