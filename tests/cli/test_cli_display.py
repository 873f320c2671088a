"""What the CLI prints for people: identifiers with nothing hidden, free text cleaned,
and piped output laid out without wrapping."""

from __future__ import annotations

import json
from typing import Any

import psycopg
import pytest
from apps.ops import error, insert_job, register_worker
from typer.testing import CliRunner

from forklift.cli.main import app as cli
from forklift.ops.display import invisible

HOSTILE = ["mail\x1b[0m", "mail\u200b", "mail\u202e", " mail"]


def run(dsn: str, *args: str) -> Any:
    result = CliRunner().invoke(cli, list(args), env={"FORKLIFT_DSN": dsn})
    assert result.exit_code == 0, (result.stdout, result.stderr)
    return result


def no_hidden(text: str) -> None:
    assert not [ch for ch in text if invisible(ch) and ch not in "\n"], repr(text)


@pytest.mark.parametrize(
    "args",
    [["stats"], ["queues", "list"], ["jobs", "list"], ["workers", "list"], ["audit"],
     ["dead", "groups"]],
)
def test_hostile_identifiers_are_shown_escaped_and_apart(
    dsn: str, conn: psycopg.Connection[Any], args: list[str]
) -> None:
    insert_job(conn, queue="mail", kind="send")
    for name in HOSTILE:
        insert_job(conn, queue=name, kind=f"send{name}", state="dead",
                   errors=[error(f"code{name}", "boom \x1b[2J")])
        run(dsn, "queues", "pause", name, "--reason", "r\x1b[31m")
    register_worker(conn, "w\u200b1", ["mail\x1b[0m"])
    out = run(dsn, *args).stdout
    no_hidden(out)
    if args[0] == "workers":
        assert "w\\u200b1" in out and "mail\\x1b[0m" in out
    elif args[0] != "audit":
        for shown in ("mail\\x1b[0m", "mail\\u200b", "mail\\u202e"):
            assert shown in out, (shown, out)


def test_jobs_show_escapes_the_job_s_identifiers(dsn: str, conn: psycopg.Connection[Any]) -> None:
    job = insert_job(conn, queue="q\u2028x", kind="k\x07", tags=["t\u200bag"], state="dead",
                     errors=[error("e\x1b[1m", "message \x1b[31mred\x1b[0m")])
    out = run(dsn, "jobs", "show", str(job)).stdout
    no_hidden(out)
    for shown in ("q\\u2028x", "k\\x07", "t\\u200bag", "e\\x1b[1m", "message red"):
        assert shown in out, (shown, out)
    raw = json.loads(run(dsn, "jobs", "show", str(job), "--json").stdout)
    assert (raw["queue"], raw["kind"], raw["tags"]) == ("q\u2028x", "k\x07", ["t\u200bag"])


def test_a_pause_names_the_hostile_queue_not_its_look_alike(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    insert_job(conn, queue="mail")
    insert_job(conn, queue="mail\u200b")
    out = run(dsn, "queues", "pause", "mail\u200b").stdout
    assert "queue mail\\u200b: paused" in out
    rows = dict(conn.execute("SELECT name, paused FROM forklift.queues").fetchall())
    assert rows == {"mail": False, "mail\u200b": True}


def test_piped_output_is_not_wrapped(dsn: str, conn: psycopg.Connection[Any]) -> None:
    long_queue = "q" + "-very-long-queue-name" * 8
    insert_job(conn, queue=long_queue, kind="k" * 90)
    out = run(dsn, "jobs", "list").stdout
    row = next(line for line in out.splitlines() if long_queue in line)
    assert "k" * 90 in row  # one line, nothing folded at 80 columns
    assert len(row) > 200
