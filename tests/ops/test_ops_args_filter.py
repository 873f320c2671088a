"""Payload-field filters (``args.customer.id:42``): parsed once for every door, typed by how
the value reads, matched by JSON containment with the document bound as a parameter."""

from __future__ import annotations

import json
from typing import Any

import psycopg
import pytest
from apps.ops import insert_job
from typer.testing import CliRunner

from forklift.cli.main import app as cli
from forklift.ops import InvalidFilter, JobFilter, Operator
from forklift.ops.args_match import ArgsMatch
from forklift.ops.runbook import filter_flags


def test_a_field_is_read_as_typed() -> None:
    assert ArgsMatch.parse("args.customer.id:42") == ArgsMatch(("customer", "id"), 42)
    assert ArgsMatch.parse("args.price:2.5").value == 2.5
    assert ArgsMatch.parse("args.vip:true").value is True
    assert ArgsMatch.parse("args.plan:gold").value == "gold"
    assert ArgsMatch.parse("args.url:https://x.example/a").value == "https://x.example/a"
    assert ArgsMatch.parse("plan:gold") == ArgsMatch(("plan",), "gold")  # --arg plan:gold
    for text in ("args.customer.id:42", "args.plan:gold", "args.vip:false", "args.n:-3"):
        assert ArgsMatch.parse(ArgsMatch.parse(text).to_text()) == ArgsMatch.parse(text)


@pytest.mark.parametrize(("text", "words"), [
    ("args:42", "names no field"),
    ("args.plan", "has no value"),
    ("args.plan:", "needs a value"),
    ("args.a..b:1", "empty field name"),
    ("args." + ".".join("abcdefghi") + ":1", "deeper than 8"),
    ("args.plan:go\x00ld", "NUL"),
])
def test_a_bad_field_is_refused_naming_args(text: str, words: str) -> None:
    with pytest.raises(InvalidFilter, match=words) as info:
        JobFilter.build(args=[text])
    assert info.value.detail["field"] == "args"


def test_payload_fields_select_jobs_and_the_value_is_data(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    hostile = "x'}'::jsonb OR true; --"
    ids = {
        "num": insert_job(conn, args={"customer": {"id": 42}, "plan": "gold"}),
        "text": insert_job(conn, args={"customer": {"id": "42"}, "plan": "Gold"}),
        "float": insert_job(conn, args={"customer": {"id": 42.0}}),
        "other": insert_job(conn, args={"customer": {"id": 43}, "plan": "gold"}),
        "flat": insert_job(conn, args={"id": 42}),
        "hostile": insert_job(conn, args={"note": hostile}),
    }
    with Operator(dsn) as op:
        def found(*fields: str) -> set[int]:
            return {j.id for j in op.jobs(JobFilter.build(args=list(fields))).jobs}

        assert found("args.customer.id:42") == {ids["num"], ids["text"], ids["float"]}
        assert found("args.plan:gold") == {ids["num"], ids["other"]}  # strings: exact case
        assert found("args.customer.id:42", "args.plan:gold") == {ids["num"]}  # all of them
        assert found("args.id:42") == {ids["flat"]}  # the path is from the top
        assert found(f"args.note:{hostile}") == {ids["hostile"]}
        assert found("args.customer.id:44") == set()
        # The count and the bulk actions read the same condition.
        flt = JobFilter.build(args=["args.plan:gold"])
        assert op.jobs(flt, count=True).count == 2
        report = op.jobs.cancel_many(flt, dry_run=True)
        assert report.matched == 2


def test_the_cli_takes_the_same_syntax(dsn: str, conn: psycopg.Connection[Any]) -> None:
    def run(*args: str) -> Any:
        return CliRunner().invoke(cli, list(args), env={"FORKLIFT_DSN": dsn})

    gold = insert_job(conn, args={"customer": {"id": 42}, "plan": "gold"})
    insert_job(conn, args={"customer": {"id": 7}, "plan": "gold"})
    listed = run("jobs", "list", "--arg", "args.customer.id:42", "--arg", "plan:gold", "--json")
    assert listed.exit_code == 0, listed.stderr
    got = json.loads(listed.stdout)
    assert [j["id"] for j in got["jobs"]] == [gold]
    assert got["filter"]["args"] == [{"path": "customer.id", "value": 42},
                                     {"path": "plan", "value": "gold"}]
    bad = run("jobs", "list", "--arg", "args.customer.id:")
    assert bad.exit_code == 2  # a usage error, named
    assert "args.customer.id: needs a value" in bad.stderr
    # The console's bulk confirmations print the CLI line: it carries the field.
    assert filter_flags(JobFilter.build(args=["args.plan:gold"])) == ["--arg", "args.plan:gold"]
    assert json.dumps(JobFilter.build(args=["args.n:1"]).to_json()) == (
        '{"args": [{"path": "n", "value": 1}]}')
