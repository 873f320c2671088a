"""``--replica-dsn`` / FORKLIFT_REPLICA_DSN on the command line: a reading command reads the
replica and says so in its ``replica`` JSON object; an action stays on the primary; a lagging
or unreachable replica sends the reads to the primary with one warning line; a primary given
as the replica is refused. Against a real standby of the test server (tests/replica.py)."""

from __future__ import annotations

import json
from typing import Any

import psycopg
from apps.ops import insert_job
from helpers import wait_until
from psycopg.conninfo import conninfo_to_dict
from replica import Replica, replica  # noqa: F401 (the fixture)
from typer.testing import CliRunner

from forklift.cli.main import app as cli


def run(dsn: str, *args: str, env: dict[str, str] | None = None) -> Any:
    return CliRunner().invoke(cli, list(args), env={"FORKLIFT_DSN": dsn, **(env or {})})


def as_json(result: Any) -> Any:
    assert result.exit_code == 0, (result.stdout, result.stderr)
    return json.loads(result.stdout)


def dbname_of(dsn: str) -> str:
    return str(conninfo_to_dict(dsn)["dbname"])


def replayed_jobs(replica: Replica, dsn: str, n: int) -> None:  # noqa: F811
    def seen() -> int | None:
        try:
            with replica.connect(dbname_of(dsn)) as r:
                row = r.execute("SELECT count(*) FROM forklift.jobs").fetchone()
                return int(row[0]) if row else None
        except psycopg.Error:
            return None

    wait_until(lambda: seen() == n, timeout=60, message=lambda: f"replica shows {seen()} jobs")


def test_a_read_command_reads_the_replica_and_its_json_says_so(
    dsn: str, conn: psycopg.Connection[Any], replica: Replica  # noqa: F811
) -> None:
    first = insert_job(conn, state="dead", queue="mail")
    replayed_jobs(replica, dsn, 1)
    target = replica.dsn(dbname_of(dsn))
    data = as_json(run(dsn, "stats", "--json", "--replica-dsn", target))
    assert data["totals"]["counts"]["dead"] == 1
    r = data["replica"]
    assert (r["used"], r["state"], r["max_lag_seconds"]) == (True, "used", 30.0)
    assert r["target"].endswith(f":{replica.info.port}/{dbname_of(dsn)}")
    assert isinstance(r["lag_seconds"], float) and "within the 30s limit" in r["reason"]
    assert "password" not in json.dumps(r)

    # The environment variable does the same; the list is the replica's (replay paused: a job
    # committed since is not in it).
    env = {"FORKLIFT_REPLICA_DSN": target, "FORKLIFT_REPLICA_MAX_LAG": "3600"}
    replica.pause()
    try:
        insert_job(conn, state="dead", queue="mail")
        data = as_json(run(dsn, "jobs", "list", "--state", "dead", "--json", env=env))
        assert [j["id"] for j in data["jobs"]] == [first]
        assert data["replica"]["used"] is True and data["replica"]["max_lag_seconds"] == 3600

        # Past the limit: the primary's answer (both jobs), and a warning line saying why.
        wait_until(lambda: as_json(run(dsn, "jobs", "list", "--json", "--replica-max-lag",
                                       "0.5", env=env))["replica"]["state"] == "lagging",
                   timeout=30, message="the replica never read as lagging")
        result = run(dsn, "jobs", "list", "--state", "dead", "--json",
                     "--replica-max-lag", "0.5", env=env)
        data = as_json(result)
        assert len(data["jobs"]) == 2 and data["replica"]["used"] is False
        assert "over the 0.5s limit" in data["replica"]["reason"]
        (line,) = result.stderr.splitlines()
        assert line.startswith("warning: replica ") and "reads go to the primary" in line
        # A human command says it too, on stderr, in one line.
        human = run(dsn, "stats", "--replica-max-lag", "0.5", env=env)
        assert human.exit_code == 0 and "Traceback" not in human.stderr
        assert human.stderr.count("warning: replica") == 1
    finally:
        replica.resume()


def test_an_action_acts_on_the_primary_and_its_json_says_the_replica_was_not_used(
    dsn: str, conn: psycopg.Connection[Any], replica: Replica  # noqa: F811
) -> None:
    insert_job(conn, queue="mail")
    replayed_jobs(replica, dsn, 1)
    env = {"FORKLIFT_REPLICA_DSN": replica.dsn(dbname_of(dsn))}
    data = as_json(run(dsn, "queues", "pause", "mail", "--reason", "outage", "--json",
                       "--actor", "alice", env=env))
    assert data["paused"] is True
    assert data["replica"] == {
        "target": data["replica"]["target"], "used": False, "state": "not_asked",
        "reason": "an action reads and writes the primary only", "lag_seconds": None,
        "max_lag_seconds": 30.0}
    assert conn.execute("SELECT paused FROM forklift.queues WHERE name = 'mail'"
                        ).fetchone() == (True,)
    assert conn.execute("SELECT actor, action, reason FROM forklift.audit").fetchall() == [
        ("alice", "pause", "outage")]
    # The replica follows; reading it shows the pause.
    wait_until(lambda: as_json(run(dsn, "queues", "explain", "mail", "--json", env=env)
                               ).get("replica", {}).get("used"), timeout=30)


def test_an_unreachable_replica_sends_reads_to_the_primary_with_one_line(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    insert_job(conn, queue="mail")
    gone = "host=/nonexistent-forklift-replica port=5999 dbname=x user=nobody password=s3cret"
    result = run(dsn, "stats", "--json", "--replica-dsn", gone)
    data = as_json(result)
    assert data["totals"]["counts"]["available"] == 1
    assert data["replica"]["used"] is False and data["replica"]["state"] == "unreachable"
    assert "s3cret" not in result.stdout + result.stderr
    (line,) = result.stderr.splitlines()
    assert line.startswith("warning: replica socket /nonexistent-forklift-replica:5999/x:"
                           " unreachable (")
    assert line.count("/nonexistent-forklift-replica") == 1  # named once
    assert "Traceback" not in result.stderr


def test_a_primary_given_as_the_replica_is_refused(dsn: str) -> None:
    result = run(dsn, "stats", "--json", "--replica-dsn", dsn)
    assert result.exit_code == 1, (result.stdout, result.stderr)
    assert json.loads(result.stdout)["error"]["code"] == "config_error"
    assert "not a standby" in result.stderr and "Traceback" not in result.stderr
    # An action never reads the replica, so it is not refused on its account.
    ok = run(dsn, "queues", "pause", "mail", "--create", "--replica-dsn", dsn)
    assert ok.exit_code == 0, (ok.stdout, ok.stderr)


def test_a_negative_lag_limit_is_a_usage_error(dsn: str) -> None:
    result = run(dsn, "stats", "--replica-max-lag", "-1")
    assert result.exit_code == 2, (result.stdout, result.stderr)


def test_the_console_refuses_a_primary_given_as_the_replica_before_it_opens(dsn: str) -> None:
    result = run(dsn, "console", "--replica-dsn", dsn)
    assert result.exit_code == 1, (result.stdout, result.stderr)
    (line,) = result.stderr.splitlines()
    assert line.startswith("error: --replica-dsn points at ") and "not a standby" in line
