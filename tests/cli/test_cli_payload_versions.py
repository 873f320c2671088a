"""Payload versions seen by operators: `jobs list --payload-version` (and the bulk actions),
`jobs show` and its --json, `kinds versions`, the console's filter syntax."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from typer.testing import CliRunner

from forklift import Forklift, JobContext
from forklift.cli.main import app as cli
from forklift.ops import JobFilter
from forklift.ops.runbook import filter_flags
from forklift_console.widgets.filterbar import FilterError, parse, to_text

old = Forklift()
new = Forklift()


@old.job(name="pvcli.order", queue="pvcli")
def order_v1(ctx: JobContext, payload: dict[str, Any]) -> None:
    return None


@new.job(name="pvcli.order", queue="pvcli", version=2, upcasters={1: lambda p: p})
def order_v2(ctx: JobContext, payload: dict[str, Any]) -> None:
    return None


@pytest.fixture
def apps(dsn: str) -> Iterator[None]:
    old.use(dsn)
    new.use(dsn)
    try:
        yield
    finally:
        old.close()
        new.close()


def run(dsn: str, *args: str) -> Any:
    return CliRunner().invoke(cli, list(args), env={"FORKLIFT_DSN": dsn})


def ok(result: Any) -> Any:
    assert result.exit_code == 0, (result.stdout, result.stderr)
    return result


def test_list_filters_by_payload_version_and_shows_it(dsn: str, apps: None) -> None:
    v1 = order_v1.enqueue({"n": 1})
    v2 = order_v2.enqueue({"n": 2})

    def ids(*flags: str) -> list[int]:
        page = json.loads(ok(run(dsn, "jobs", "list", "--json", *flags)).stdout)
        return sorted(j["id"] for j in page["jobs"])

    assert ids("--payload-version", "2") == [v2.id]
    assert ids("--payload-version", "1") == [v1.id]  # a kind without versions is version 1
    assert ids("--payload-version", "1", "--payload-version", "2") == [v1.id, v2.id]
    page = json.loads(ok(run(dsn, "jobs", "list", "--json", "--payload-version", "2")).stdout)
    assert page["jobs"][0]["payload_version"] == 2
    assert page["filter"] == {"payload_versions": [2]}
    human = ok(run(dsn, "jobs", "list", "--kind", "pvcli.order")).stdout
    assert "version" in human and "v2" in human and "v1" in human
    plain = ok(run(dsn, "jobs", "list", "--payload-version", "1")).stdout
    assert "version" not in plain  # every job shown is version 1: no column
    refused = run(dsn, "jobs", "list", "--payload-version", "0")
    assert refused.exit_code == 2 and "payload-version" in refused.stderr


def test_bulk_actions_take_the_version_filter(dsn: str, apps: None,
                                              conn: psycopg.Connection[Any]) -> None:
    v1 = order_v1.enqueue({"n": 1})
    v2 = order_v2.enqueue({"n": 2})
    ok(run(dsn, "jobs", "cancel", "--payload-version", "1", "--kind", "pvcli.order", "--yes"))
    states = dict(conn.execute("SELECT id, state FROM forklift.jobs WHERE id = ANY(%s)",
                               ([v1.id, v2.id],)).fetchall())
    assert states == {v1.id: "cancelled", v2.id: "available"}
    flt = JobFilter.build(payload_versions="1,2", kinds="pvcli.order")
    assert filter_flags(flt) == ["--kind", "pvcli.order", "--payload-version", "1",
                                 "--payload-version", "2"]


def test_show_names_the_payload_version(dsn: str, apps: None) -> None:
    v2 = order_v2.enqueue({"n": 2})
    assert "payload version: 2" in ok(run(dsn, "jobs", "show", str(v2.id))).stdout
    detail = json.loads(ok(run(dsn, "jobs", "show", str(v2.id), "--json")).stdout)
    assert detail["payload_version"] == 2
    v1 = order_v1.enqueue({"n": 1})
    assert "payload version" not in ok(run(dsn, "jobs", "show", str(v1.id))).stdout
    assert json.loads(ok(run(dsn, "jobs", "show", str(v1.id), "--json")).stdout)[
        "payload_version"] is None


def test_kinds_versions_lists_live_jobs_by_version_until_the_old_one_drains(
    dsn: str, apps: None, conn: psycopg.Connection[Any]
) -> None:
    assert "no live jobs" in ok(run(dsn, "kinds", "versions")).stdout
    old_jobs = [order_v1.enqueue({"n": i}).id for i in range(3)]
    order_v2.enqueue({"n": 9})
    got = json.loads(ok(run(dsn, "kinds", "versions", "--json")).stdout)
    assert got == {"rows": [
        {"queue": "pvcli", "kind": "pvcli.order", "version": 1, "waiting": 3, "running": 0,
         "retrying": 0},
        {"queue": "pvcli", "kind": "pvcli.order", "version": 2, "waiting": 1, "running": 0,
         "retrying": 0}]}
    human = ok(run(dsn, "kinds", "versions", "--kind", "pvcli.order")).stdout
    assert "v1" in human and "v2" in human
    assert "version 1 has not drained" in human
    conn.execute("UPDATE forklift.jobs SET state = 'completed', finished_at = now()"
                 " WHERE id = ANY(%s)", (old_jobs,))
    got = json.loads(ok(run(dsn, "kinds", "versions", "--json")).stdout)
    assert [r["version"] for r in got["rows"]] == [2]  # version 1 has drained
    assert "has not drained" not in ok(run(dsn, "kinds", "versions")).stdout
    assert json.loads(ok(run(dsn, "kinds", "versions", "--json", "--kind", "other")).stdout) \
        == {"rows": []}


def test_console_filter_syntax_round_trips() -> None:
    flt = parse("version:1,2 kind:pvcli.order")
    assert flt.payload_versions == (1, 2)
    assert parse(to_text(flt)) == flt
    with pytest.raises(FilterError, match="payload version"):
        parse("version:two")
