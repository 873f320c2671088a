"""Every operator command end to end through typer's runner against a real PostgreSQL.

Exit codes: 0 done, 1 refused or failed, 2 usage error. ``--json`` output is parsed and checked.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from apps.ops import error, insert_job, job_state, register_worker
from typer.testing import CliRunner

from forklift.cli import kit as opskit
from forklift.cli.main import app as cli


def run(dsn: str, *args: str, env: dict[str, str] | None = None, input: str | None = None) -> Any:
    return CliRunner().invoke(cli, list(args), env={"FORKLIFT_DSN": dsn, **(env or {})},
                              input=input)


def ok(result: Any) -> Any:
    assert result.exit_code == 0, (result.stdout, result.stderr)
    return result


def as_json(result: Any) -> Any:
    return json.loads(ok(result).stdout)


def refused(result: Any, code: int = 1) -> str:
    assert result.exit_code == code, (result.exit_code, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    return str(result.stderr)


def audit(conn: psycopg.Connection[Any]) -> list[tuple[Any, ...]]:
    return conn.execute("SELECT actor, action, count, outcome FROM forklift.audit ORDER BY id"
                        ).fetchall()


# -- stats, workers ---------------------------------------------------------------------------
def test_stats(dsn: str, conn: psycopg.Connection[Any]) -> None:
    insert_job(conn, queue="mail")
    insert_job(conn, queue="mail", state="running", worker_id="w1")  # in_use: jobs w1 holds
    insert_job(conn, queue="[red]boom[/red]", state="dead", errors=[error()])
    register_worker(conn, "w1", ["mail"], slots=3, in_use=1)
    data = as_json(run(dsn, "stats", "--json", "--window", "10m"))
    assert data["window_seconds"] == 600 and len(data["buckets"]) == 10
    by_name = {q["name"]: q for q in data["queues"]}
    assert by_name["mail"]["counts"]["available"] == 1
    assert by_name["[red]boom[/red]"]["counts"]["dead"] == 1
    assert data["totals"]["in_use"] == 1 and data["workers"][0]["id"] == "w1"
    human = ok(run(dsn, "stats")).stdout
    assert "[red]boom[/red" in human  # markup from a job is shown (folded), not rendered
    assert "w1" in human


def test_stats_watch_json_prints_one_document_per_refresh(dsn: str) -> None:
    out = ok(run(dsn, "stats", "--watch", "--json", "--count", "2", "--interval", "0.2")).stdout
    docs = [json.loads(line) for line in out.splitlines()]
    assert len(docs) == 2 and all("totals" in d for d in docs)
    ok(run(dsn, "stats", "--watch", "--count", "1"))


def test_stats_bad_window_is_a_usage_error(dsn: str) -> None:
    assert "not a duration" in refused(run(dsn, "stats", "--window", "soon"), 2)


def test_workers_list(dsn: str, conn: psycopg.Connection[Any]) -> None:
    register_worker(conn, "w1", ["a", "b"], state="draining")
    (w,) = as_json(run(dsn, "workers", "list", "--json"))
    assert (w["id"], w["state"], w["queues"]) == ("w1", "draining", ["a", "b"])
    assert w["drain_remaining_seconds"] > 0 and w["heartbeat_age_seconds"] >= 0
    assert "w1" in ok(run(dsn, "workers", "list")).stdout


# -- jobs list, show, explain -----------------------------------------------------------------
def test_jobs_list_filters_pages_and_counts(dsn: str, conn: psycopg.Connection[Any]) -> None:
    ids = [insert_job(conn, state="dead", queue="mail", tags=["vip"], args={"n": i})
           for i in range(5)]
    insert_job(conn, state="completed", queue="mail")
    page = as_json(run(dsn, "jobs", "list", "--state", "dead", "--tag", "vip", "--limit", "3",
                       "--sort", "id", "--json"))
    assert [j["id"] for j in page["jobs"]] == ids[:3]
    assert (page["count"], page["count_capped"]) == (5, False)
    assert page["filter"] == {"states": ["dead"], "tags": ["vip"]} and page["sort"] == "id"
    rest = as_json(run(dsn, "jobs", "list", "--state", "dead", "--tag", "vip", "--limit", "3",
                       "--sort", "id", "--cursor", page["next_cursor"], "--json"))
    assert [j["id"] for j in rest["jobs"]] == ids[3:] and rest["next_cursor"] is None
    found = as_json(run(dsn, "jobs", "list", "--search", '"n": 4', "--json"))
    assert [j["id"] for j in found["jobs"]] == [ids[4]]
    human = ok(run(dsn, "jobs", "list", "-q", "mail")).stdout
    assert "6 shown of 6 matching" in human


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--state", "runing"], "unknown state"),
        (["--id-min", "9", "--id-max", "3"], "impossible id range"),
        (["--after", "1h", "--before", "2h"], "impossible time range"),
        (["--sort", "args"], "cannot sort by"),
        (["--cursor", "garbage"], "cursor"),
        (["--search", "a\x00b"], "NUL"),
    ],
)
def test_jobs_list_bad_input_is_a_usage_error(dsn: str, args: list[str], needle: str) -> None:
    result = run(dsn, "jobs", "list", *args, "--json")
    assert needle in refused(result, 2)
    assert json.loads(result.stdout)["error"]["code"] == "invalid_filter"


def test_jobs_show_and_explain(dsn: str, conn: psycopg.Connection[Any]) -> None:
    job = insert_job(conn, state="retryable", attempt=2, errors=[error(message="[bold]x[/bold]")],
                     created_at=datetime.now(UTC) - timedelta(minutes=1))
    shown = as_json(run(dsn, "jobs", "show", str(job), "--json"))
    assert shown["id"] == job and shown["errors"][0]["message"] == "[bold]x[/bold]"
    assert shown["timeline"][0]["event"] == "enqueued"
    assert "[bold]x[/bold]" in ok(run(dsn, "jobs", "show", str(job))).stdout
    ex = as_json(run(dsn, "jobs", "explain", str(job), "--json"))
    assert ex["job_id"] == job and ex["reasons"][0]["code"] == "backing_off"
    assert "backing off after attempt 2" in ok(run(dsn, "jobs", "explain", str(job))).stdout
    err = refused(run(dsn, "jobs", "explain", "999999"))
    assert "no job with id 999999" in err


# -- jobs retry, cancel, delete ----------------------------------------------------------------
def test_retry_one_job(dsn: str, conn: psycopg.Connection[Any]) -> None:
    dead = insert_job(conn, state="dead")
    live = insert_job(conn, state="running")
    err = refused(run(dsn, "jobs", "retry", str(dead)))
    assert "pass --yes" in err and job_state(conn, dead) == "dead"
    data = as_json(run(dsn, "jobs", "retry", str(dead), "--yes", "--json", "--actor", "dana",
                       "--reason", "upstream fixed"))
    assert data["results"][0]["outcome"] == "requeued" and data["errors"] == []
    assert job_state(conn, dead) == "available"
    result = run(dsn, "jobs", "retry", str(live), "--yes", "--json")
    assert "not_requeueable" in refused(result)
    assert json.loads(result.stdout)["errors"][0]["code"] == "not_requeueable"
    assert audit(conn) == [("dana", "requeue", 1, "requeued"),
                           (audit(conn)[1][0], "requeue", 0, "refused: not_requeueable")]


def test_retry_needs_ids_or_a_filter(dsn: str) -> None:
    assert "--all" in refused(run(dsn, "jobs", "retry"), 2)


@pytest.mark.parametrize(("verb", "states"), [
    ("retry", ["dead", "cancelled"]), ("cancel", ["available", "scheduled"]),
    ("delete", ["completed", "dead"])])
def test_bulk_dry_run_matches_the_real_run(
    dsn: str, conn: psycopg.Connection[Any], verb: str, states: list[str]
) -> None:
    for i in range(12):
        insert_job(conn, state=states[i % 2], queue="mail" if i % 3 else "sms")
    args = ["jobs", verb, "--queue", "mail", "--json"]
    dry = as_json(run(dsn, *args, "--dry-run"))
    assert dry["dry_run"] is True and dry["matched"] == 8
    assert audit(conn) == []
    assert "pass --yes" in refused(run(dsn, "jobs", verb, "--queue", "mail"))
    real = as_json(run(dsn, *args, "--yes", "--actor", "erin"))
    assert real["done"] == dry["matched"] and real["sample_ids"] == dry["sample_ids"]
    assert [(a[0], a[2]) for a in audit(conn)] == [("erin", 8)]
    again = as_json(run(dsn, *args, "--dry-run"))
    assert again["matched"] == 0  # the real run left nothing for the same filter


def test_bulk_with_a_cap(dsn: str, conn: psycopg.Connection[Any]) -> None:
    for _ in range(5):
        insert_job(conn, state="dead")
    data = as_json(run(dsn, "jobs", "retry", "--all", "--cap", "3", "--yes", "--json"))
    assert (data["done"], data["more"]) == (3, True)
    assert "capped at 1" in ok(run(dsn, "jobs", "retry", "--all", "--cap", "1", "--dry-run")).stdout


def test_cancel_and_delete_single_jobs(dsn: str, conn: psycopg.Connection[Any]) -> None:
    waiting = insert_job(conn)
    running = insert_job(conn, state="running")
    data = as_json(run(dsn, "jobs", "cancel", str(waiting), str(running), "--yes", "--json"))
    assert [r["outcome"] for r in data["results"]] == ["cancelled", "cancel_requested"]
    assert "not_deletable" in refused(run(dsn, "jobs", "delete", str(running), "--yes"))
    out = ok(run(dsn, "jobs", "delete", str(waiting), "--yes")).stdout
    assert "deleted" in out and job_state(conn, waiting) is None
    finished = insert_job(conn, state="completed")
    assert "not_cancellable" in refused(run(dsn, "jobs", "cancel", "--yes", str(finished)))


def test_confirmation_on_a_terminal(
    dsn: str, conn: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(opskit, "interactive", lambda: True)
    dead = insert_job(conn, state="dead")
    no = run(dsn, "jobs", "retry", "--state", "dead", input="n\n")
    assert "aborted: nothing changed" in refused(no)
    assert "would act on 1 job" in no.stdout and job_state(conn, dead) == "dead"
    ok(run(dsn, "jobs", "retry", "--state", "dead", input="y\n"))
    assert job_state(conn, dead) == "available"


# -- queues --------------------------------------------------------------------------------
def test_queues(dsn: str, conn: psycopg.Connection[Any]) -> None:
    insert_job(conn, queue="mail")
    paused = as_json(run(dsn, "queues", "pause", "mail", "--reason", "smtp down", "--for", "30m",
                         "--json", "--actor", "frank"))
    assert (paused["paused"], paused["paused_by"], paused["pause_reason"]) == (
        True, "frank", "smtp down")
    assert paused["pause_expires_at"] is not None
    (listed,) = as_json(run(dsn, "queues", "list", "--json"))
    assert listed["name"] == "mail" and listed["paused"]
    assert "paused" in ok(run(dsn, "queues", "list")).stdout
    ex = as_json(run(dsn, "queues", "explain", "mail", "--json"))
    assert ex["reasons"][0]["code"] == "queue_paused"
    assert "paused by frank" in ok(run(dsn, "queues", "explain", "mail")).stdout
    limited = as_json(run(dsn, "queues", "limit", "mail", "2", "--json"))
    assert limited["concurrency"] == 2
    assert as_json(run(dsn, "queues", "limit", "mail", "none", "--json"))["concurrency"] is None
    resumed = as_json(run(dsn, "queues", "resume", "mail", "--json"))
    assert resumed["paused"] is False and resumed["paused_by"] is None
    assert [a[1] for a in audit(conn)] == ["pause", "limit", "limit", "resume"]


def test_queue_refusals(dsn: str, conn: psycopg.Connection[Any]) -> None:
    assert "no queue named 'emial'" in refused(run(dsn, "queues", "pause", "emial"))
    assert "--create" in refused(run(dsn, "queues", "pause", "emial"))
    ok(run(dsn, "queues", "pause", "emial", "--create"))
    assert "not a whole number" in refused(run(dsn, "queues", "limit", "emial", "lots"), 2)
    assert "between 0" in refused(run(dsn, "queues", "limit", "emial", "--", "-1"), 2)
    assert "in the past" in refused(run(dsn, "queues", "pause", "emial", "--until",
                                        "2001-01-01T00:00:00"), 2)


# -- audit, prune --------------------------------------------------------------------------
def test_audit_lists_every_action_with_its_actor(dsn: str, conn: psycopg.Connection[Any]) -> None:
    job = insert_job(conn)
    ok(run(dsn, "jobs", "cancel", str(job), "--yes", env={"FORKLIFT_ACTOR": "gina"}))
    ok(run(dsn, "queues", "pause", "default", "--actor", "hank", "--reason", "[b]why[/b]"))
    entries = as_json(run(dsn, "audit", "--json"))
    assert [(e["actor"], e["action"]) for e in entries] == [("hank", "pause"), ("gina", "cancel")]
    assert entries[1]["target"] == {"job": job} and entries[1]["outcome"] == "cancelled"
    assert [e["action"] for e in as_json(run(dsn, "audit", "--by", "gina", "--json"))] == ["cancel"]
    human = ok(run(dsn, "audit")).stdout
    assert "[b]why[/b]" in human and "gina" in human


def test_prune(dsn: str, conn: psycopg.Connection[Any]) -> None:
    old = conn.execute("SELECT now() - interval '10 days'").fetchone()[0]  # type: ignore[index]
    for _ in range(4):
        insert_job(conn, state="completed", finished_at=old)
    insert_job(conn, state="dead", finished_at=old)
    keep = insert_job(conn, state="completed")
    assert "say what to prune" in refused(run(dsn, "prune"), 2)
    dry = as_json(run(dsn, "prune", "--completed-older-than", "7d", "--dead-older-than", "30d",
                      "--dry-run", "--json"))
    assert dry["deleted"] == {"completed": 4, "dead": 0}
    assert "pass --yes" in refused(run(dsn, "prune", "--completed-older-than", "7d"))
    real = as_json(run(dsn, "prune", "--completed-older-than", "7d", "--dead-older-than", "30d",
                       "--batch-size", "3", "--yes", "--json"))
    assert real["deleted"] == dry["deleted"] and real["batches"] == 2
    assert job_state(conn, keep) == "completed"
    assert [a[2] for a in audit(conn)] == [3, 1]


# -- read-only --------------------------------------------------------------------------------
@pytest.mark.parametrize("args", [
    ["jobs", "retry", "{dead}", "--yes"],
    ["jobs", "retry", "--state", "dead", "--yes"],
    ["jobs", "cancel", "{live}", "--yes"],
    ["jobs", "delete", "{dead}", "--yes"],
    ["queues", "pause", "default"],
    ["queues", "resume", "default"],
    ["queues", "limit", "default", "3"],
    ["prune", "--dead-older-than", "0s", "--yes"],
])
@pytest.mark.parametrize("how", ["flag", "env"])
def test_read_only_refuses_every_change(
    dsn: str, conn: psycopg.Connection[Any], args: list[str], how: str
) -> None:
    dead = insert_job(conn, state="dead")
    live = insert_job(conn)
    argv = [a.format(dead=dead, live=live) for a in args]
    if how == "flag":
        result = run(dsn, *argv, "--read-only")
    else:
        result = run(dsn, *argv, env={"FORKLIFT_READ_ONLY": "1"})
    assert "read-only" in refused(result)
    assert job_state(conn, dead) == "dead" and job_state(conn, live) == "available"
    assert audit(conn) == []
    ok(run(dsn, "stats", "--read-only"))
