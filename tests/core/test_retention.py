"""Retention windows: stored per state and queue, shown, set with typed refusals, audited; the
leader prunes by them in keyset batches."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from apps.ops import insert_job
from typer.testing import CliRunner

from forklift._features import retention as r
from forklift.cli.main import app as cli
from forklift.ops import OpsContext
from forklift.ops import retention as ops
from forklift.ops.settings import InvalidSetting

CTX = OpsContext(actor="tester")
HOUR = 3600.0
DAY = 86_400.0


def run(dsn: str, *args: str) -> Any:
    return CliRunner().invoke(cli, list(args), env={"FORKLIFT_DSN": dsn})


def finished(conn: psycopg.Connection[Any], queue: str, state: str, ago: float) -> int:
    return insert_job(conn, queue=queue, state=state,
                      finished_at=datetime.now(UTC) - timedelta(seconds=ago))


def ids(conn: psycopg.Connection[Any]) -> set[int]:
    return {int(x[0]) for x in conn.execute("SELECT id FROM forklift.jobs").fetchall()}


def test_defaults_are_the_documented_windows(conn: psycopg.Connection[Any]) -> None:
    got = ops.show(conn, CTX)
    assert got.defaults == {"completed": DAY, "cancelled": 7 * DAY, "dead": 30 * DAY}
    assert got.queues == [] and got.for_queue("anything") == got.defaults


def test_set_show_reset_and_audit(conn: psycopg.Connection[Any]) -> None:
    conn.execute("INSERT INTO forklift.queues (name) VALUES ('mail')")
    ops.set_window(conn, CTX, "completed", "2h", queue="mail", reason="noisy")
    ops.set_window(conn, CTX, "dead", "forever", queue="mail")
    got = ops.set_window(conn, CTX, "cancelled", 3 * DAY)
    assert got.for_queue("mail") == {"completed": 2 * HOUR, "cancelled": 3 * DAY, "dead": None}
    assert got.for_queue("other")["completed"] == DAY
    audit = conn.execute("SELECT actor, action, target, reason FROM forklift.audit ORDER BY id"
                         ).fetchall()
    assert audit[0] == ("tester", "retention set",
                        {"state": "completed", "queue": "mail", "seconds": 7200.0}, "noisy")
    assert len(audit) == 3
    got = ops.reset_window(conn, CTX, "completed", queue="mail")
    assert got.for_queue("mail")["completed"] == DAY
    assert ops.reset_window(conn, CTX, "cancelled").defaults["cancelled"] == 7 * DAY
    assert conn.execute("SELECT count(*) FROM forklift.audit").fetchone() == (5,)


@pytest.mark.parametrize(("state", "window", "queue", "named"), [
    ("completed", "-1d", None, "'-1d'"),
    ("completed", "-5", None, "'-5'"),
    ("completed", "99999d", None, "absurd"),
    ("completed", "soon", None, "'soon'"),
    ("finished", "1d", None, "'finished'"),
    ("running", "1d", None, "'running'"),
    ("completed", "1d", "nosuchqueue", "'nosuchqueue'"),
])
def test_refusals_name_the_value_and_change_nothing(
    conn: psycopg.Connection[Any], state: str, window: str, queue: str | None, named: str
) -> None:
    before = ops.show(conn, CTX)
    with pytest.raises(InvalidSetting, match=named):
        ops.set_window(conn, CTX, state, window, queue=queue)
    assert ops.show(conn, CTX) == before
    assert conn.execute("SELECT count(*) FROM forklift.audit").fetchone() == (0,)


def test_create_sets_up_an_unknown_queue(conn: psycopg.Connection[Any]) -> None:
    ops.set_window(conn, CTX, "completed", "1h", queue="new", create=True)
    assert conn.execute("SELECT name FROM forklift.queues").fetchall() == [("new",)]


def test_prune_follows_the_windows(conn: psycopg.Connection[Any]) -> None:
    conn.execute("INSERT INTO forklift.queues (name) VALUES ('mail'), ('billing')")
    ops.set_window(conn, CTX, "completed", "1h", queue="mail")
    ops.set_window(conn, CTX, "completed", "forever", queue="billing")
    gone = {finished(conn, "mail", "completed", 2 * HOUR),
            finished(conn, "default", "completed", 2 * DAY),
            finished(conn, "default", "dead", 31 * DAY)}
    kept = {finished(conn, "mail", "completed", 0.5 * HOUR),
            finished(conn, "default", "completed", 2 * HOUR),
            finished(conn, "billing", "completed", 400 * DAY),
            finished(conn, "default", "dead", 29 * DAY),
            insert_job(conn, queue="mail")}
    assert r.prune_sync(conn, "forklift") == len(gone)
    assert ids(conn) == kept


def test_batches_continue_after_the_last_row_deleted(conn: psycopg.Connection[Any]) -> None:
    old = [finished(conn, "default", "completed", 2 * DAY + i) for i in range(7)]
    plan = r.passes(r.load_sync(conn, "forklift"))
    gen = r.steps("forklift", plan, batch=3, max_batches=10)
    seen: list[dict[str, Any]] = []
    deleted = 0
    try:
        text, params = next(gen)
        while True:
            seen.append(dict(params))
            rows = conn.execute(text, params).fetchall()
            deleted += len(rows)
            text, params = gen.send(rows)
    except StopIteration as done:
        assert done.value == deleted == 7
    completed = [p for p in seen if p["state"] == "completed"]
    assert [p["after_id"] for p in completed][:3] == [0, old[4], old[1]]  # oldest first
    assert ids(conn) == set()


def test_cli_show_set_and_refuse(dsn: str, conn: psycopg.Connection[Any]) -> None:
    conn.execute("INSERT INTO forklift.queues (name) VALUES ('mail')")
    got = run(dsn, "retention", "set", "dead", "14d", "--queue", "mail", "--json")
    assert got.exit_code == 0, got.stderr
    assert json.loads(got.stdout)["queues"][0]["seconds"] == 14 * DAY
    text = run(dsn, "retention", "show").stdout
    assert "mail" in text and "14.0d" in text and "(every queue)" in text
    bad = run(dsn, "retention", "set", "dead", "--", "-3d")
    assert bad.exit_code == 2 and "'-3d'" in bad.stderr
    bad = run(dsn, "retention", "set", "dead", "3d", "--queue", "nope", "--json")
    assert bad.exit_code == 2 and json.loads(bad.stdout)["error"]["code"] == "invalid_setting"
    ql = run(dsn, "queues", "list", "--json")
    assert json.loads(ql.stdout)[0]["retention"]["dead"] == 14 * DAY
    assert "14.0d" in run(dsn, "queues", "list").stdout
    assert json.loads(run(dsn, "health", "--json").stdout)["retention"]["defaults"]["dead"] == (
        30 * DAY)
