"""How the CLI fails: one line on stderr naming what was wrong (and its code), the documented
``{"error": {...}}`` object on stdout under --json, exit 1 for a refusal and 2 for a usage
error, whether typer finds the error while parsing or the command while running."""

from __future__ import annotations

import json
from typing import Any

import pytest
from typer.testing import CliRunner

from forklift.cli.main import app as cli


def run(dsn: str, *args: str) -> Any:
    return CliRunner().invoke(cli, list(args), env={"FORKLIFT_DSN": dsn})


def one_line(result: Any, code: int) -> str:
    assert result.exit_code == code, (result.exit_code, result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr and "╭" not in result.stderr  # no Rich box
    return str(lines[0])


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["jobs", "list", "--limit", "0"], "--limit"),
        (["jobs", "show", "abc"], "JOB_ID"),
        (["jobs", "list", "--bogus"], "--bogus"),
        (["queues", "pause"], "NAME"),
        (["stats", "--interval", "0"], "--interval"),
        (["nosuchcommand"], "nosuchcommand"),
    ],
    ids=["limit-0", "id-not-a-number", "unknown-option", "missing-argument", "below-minimum",
         "unknown-command"],
)
def test_usage_errors_are_one_line_and_json_under_json(dsn: str, args: list[str], needle: str) -> None:
    plain = run(dsn, *args)
    line = one_line(plain, 2)
    assert needle.lower() in line.lower() and "(usage_error)" in line and "--help" in line
    assert plain.stdout == ""
    as_json = run(dsn, *args, "--json")
    one_line(as_json, 2)
    error = json.loads(as_json.stdout)["error"]
    assert error["code"] == "usage_error" and needle.lower() in error["message"].lower()


def test_refusals_found_by_the_command_take_the_same_form(dsn: str) -> None:
    line = one_line(run(dsn, "jobs", "list", "--state", "zombie"), 2)
    assert "zombie" in line and "(invalid_filter)" in line
    refused = run(dsn, "jobs", "show", "424242", "--json")
    one_line(refused, 1)
    assert json.loads(refused.stdout)["error"]["code"] == "job_not_found"


def test_batches_cancel_of_an_unknown_batch_errs_on_stderr_and_in_json(dsn: str) -> None:
    plain = run(dsn, "batches", "cancel", "999", "--yes")
    line = one_line(plain, 1)
    assert "no batch with id 999" in line and "(batch_not_found)" in line
    assert plain.stdout == ""
    as_json = run(dsn, "batches", "cancel", "999", "--yes", "--json")
    one_line(as_json, 1)
    error = json.loads(as_json.stdout)["error"]
    assert error["code"] == "batch_not_found" and error["batch_id"] == 999
    assert "cancelled" not in json.loads(as_json.stdout)


def test_a_json_flag_after_the_separator_is_data_not_a_request_for_json(dsn: str) -> None:
    result = run(dsn, "queues", "explain", "--json", "--", "--json")
    one_line(result, 1)
    assert json.loads(result.stdout)["error"]["queue"] == "--json"  # the name, not a flag


@pytest.mark.parametrize(("args", "needle"), [
    (["--log-format", "x"], "--log-format"),
    (["--log-level", "nope"], "--log-level"),
])
def test_a_bad_worker_logging_option_is_a_usage_error(dsn: str, args: list[str], needle: str) -> None:
    """Refused while parsing, before the app loads or the worker starts (exit 2, not 1)."""
    line = one_line(run(dsn, "worker", "--app", "tests.apps.basic:app", *args), 2)
    assert needle in line and "(usage_error)" in line
