"""Weighted jobs seen by operators on the command line: `jobs show` (and its --json),
`jobs list`'s weight column (only when a listed job weighs more than one), `kinds list`,
`queues show` and `queues list --json`, and `jobs explain`'s `weighted` reason."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from typer.testing import CliRunner

from forklift import Forklift, JobContext
from forklift.cli.main import app as cli

app = Forklift()


@app.job(name="wcli.export", queue="wcli", weight=3)
def export(ctx: JobContext, payload: dict[str, Any]) -> None:
    return None


@app.job(name="wcli.mail", queue="wcli.mail")
def mail(ctx: JobContext, payload: dict[str, Any]) -> None:
    return None


@pytest.fixture
def bound(dsn: str) -> Iterator[None]:
    app.use(dsn)
    try:
        yield
    finally:
        app.close()


def run(dsn: str, *args: str) -> str:
    result = CliRunner().invoke(cli, list(args), env={"FORKLIFT_DSN": dsn, "COLUMNS": "200"})
    assert result.exit_code == 0, (result.stdout, result.stderr)
    return result.stdout


def test_show_and_list_name_the_weight(dsn: str, bound: None) -> None:
    heavy = export.enqueue({})
    light = mail.enqueue({})
    shown = run(dsn, "jobs", "show", str(heavy.id))
    assert "weight: 3 slots" in shown
    assert "weight" not in run(dsn, "jobs", "show", str(light.id))
    assert json.loads(run(dsn, "jobs", "show", str(heavy.id), "--json"))["weight"] == 3
    assert json.loads(run(dsn, "jobs", "show", str(light.id), "--json"))["weight"] is None
    page = json.loads(run(dsn, "jobs", "list", "--json"))
    assert {j["id"]: j["weight"] for j in page["jobs"]} == {heavy.id: 3, light.id: 1}
    table = run(dsn, "jobs", "list")
    header = table.splitlines()[0].split()
    assert "weight" in header
    row = next(line.split() for line in table.splitlines() if line.split()[:1] == [str(heavy.id)])
    assert row[header.index("weight")] == "3"
    # Every listed job weighs one: no weight column.
    assert "weight" not in run(dsn, "jobs", "list", "--queue", "wcli.mail").splitlines()[0]


def test_kinds_and_queues_say_weighted(dsn: str, bound: None) -> None:
    export.enqueue({})
    mail.enqueue({})
    table = run(dsn, "kinds", "list")
    lines = table.splitlines()
    header = next(line.split() for line in lines if line.split()[:2] == ["queue", "kind"])
    row = next(line.split() for line in lines if "wcli.export" in line)
    # the batch column is empty for both kinds: the weight is the first figure after the kind
    assert "weight" in header and row[2] == "3"
    kinds = json.loads(run(dsn, "kinds", "list", "--json"))
    assert {r["kind"]: r["weight"] for r in kinds["rows"]} == {"wcli.export": 3, "wcli.mail": None}
    assert "weighted: its jobs may take more than one slot" in run(dsn, "queues", "show", "wcli")
    assert json.loads(run(dsn, "queues", "show", "wcli", "--json"))["weighted"] is True
    queues = {q["name"]: q["weighted"] for q in json.loads(run(dsn, "queues", "list", "--json"))}
    assert queues["wcli"] is True
    assert not queues.get("wcli.mail", False)


def test_explain_names_the_weight(dsn: str, bound: None) -> None:
    job = export.enqueue({}, weight=4)
    text = run(dsn, "jobs", "explain", str(job.id))
    assert (f"• job {job.id} weighs 4 slots: it starts once a worker has 4 free, and nothing"
            " behind it in claim order takes them") in text
    assert "(weighted)" in text
    facts = json.loads(run(dsn, "jobs", "explain", str(job.id), "--json"))
    reason = next(r for r in facts["reasons"] if r["code"] == "weighted")
    assert reason["facts"]["weight"] == 4
