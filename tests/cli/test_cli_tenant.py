"""A job's tenant and who enqueued it, seen by operators: `jobs list --tenant/--enqueued-by`
(and the bulk actions), `jobs show` and its --json, the console's filter syntax."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from apps import basic
from typer.testing import CliRunner

from forklift import Forklift
from forklift.cli.main import app as cli
from forklift.ops import JobFilter
from forklift.ops.runbook import filter_flags
from forklift_console.widgets.filterbar import parse, to_text


def run(dsn: str, *args: str) -> Any:
    return CliRunner().invoke(cli, list(args), env={"FORKLIFT_DSN": dsn})


def ok(result: Any) -> Any:
    assert result.exit_code == 0, (result.stdout, result.stderr)
    return result


@pytest.fixture
def app(dsn: str) -> Iterator[Forklift]:
    with basic.bound(dsn) as bound_app:
        yield bound_app


def test_list_filters_by_tenant_and_actor(dsn: str, app: Forklift) -> None:
    acme = basic.echo.enqueue(basic.Greeting("a"), tenant="acme", enqueued_by="user:1")
    acme2 = basic.echo.enqueue(basic.Greeting("b"), tenant="acme", enqueued_by="cron")
    globex = basic.echo.enqueue(basic.Greeting("c"), tenant="globex", enqueued_by="user:1")
    basic.echo.enqueue(basic.Greeting("d"))

    def ids(*flags: str) -> list[int]:
        page = json.loads(ok(run(dsn, "jobs", "list", "--json", *flags)).stdout)
        return sorted(j["id"] for j in page["jobs"])

    assert ids("--tenant", "acme") == [acme.id, acme2.id]
    assert ids("--tenant", "acme,globex", "--enqueued-by", "user:1") == [acme.id, globex.id]
    assert ids("--enqueued-by", "cron") == [acme2.id]
    assert ids("--tenant", "nobody") == []
    page = json.loads(ok(run(dsn, "jobs", "list", "--json", "--tenant", "globex")).stdout)
    assert page["jobs"][0]["tenant"] == "globex" and page["jobs"][0]["enqueued_by"] == "user:1"
    assert page["filter"] == {"tenants": ["globex"]}
    human = ok(run(dsn, "jobs", "list", "--tenant", "acme")).stdout
    assert "tenant" in human and "acme" in human and "globex" not in human
    untenanted = ok(run(dsn, "jobs", "list", "--kind", "nothing.here")).stdout
    assert "tenant" not in untenanted


def test_bulk_actions_take_the_same_filter(dsn: str, app: Forklift,
                                           conn: psycopg.Connection[Any]) -> None:
    mine = basic.echo.enqueue(basic.Greeting("a"), tenant="acme")
    other = basic.echo.enqueue(basic.Greeting("b"), tenant="globex")
    ok(run(dsn, "jobs", "cancel", "--tenant", "acme", "--yes"))
    states = dict(conn.execute("SELECT id, state FROM forklift.jobs WHERE id = ANY(%s)",
                               ([mine.id, other.id],)).fetchall())
    assert states == {mine.id: "cancelled", other.id: "available"}
    flt = JobFilter.build(tenants="acme", enqueued_by="user:1")
    assert filter_flags(flt) == ["--tenant", "acme", "--enqueued-by", "user:1"]


def test_show_names_tenant_and_actor(dsn: str, app: Forklift) -> None:
    job = basic.echo.enqueue(basic.Greeting("a"), tenant="acme", enqueued_by="user:42")
    human = ok(run(dsn, "jobs", "show", str(job.id))).stdout
    assert "tenant: acme" in human and "enqueued by: user:42" in human
    detail = json.loads(ok(run(dsn, "jobs", "show", str(job.id), "--json")).stdout)
    assert (detail["tenant"], detail["enqueued_by"]) == ("acme", "user:42")
    plain = basic.echo.enqueue(basic.Greeting("b"))
    assert "tenant" not in ok(run(dsn, "jobs", "show", str(plain.id))).stdout


def test_filter_refuses_hidden_characters(dsn: str) -> None:
    result = run(dsn, "jobs", "list", "--tenant", "ac\x00me")
    assert result.exit_code != 0 and "tenant" in result.stderr


def test_console_filter_syntax_round_trips() -> None:
    flt = parse("tenant:acme,globex enqueued_by:user:42 queue:mail")
    assert flt.tenants == ("acme", "globex") and flt.enqueued_by == ("user:42",)
    assert parse(to_text(flt)) == flt


def test_enqueue_command_takes_tenant_and_actor(dsn: str) -> None:
    made = json.loads(ok(run(dsn, "enqueue", "basic.echo", "--args", '{"name": "x"}', "--app",
                             "tests.apps.basic:app", "--tenant", "acme", "--enqueued-by",
                             "ops:ada", "--json")).stdout)
    assert (made["tenant"], made["enqueued_by"]) == ("acme", "ops:ada")
    bad = run(dsn, "enqueue", "basic.echo", "--args", '{"name": "x"}', "--app",
              "tests.apps.basic:app", "--tenant", "ac\u200bme")
    assert bad.exit_code == 1 and "tenant" in bad.stderr
