"""`forklift partitions plan|run`: the DDL a run would execute, a dry run that changes nothing,
a run that is audited, and a second run at one instant that has nothing to do."""

from __future__ import annotations

import json
from typing import Any

import psycopg
from typer.testing import CliRunner

from forklift.cli.main import app as cli


def forklift(dsn: str, *argv: str) -> Any:
    return CliRunner().invoke(cli, [*argv, "--dsn", dsn])


def partitions(conn: psycopg.Connection[Any]) -> list[str]:
    return [r[0] for r in conn.execute(
        "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
        " WHERE i.inhparent = 'public.events'::regclass ORDER BY 1").fetchall()]


def test_plan_dry_run_and_run(dsn: str, conn: psycopg.Connection[Any]) -> None:
    conn.execute("CREATE TABLE public.events (at timestamptz NOT NULL) PARTITION BY RANGE (at)")
    at = ("--now", "2026-01-31T23:00:00Z", "--ahead", "1")
    plan = forklift(dsn, "partitions", "plan", "events", *at)
    assert plan.exit_code == 0, plan.output
    assert plan.stdout.splitlines() == [
        'CREATE TABLE IF NOT EXISTS "public"."events_p202601" PARTITION OF "public"."events"'
        " FOR VALUES FROM ('2026-01-01 00:00:00+00') TO ('2026-02-01 00:00:00+00');",
        'CREATE TABLE IF NOT EXISTS "public"."events_p202602" PARTITION OF "public"."events"'
        " FOR VALUES FROM ('2026-02-01 00:00:00+00') TO ('2026-03-01 00:00:00+00');"]
    dry = forklift(dsn, "partitions", "run", "events", *at, "--dry-run", "--json")
    assert dry.exit_code == 0 and json.loads(dry.stdout)["dry_run"] is True
    human = forklift(dsn, "partitions", "run", "events", *at, "--dry-run", "--read-only")
    assert human.exit_code == 0, human.output
    assert human.stdout.splitlines()[0] == "dry run: 2 statements would run (nothing changed):"
    assert human.stdout.splitlines()[1:] == plan.stdout.splitlines()
    assert partitions(conn) == []
    done = forklift(dsn, "partitions", "run", "events", *at, "--json")
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout) == {
        "table": "public.events", "created": ["public.events_p202601", "public.events_p202602"],
        "dropped": [], "lock_timeouts": 0}
    assert partitions(conn) == ["events_p202601", "events_p202602"]
    again = forklift(dsn, "partitions", "run", "events", *at)
    assert again.exit_code == 0 and "nothing to do" in again.stdout
    assert conn.execute("SELECT action, count FROM forklift.audit ORDER BY id").fetchall() == [
        ("partitions.run", 2), ("partitions.run", 0)]


def test_bad_input_is_refused_naming_it(dsn: str, conn: psycopg.Connection[Any]) -> None:
    missing = forklift(dsn, "partitions", "plan", "nowhere")
    assert missing.exit_code == 1 and "(partitions_table_invalid)" in missing.stderr
    when = forklift(dsn, "partitions", "plan", "nowhere", "--now", "yesterday")
    assert when.exit_code == 2 and "--now must be an ISO 8601" in when.stderr
    conn.execute("CREATE TABLE public.events (at timestamptz NOT NULL) PARTITION BY RANGE (at)")
    read_only = forklift(dsn, "partitions", "run", "events", "--read-only")
    assert read_only.exit_code == 1 and "(read_only)" in read_only.stderr
    assert partitions(conn) == []
