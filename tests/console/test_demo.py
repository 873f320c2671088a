"""`forklift demo --headless`: the bundled demo runs a few hundred jobs to the end and exits 0."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg

ROOT = Path(__file__).resolve().parents[2]


def test_headless_demo_runs_every_job_to_a_terminal_state(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("FORKLIFT_DSN", "DATABASE_URL")}
    done = subprocess.run(
        [sys.executable, "-m", "forklift.cli.main", "demo", "--headless", "--jobs", "300",
         "--dsn", dsn],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "300 of 300 jobs terminal" in done.stdout
    # The demo's own stream; its schedule (demo.tidy) and backfill may add jobs of their own.
    states = dict(conn.execute(
        "SELECT state, count(*) FROM forklift.jobs WHERE meta->>'schedule' IS NULL"
        " AND kind NOT IN ('demo.tidy', 'forklift.backfill') GROUP BY state").fetchall())
    assert sum(states.values()) == 300
    assert set(states) <= {"completed", "dead", "cancelled"}
    assert states.get("completed", 0) > 0 and states.get("dead", 0) > 0  # demo.failing dies on purpose
    kinds = {r[0] for r in conn.execute("SELECT DISTINCT kind FROM forklift.jobs")}
    assert kinds >= {"demo.fast", "demo.flaky", "demo.slow", "demo.failing", "demo.report"}
    # Its worker drained and exited (the row stays a while as history).
    assert conn.execute("SELECT count(*) FROM forklift.workers WHERE state <> 'exited'"
                        ).fetchone() == (0,)
