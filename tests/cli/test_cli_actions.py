"""Every CLI action: --dry-run everywhere (it rehearses and changes nothing), and the edges of
the actions: enqueue honours read-only and takes --schema/--actor and @file/stdin payloads,
`queues pause --for 0` is refused, `backfills start --rate` on a live run takes the rate, the
worker takes --schema."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import apps.batches as bapp
import psycopg
import pytest
import typer.main
from apps.ops import error, insert_job
from typer.testing import CliRunner

from forklift.cli.main import app as cli
from forklift.ops import Operator

ROOT = Path(__file__).resolve().parents[2]
APP = "tests.apps.basic:app"
#: Every command that changes something (they all take --actor and --reason) ...
ACTIONS = {
    "enqueue", "prune", "jobs retry", "jobs cancel", "jobs delete", "jobs run-now", "queues pause",
    "queues resume", "queues limit", "dead requeue", "dead delete", "batches cancel",
    "batches retry-failed", "schedules pause", "schedules resume", "schedules run-now",
    "backfills start", "backfills pause", "backfills resume", "backfills cancel", "backfills rate",
    "health set", "retention set", "retention reset", "outbox retry", "events publish",
    "queues rate", "queues fair", "queues aging", "queues ceiling", "keys limit", "keys rate",
    "keys reset",
    "ledger create", "partitions run",
    "webhooks enable", "webhooks disable",
    "consumers pause", "consumers resume", "consumers reset-cursor",
    "workflows replay", "workflows pause", "workflows resume", "kinds pause", "kinds resume",
}
#: ... and those that change something outside the audit trail.
UNAUDITED = {"migrate", "db stop", "db remove"}
TABLES = ("jobs", "queues", "audit", "schedules", "schedule_ticks", "backfills", "backfill_runs",
          "batches", "dead_letters", "outbox", "events", "job_steps", "flow_keys", "flow_values")


def run(dsn: str, *args: str, input: str | None = None, **env: str) -> Any:
    return CliRunner().invoke(cli, list(args), env={"FORKLIFT_DSN": dsn, **env}, input=input)


def ok(result: Any) -> Any:
    assert result.exit_code == 0, (result.exit_code, result.stdout, result.stderr)
    return result


def commands() -> dict[str, Any]:
    """Every leaf command of `forklift`, by its path ("queues pause")."""
    found: dict[str, Any] = {}

    def walk(cmd: Any, path: list[str]) -> None:
        subs = getattr(cmd, "commands", None)
        if subs is None:
            found[" ".join(path)] = cmd
            return
        for name, sub in subs.items():
            walk(sub, [*path, name])

    walk(typer.main.get_command(cli), [])
    return found


def options(cmd: Any) -> set[str]:
    return {o for p in cmd.params for o in getattr(p, "opts", [])}


def test_every_action_has_a_dry_run_and_takes_the_audit_options() -> None:
    tree = commands()
    # (the console takes --actor for the actions taken in it)
    acting = {path for path, cmd in tree.items() if "--actor" in options(cmd)} - {"console"}
    assert acting == ACTIONS
    for path in ACTIONS | UNAUDITED:
        assert "--dry-run" in options(tree[path]), path
    for path in ACTIONS:
        assert {"--reason", "--read-only", "--dsn", "--schema", "--json"} <= options(tree[path]), path


def snapshot(conn: psycopg.Connection[Any]) -> dict[str, str]:
    out = {}
    for table in TABLES:
        row = conn.execute(
            f"SELECT md5(coalesce(string_agg(x::text, '|' ORDER BY x::text), ''))"
            f" FROM forklift.{table} x").fetchone()
        assert row is not None
        out[table] = str(row[0])
    return out


@pytest.fixture
def world(dsn: str, conn: psycopg.Connection[Any]) -> dict[str, Any]:
    """A queue, a paused queue, a dead job, a schedule, a live backfill and a running batch."""
    insert_job(conn, queue="mail")
    insert_job(conn, queue="held")
    conn.execute("INSERT INTO forklift.flow_keys (name, concurrency) VALUES ('tenant', 2)")
    dead_id = insert_job(conn, state="dead", errors=[error("error", "user 4 not found")])
    ok(run(dsn, "queues", "pause", "held", "--reason", "setup"))
    ok(run(dsn, "schedules", "list", "--app", "apps.scheduled:app"))
    ok(run(dsn, "backfills", "start", "bf.items", "--app", "apps.scheduled:app"))
    bapp.setup(conn)
    with bapp.bound(dsn, conn) as bound:
        batch, _ = bound.batch("batch.step", [{"n": 0}, {"n": 1}], caller="w", mode="serial")
        dead_batch_target = insert_job(conn, state="dead", batch_id=None)
    conn.execute("INSERT INTO forklift.outbox (topic, payload, state) VALUES ('t', '{}', 'dead')")
    with Operator(dsn) as op:
        group = op.dead_groups().groups[0].id
    return {"batch": batch.id, "dead": dead_id, "group": group, "spare": dead_batch_target}


DRY_RUNS = [
    ["queues", "pause", "mail", "--for", "30m"],
    ["queues", "resume", "held"],
    ["queues", "limit", "mail", "3"],
    ["queues", "rate", "mail", "10/s"],
    ["queues", "fair", "mail", "on"],
    ["queues", "aging", "mail", "30s", "--top", "1"],
    ["queues", "ceiling", "mail", "--depth", "100", "--age", "5m"],
    ["keys", "limit", "tenant", "3"],
    ["keys", "rate", "tenant", "5/s"],
    ["keys", "reset", "tenant"],
    ["schedules", "pause", "beat"],
    ["schedules", "resume", "beat"],
    ["schedules", "run-now", "beat"],
    ["backfills", "start", "bf.items", "--rate", "9"],
    ["backfills", "rate", "bf.items", "2"],
    ["backfills", "pause", "bf.items"],
    ["backfills", "resume", "bf.items"],
    ["backfills", "cancel", "bf.items"],
    ["batches", "cancel", "{batch}"],
    ["batches", "retry-failed", "{batch}"],
    ["jobs", "retry", "{dead}"],
    ["jobs", "delete", "--state", "dead"],
    ["jobs", "run-now", "--state", "scheduled,retryable"],
    ["dead", "requeue", "{group}"],
    ["dead", "delete", "{group}"],
    ["prune", "--dead-older-than", "0s"],
    ["outbox", "retry", "--topic", "t"],
    ["events", "publish", "order.paid", "--data", '{"order": 1}'],
    ["ledger", "create", "--table", "public.book"],
    ["enqueue", "basic.echo", "--args", '{"name": "x"}', "--app", APP, "--dsn", "{dsn}"],
]


@pytest.mark.parametrize("args", DRY_RUNS, ids=[" ".join(a[:2]) for a in DRY_RUNS])
def test_a_dry_run_changes_nothing_and_says_what_would_happen(
    dsn: str, conn: psycopg.Connection[Any], world: dict[str, Any], args: list[str]
) -> None:
    args = [a.replace("{batch}", str(world["batch"])).replace("{dead}", str(world["dead"]))
            .replace("{group}", world["group"]).replace("{dsn}", dsn) for a in args]
    before = snapshot(conn)
    human = ok(run(dsn, *args, "--dry-run"))
    assert human.stdout.startswith("dry run:") or "dry run" in human.stdout, human.stdout
    as_json = ok(run(dsn, *args, "--dry-run", "--json"))
    assert json.loads(as_json.stdout)["dry_run"] is True
    assert snapshot(conn) == before
    read_only = ok(run(dsn, *args, "--dry-run", "--read-only"))  # a rehearsal is no change
    assert "dry run" in read_only.stdout
    assert snapshot(conn) == before


def test_a_dry_run_shows_the_state_the_action_would_leave(dsn: str, world: dict[str, Any]) -> None:
    paused = json.loads(ok(run(dsn, "queues", "pause", "mail", "--for", "30m", "--dry-run",
                               "--json", "--actor", "bob")).stdout)
    assert paused["paused"] is True and paused["paused_by"] == "bob"
    assert paused["pause_expires_at"] is not None
    cancel = ok(run(dsn, "batches", "cancel", str(world["batch"]), "--dry-run")).stdout
    assert cancel.startswith("dry run: batch") and "2 waiting targets end cancelled" in cancel
    refused = run(dsn, "queues", "pause", "nope", "--dry-run")
    assert refused.exit_code == 1 and "(queue_not_found)" in refused.stderr  # as the real one


def test_queues_pause_for_zero_is_refused(dsn: str, conn: psycopg.Connection[Any]) -> None:
    insert_job(conn, queue="mail")
    for value in ("0", "0s", "0m"):
        refused = run(dsn, "queues", "pause", "mail", "--for", value)
        assert refused.exit_code == 2, refused.output
        assert "--for must be longer than 0s" in refused.stderr
    assert conn.execute("SELECT paused FROM forklift.queues WHERE name = 'mail'").fetchone() == (False,)


def test_backfills_start_with_a_rate_on_a_live_run_takes_the_rate(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    ok(run(dsn, "backfills", "start", "bf.items", "--app", "apps.scheduled:app", "--rate", "4"))
    again = json.loads(ok(run(dsn, "backfills", "start", "bf.items", "--rate", "1", "--json")).stdout)
    assert again["outcome"] == "existing" and again["backfill"]["rate"] == 1.0
    assert "its rate is now 1/s (was 4/s)" in again["message"]
    same = ok(run(dsn, "backfills", "start", "bf.items", "--rate", "1")).stdout
    assert "already running" in same and "rate is now" not in same
    rows = conn.execute("SELECT action, outcome FROM forklift.audit ORDER BY id").fetchall()
    assert rows == [("backfill.start", "done"), ("backfill.start", "existing: rate 4 -> 1"),
                    ("backfill.start", "noop: existing")]


# -- enqueue ------------------------------------------------------------------------------------
def jobs(conn: psycopg.Connection[Any], schema: str = "forklift") -> list[tuple[Any, ...]]:
    return conn.execute(f"SELECT kind, args FROM {schema}.jobs ORDER BY id").fetchall()


@pytest.mark.parametrize("how", ["flag", "env"])
def test_enqueue_is_refused_in_read_only_mode(dsn: str, conn: psycopg.Connection[Any], how: str) -> None:
    args = ["enqueue", "basic.echo", "--args", '{"name": "x"}', "--app", APP, "--dsn", dsn]
    env = {"FORKLIFT_READ_ONLY": "1"} if how == "env" else {}
    refused = run(dsn, *args, *(["--read-only"] if how == "flag" else []), "--json", **env)
    assert refused.exit_code == 1
    assert json.loads(refused.stdout)["error"]["code"] == "read_only"
    assert jobs(conn) == []


def test_enqueue_is_audited_with_its_actor_and_reason(dsn: str, conn: psycopg.Connection[Any]) -> None:
    made = json.loads(ok(run(dsn, "enqueue", "basic.echo", "--args", '{"name": "a"}', "--app", APP,
                             "--actor", "ops-bot", "--reason", "replay", "--json", "--dsn", dsn)
                         ).stdout)
    row = conn.execute("SELECT actor, action, target, count, reason, outcome FROM forklift.audit"
                       ).fetchone()
    assert row == ("ops-bot", "enqueue", {"job": made["id"], "kind": "basic.echo",
                                          "queue": "default"}, 1, "replay", "enqueued")


def test_enqueue_reads_args_from_a_file_or_stdin(
    dsn: str, conn: psycopg.Connection[Any], tmp_path: Path
) -> None:
    payload = tmp_path / "args.json"
    payload.write_text('{"name": "from a file", "times": 2}')
    ok(run(dsn, "enqueue", "basic.echo", "--args", f"@{payload}", "--app", APP, "--dsn", dsn))
    ok(run(dsn, "enqueue", "basic.echo", "--args", "-", "--app", APP, "--dsn", dsn,
           input='{"name": "from stdin"}'))
    assert jobs(conn) == [("basic.echo", {"name": "from a file", "times": 2}),
                          ("basic.echo", {"name": "from stdin", "times": 1})]
    missing = run(dsn, "enqueue", "basic.echo", "--args", f"@{tmp_path / 'nope.json'}", "--app", APP)
    assert missing.exit_code == 2 and "cannot read --args file" in missing.stderr
    payload.write_text("{not json")
    bad = run(dsn, "enqueue", "basic.echo", "--args", f"@{payload}", "--app", APP, "--json")
    assert bad.exit_code == 2 and "is not JSON" in json.loads(bad.stdout)["error"]["message"]
    assert len(jobs(conn)) == 2


def test_enqueue_takes_a_schema(dsn: str, conn: psycopg.Connection[Any]) -> None:
    ok(run(dsn, "migrate", "--schema", "other"))
    ok(run(dsn, "enqueue", "basic.echo", "--args", '{"name": "o"}', "--app", APP,
           "--schema", "other", "--dsn", dsn))
    assert jobs(conn, "other") == [("basic.echo", {"name": "o", "times": 1})]
    assert jobs(conn) == []


def test_enqueue_dry_run_validates_and_stores_nothing(dsn: str, conn: psycopg.Connection[Any]) -> None:
    shown = json.loads(ok(run(dsn, "enqueue", "basic.echo", "--args", '{"name": "d"}', "--app", APP,
                              "--dry-run", "--json", "--dsn", dsn)).stdout)
    assert shown["dry_run"] is True and shown["state"] == "available"
    bad = run(dsn, "enqueue", "basic.echo", "--args", '{"times": 2}', "--app", APP, "--dry-run",
              "--dsn", dsn)
    assert bad.exit_code == 1 and "name" in bad.stderr
    assert jobs(conn) == [] and conn.execute("SELECT count(*) FROM forklift.audit").fetchone() == (0,)


def test_the_worker_takes_a_schema(dsn: str) -> None:
    env = {**os.environ, "FORKLIFT_DSN": dsn}
    done = subprocess.run(
        [sys.executable, "-m", "forklift.cli.main", "worker", "--app", APP, "--schema", "elsewhere"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False,
    )
    assert done.returncode == 1, done.stderr
    assert "'elsewhere'" in done.stderr and "forklift migrate" in done.stderr
