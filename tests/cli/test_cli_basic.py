"""The CLI baseline through typer's runner: migrate, enqueue, jobs show, and the one-line errors.

Exit codes: 0 done, 1 refused or failed, 2 usage.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg
import pytest
from typer.testing import CliRunner

from forklift._db.migrate import migrations
from forklift.cli.main import app as cli

ROOT = Path(__file__).resolve().parents[2]
APP = "tests.apps.basic:app"
UNREACHABLE = "postgresql://nobody:s3cret@127.0.0.1:1/nowhere"


def run(*args: str) -> Any:
    return CliRunner().invoke(cli, list(args))


def one_error_line(result: Any, code: int = 1) -> str:
    assert result.exit_code == code, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    return str(lines[0])


def count_jobs(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute("SELECT count(*) FROM forklift.jobs").fetchone()
    assert row is not None
    return int(row[0])


# -- migrate --------------------------------------------------------------------------------
def test_migrate_and_check_on_an_empty_database(empty_dsn: str) -> None:
    names = [f"{m.version:04d}_{m.name}" for m in migrations()]
    check = run("migrate", "--check", "--dsn", empty_dsn)
    assert check.exit_code == 1
    assert f"{len(names)} pending" in check.stdout and all(n in check.stdout for n in names)

    applied = run("migrate", "--dsn", empty_dsn)
    assert applied.exit_code == 0, applied.stderr
    assert "applied" in applied.stdout and all(n in applied.stdout for n in names)

    again = run("migrate", "--dsn", empty_dsn)
    assert again.exit_code == 0 and "nothing to apply" in again.stdout
    assert run("migrate", "--check", "--dsn", empty_dsn).exit_code == 0


# -- enqueue --------------------------------------------------------------------------------
def test_enqueue_prints_the_job(dsn: str, conn: psycopg.Connection[Any]) -> None:
    done = run("enqueue", "basic.echo", "--args", '{"name": "cli"}', "--app", APP, "--dsn", dsn)
    assert done.exit_code == 0, done.stderr
    row = conn.execute("SELECT id, kind, args, state, queue FROM forklift.jobs").fetchone()
    assert row is not None
    assert row[1:] == ("basic.echo", {"name": "cli", "times": 1}, "available", "default")
    assert done.stdout.strip() == f"job {row[0]} available on queue default"


def test_enqueue_json_and_options(dsn: str, conn: psycopg.Connection[Any]) -> None:
    done = run(
        "enqueue", "basic.order", "--args", '{"sku": "A", "qty": 2}', "--queue", "rush",
        "--delay", "60", "--priority", "7", "--unique-key", "order-A",
        "--app", APP, "--dsn", dsn, "--json",
    )
    assert done.exit_code == 0, done.stderr
    job = json.loads(done.stdout)
    assert (job["kind"], job["queue"], job["state"], job["priority"]) == (
        "basic.order", "rush", "scheduled", 7,
    )
    assert (job["unique_key"], job["args"], job["reused"]) == ("order-A", {"sku": "A", "qty": 2}, False)

    again = run("enqueue", "basic.order", "--args", '{"sku": "A", "qty": 3}', "--unique-key",
                "order-A", "--app", APP, "--dsn", dsn)
    assert again.exit_code == 0
    assert f"job {job['id']} scheduled" in again.stdout and "existing" in again.stdout
    assert count_jobs(conn) == 1


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["basic.echo", "--args", '{"times": 2}'], "'name'"),
        (["basic.nope", "--args", "{}"], "basic.nope"),
        (["basic.anything", "--args", '{"x": "\\u0000"}'], "NUL"),
    ],
    # (a --priority out of range is a usage error, exit 2: test_cli_option_ranges.py)
    ids=["invalid-payload", "unknown-kind", "nul"],
)
def test_enqueue_refusals_exit_1_with_one_line(
    dsn: str, conn: psycopg.Connection[Any], args: list[str], needle: str
) -> None:
    line = one_error_line(run("enqueue", *args, "--app", APP, "--dsn", dsn))
    assert needle in line
    assert count_jobs(conn) == 0


def test_enqueue_args_that_are_not_json_is_a_usage_error(dsn: str, conn: psycopg.Connection[Any]) -> None:
    line = one_error_line(run("enqueue", "basic.echo", "--args", "{name: x}", "--app", APP,
                              "--dsn", dsn), code=2)
    assert "not JSON" in line
    assert count_jobs(conn) == 0


def test_enqueue_with_an_app_that_does_not_import(dsn: str) -> None:
    line = one_error_line(run("enqueue", "x", "--app", "tests.apps.no_such_module:app", "--dsn", dsn))
    assert "no_such_module" in line


# -- jobs show ------------------------------------------------------------------------------
def test_jobs_show(dsn: str) -> None:
    made = json.loads(run("enqueue", "basic.echo", "--args", '{"name": "shown"}', "--app", APP,
                          "--dsn", dsn, "--json").stdout)
    shown = run("jobs", "show", str(made["id"]), "--dsn", dsn)
    assert shown.exit_code == 0, shown.stderr
    assert f"job {made['id']}" in shown.stdout and "basic.echo" in shown.stdout
    assert "available" in shown.stdout and '"shown"' in shown.stdout

    as_json = run("jobs", "show", str(made["id"]), "--dsn", dsn, "--json")
    assert as_json.exit_code == 0
    data = json.loads(as_json.stdout)
    assert (data["id"], data["state"], data["args"]) == (made["id"], "available", {"name": "shown", "times": 1})


def test_jobs_show_an_unknown_id(dsn: str) -> None:
    line = one_error_line(run("jobs", "show", "424242", "--dsn", dsn))
    assert "424242" in line
    assert one_error_line(run("jobs", "show", "424242", "--dsn", dsn, "--json"))


# -- an unreachable database ------------------------------------------------------------------
@pytest.mark.parametrize(
    "args",
    [
        ["jobs", "show", "1"],
        ["migrate"],
        ["migrate", "--check"],
        ["enqueue", "basic.echo", "--args", '{"name": "x"}', "--app", APP],
    ],
    ids=["jobs-show", "migrate", "migrate-check", "enqueue"],
)
def test_an_unreachable_dsn_is_one_line_naming_the_host(args: list[str]) -> None:
    line = one_error_line(run(*args, "--dsn", UNREACHABLE))
    assert "127.0.0.1:1" in line
    assert "s3cret" not in line


# -- the worker command ---------------------------------------------------------------------
def test_the_worker_refuses_an_outdated_schema_naming_the_command(empty_dsn: str) -> None:
    env = {**os.environ, "FORKLIFT_DSN": empty_dsn}
    done = subprocess.run(
        [sys.executable, "-m", "forklift.cli.main", "worker", "--app", APP],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False,
    )
    assert done.returncode == 1, done.stderr
    assert "forklift migrate" in done.stderr
    assert "Traceback" not in done.stderr
