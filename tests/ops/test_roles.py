"""Least-privilege roles: what each may do, and the read-only role through every CLI command."""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
import typer
from apps.ops import error, insert_job, register_worker
from psycopg.conninfo import make_conninfo
from typer.testing import CliRunner

from forklift import ReadOnly
from forklift.cli.main import app as cli
from forklift.ops import Operator, OpsContext
from forklift.ops import roles as r

CTX = OpsContext(actor="tester")

#: Every CLI command, by what it does to forklift's data. A command added to the CLI fails
#: test_every_command_is_classified until it is listed here.
READS = {
    "stats", "kinds list", "audit", "jobs list", "jobs show", "jobs explain", "schedules list",
    "backfills list", "backfills show", "batches list", "batches show", "health",
    "health horizon", "retention show", "queues list", "queues show", "queues explain", "workers list",
    "locks list", "keys list", "keys show", "dead groups", "outbox list", "events list",
    "events waits", "queues scale", "consumers list", "consumers show",
    "webhooks endpoints", "webhooks deliveries", "workflows pauses",
    "kinds versions",
}
WRITES = {
    "prune", "enqueue", "migrate", "jobs retry", "jobs cancel", "jobs delete", "jobs run-now",
    "schedules pause", "schedules resume", "schedules run-now", "backfills start",
    "backfills pause", "backfills resume", "backfills cancel", "backfills rate",
    "batches cancel", "batches retry-failed", "health set", "retention set", "retention reset",
    "queues pause", "queues resume", "queues limit", "queues rate", "queues fair", "queues aging",
    "queues ceiling",
    "keys limit", "keys rate", "keys reset", "dead requeue", "dead delete",
    "outbox retry", "events publish", "consumers pause", "consumers resume",
    "consumers reset-cursor", "webhooks enable", "webhooks disable", "workflows replay",
    "workflows pause", "workflows resume", "kinds pause", "kinds resume",
}
#: Processes and tools rather than reads or writes of forklift's data: a worker needs the
#: worker role; the console is tested through the Operator below; roles create needs CREATEROLE.
OTHER = {"console", "bench", "worker", "demo", "db start", "db status", "db stop", "db remove", "roles create",
         # the application's own tables (a book, partitions, personal data): the app's grants
         "ledger check", "ledger create", "partitions plan", "partitions run", "subjects check"}
KNOWN_WORDS = {w for c in READS | WRITES for w in c.split()}


def commands() -> set[str]:
    found: set[str] = set()

    def walk(c: Any, path: list[str]) -> None:
        subs = getattr(c, "commands", None)
        if subs is None:
            found.add(" ".join(path))
            return
        if path and getattr(c, "invoke_without_command", False):
            found.add(" ".join(path))
        for name, sub in subs.items():
            walk(sub, [*path, name])

    walk(typer.main.get_command(cli), [])
    return found


def test_every_command_is_classified() -> None:
    assert commands() == READS | WRITES | OTHER


@pytest.fixture
def roles(dsn: str, conn: psycopg.Connection[Any]) -> Iterator[dict[str, str]]:
    """The three roles under a prefix of this test's own (roles belong to the whole server)."""
    prefix = f"t{secrets.token_hex(4)}"
    report = r.create(conn, CTX, prefix)
    try:
        yield {kind: make_conninfo(dsn, user=name) for kind, name in report.roles.items()}
    finally:
        names = ", ".join(report.roles.values())
        conn.execute(f"DROP OWNED BY {names}")
        conn.execute(f"DROP ROLE {names}")


def test_print_shows_the_sql_and_changes_nothing(conn: psycopg.Connection[Any]) -> None:
    report = r.create(conn, CTX, "printonly", print_only=True)
    assert not report.applied and report.roles["console"] == "printonly_console"
    text = "\n".join(report.statements)
    assert 'CREATE ROLE "printonly_worker" LOGIN' in text
    assert 'ALTER ROLE "printonly_console" SET default_transaction_read_only = on' in text
    assert conn.execute("SELECT count(*) FROM pg_roles WHERE rolname LIKE 'printonly%'"
                        ).fetchone() == (0,)
    out = CliRunner().invoke(cli, ["roles", "create", "--prefix", "printonly", "--print"],
                             env={"FORKLIFT_DSN": make_conninfo(conn.info.dsn)})
    assert out.exit_code == 0 and "GRANT USAGE ON SCHEMA" in out.stdout


def test_every_table_has_a_decision(conn: psycopg.Connection[Any]) -> None:
    tables = {t for (t,) in conn.execute(r.TABLES_SQL, ("forklift",)).fetchall()}
    decided = {t for kind in r.ROLE_KINDS for t in (*r.WRITES[kind], *r.APPEND[kind])}
    assert tables <= decided | set(r.OWNER_ONLY)


def test_bad_prefix_is_refused(conn: psycopg.Connection[Any]) -> None:
    with pytest.raises(Exception, match="'Bad-Prefix'"):
        r.create(conn, CTX, "Bad-Prefix")


def test_create_twice_is_safe_and_grants_what_each_needs(
    conn: psycopg.Connection[Any], roles: dict[str, str]
) -> None:
    prefix = psycopg.conninfo.conninfo_to_dict(roles["worker"])["user"].rsplit("_", 1)[0]  # type: ignore[union-attr]
    r.create(conn, CTX, str(prefix))  # again: the roles exist, grants are re-applied
    job = insert_job(conn)
    with psycopg.connect(roles["worker"], autocommit=True) as w:
        w.execute("UPDATE forklift.jobs SET priority = 1 WHERE id = %s", (job,))
        w.execute("SELECT nextval('forklift.fence_seq')")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            w.execute("UPDATE forklift.retention SET seconds = 1")
    with psycopg.connect(roles["operator"], autocommit=True) as o:
        o.execute("UPDATE forklift.retention SET seconds = 7200 WHERE state = 'completed'")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            o.execute("DELETE FROM forklift.workers")
    with psycopg.connect(roles["console"], autocommit=True) as c:
        assert c.execute("SELECT count(*) FROM forklift.jobs").fetchone() == (1,)
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            c.execute("DELETE FROM forklift.jobs")
        c.execute("SET default_transaction_read_only = off")  # the grants hold all the same
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            c.execute("DELETE FROM forklift.jobs")


def test_the_operator_api_under_the_read_only_role(
    conn: psycopg.Connection[Any], roles: dict[str, str]
) -> None:
    job = insert_job(conn, state="dead", errors=[error()])
    with Operator(roles["console"], actor="viewer") as op:
        assert op.check_role() and op.read_only  # the console shows READ-ONLY from this
        assert op.job(job).job.state == "dead" and op.stats().totals.counts["dead"] == 1
        with pytest.raises(ReadOnly, match="may not write"):
            op.requeue(job)
    with Operator(roles["operator"], actor="oncall") as op:
        assert not op.check_role()
        op.requeue(job)
    # A write the database refuses reaches the caller as ReadOnly, whatever asked for it.
    with Operator(roles["console"], actor="viewer") as op:
        op.check_role()
        op.ctx = OpsContext(actor="viewer")  # as if the role check had been skipped
        with pytest.raises(ReadOnly) as caught:
            op.cancel(job)
        assert caught.value.code == "read_only" and caught.value.detail["sqlstate"] == "25006"


def seed(conn: psycopg.Connection[Any], dsn: str) -> dict[str, str]:
    """One target of every kind a mutating command acts on (as the owner)."""
    admin = CliRunner()
    env = {"FORKLIFT_DSN": dsn}
    assert admin.invoke(cli, ["schedules", "list", "--app", "apps.scheduled:app"], env=env
                        ).exit_code == 0
    started = admin.invoke(cli, ["backfills", "start", "bf.items", "--app", "apps.scheduled:app"],
                           env=env)
    assert started.exit_code == 0, started.stderr
    batch = conn.execute(
        "INSERT INTO forklift.batches (caller, key, kind, mode, total, ttl, expires_at)"
        " VALUES ('t', 'k', 'ops.noop', 'parallel', 1, '1 day', now() + interval '1 day')"
        " RETURNING id").fetchone()
    assert batch is not None
    conn.execute("INSERT INTO forklift.queues (name) VALUES ('mail')")
    conn.execute("INSERT INTO forklift.flow_keys (name, concurrency) VALUES ('tenant', 2)")
    register_worker(conn, "w1", ["mail"])
    conn.execute("INSERT INTO forklift.consumers (name, kind, queue, batch_size, paused)"
                 " VALUES ('feed', 'feed', 'consumers', 10, true)")
    conn.execute("INSERT INTO forklift.webhook_endpoints (name, url, enabled)"
                 " VALUES ('shop', 'https://shop.example/h', false)")
    dead = insert_job(conn, state="dead", errors=[error()])
    with Operator(dsn) as op:
        group = op.dead_groups().groups[0].id
    return {
        "dead": str(dead),
        "group": group,
        "live": str(insert_job(conn, queue="mail")),
        "done": str(insert_job(conn, state="completed")),
        "later": str(insert_job(conn, state="scheduled")),
        "batch": str(batch[0]),
        "outbox": str(conn.execute("INSERT INTO forklift.outbox (topic, payload, state)"
                                   " VALUES ('t', '{}', 'dead') RETURNING id").fetchone()[0]),  # type: ignore[index]
    }


def mutating(t: dict[str, str]) -> dict[str, list[str]]:
    cmds = [
        ["prune", "--completed-older-than", "0s", "--yes"],
        # --dsn: the app object is shared by the tests of this process, bound to another db
        ["enqueue", "ops.noop", "--app", "apps.ops:app", "--dsn", t["dsn"]],
        ["migrate"],
        ["jobs", "retry", t["dead"], "--yes"],
        ["jobs", "cancel", t["live"], "--yes"],
        ["jobs", "delete", t["done"], "--yes"],
        ["jobs", "run-now", t["later"], "--yes"],
        ["schedules", "pause", "beat"],
        ["schedules", "resume", "beat"],
        ["schedules", "run-now", "beat"],
        ["backfills", "start", "bf.items", "--force", "--app", "apps.scheduled:app"],
        ["backfills", "pause", "bf.items"],
        ["backfills", "resume", "bf.items"],
        ["backfills", "cancel", "bf.items", "--yes"],
        ["backfills", "rate", "bf.items", "2"],
        ["batches", "cancel", t["batch"], "--yes"],
        ["batches", "retry-failed", t["batch"], "--yes"],
        ["health", "set", "horizon_seconds", "60"],
        ["retention", "set", "completed", "2h"],
        ["retention", "reset", "dead"],
        ["queues", "pause", "mail"],
        ["queues", "resume", "mail"],
        ["queues", "limit", "mail", "3"],
        ["queues", "rate", "mail", "10/s"],
        ["queues", "fair", "mail", "on"],
        ["queues", "aging", "mail", "30s"],
        ["queues", "ceiling", "mail", "--depth", "100"],
        ["keys", "limit", "tenant", "3"],
        ["keys", "rate", "tenant", "5/s"],
        ["keys", "reset", "tenant"],
        ["dead", "requeue", t["group"], "--yes"],
        ["dead", "delete", t["group"], "--yes"],
        ["outbox", "retry", t["outbox"], "--yes"],
        ["events", "publish", "order.paid", "--data", "{}"],
        ["consumers", "pause", "feed"],
        ["consumers", "resume", "feed"],
        ["consumers", "reset-cursor", "feed", "--to", "5", "--yes"],
        ["webhooks", "enable", "shop"],
        ["webhooks", "disable", "shop", "--yes"],
        ["workflows", "replay", t["done"], "--from-step", "a"],
        ["workflows", "pause", t["later"]],
        ["workflows", "resume", t["later"]],
        ["kinds", "pause", "ops.noop"],
        ["kinds", "resume", "ops.noop"],
    ]
    return {" ".join(a for a in c[:2] if a[:1].isalpha() and a in KNOWN_WORDS): c for c in cmds}


def reading(t: dict[str, str]) -> dict[str, list[str]]:
    cmds = [
        ["stats"], ["kinds", "list"], ["audit"], ["jobs", "list"], ["jobs", "show", t["dead"]],
        ["jobs", "explain", t["live"]], ["schedules", "list"], ["backfills", "list"],
        ["backfills", "show", "bf.items"], ["batches", "list"], ["batches", "show", t["batch"]],
        ["health"], ["health", "horizon"], ["retention", "show"], ["queues", "list"],
        ["queues", "explain", "mail"], ["queues", "show", "mail"], ["workers", "list"], ["locks", "list"],
        ["keys", "list"], ["keys", "show", "tenant"],
        ["dead", "groups"], ["outbox", "list"], ["events", "list"], ["events", "waits"],
        ["queues", "scale"], ["consumers", "list"], ["consumers", "show", "feed"],
        ["queues", "scale"], ["webhooks", "endpoints"], ["webhooks", "deliveries"],
        ["workflows", "pauses"],
        ["kinds", "versions"],
    ]
    return {" ".join(a for a in c[:2] if a[:1].isalpha() and a in KNOWN_WORDS): c for c in cmds}


def snapshot(conn: psycopg.Connection[Any]) -> list[Any]:
    tables = [t for (t,) in conn.execute(r.TABLES_SQL, ("forklift",)).fetchall()]
    return [conn.execute(f"SELECT md5(coalesce(string_agg(x::text, ',' ORDER BY x::text), ''))"
                         f" FROM forklift.{t} x").fetchone() for t in sorted(tables)]


def test_the_read_only_role_cannot_write_through_any_cli_command(
    dsn: str, conn: psycopg.Connection[Any], roles: dict[str, str]
) -> None:
    targets = {**seed(conn, dsn), "dsn": roles["console"]}
    cmds = mutating(targets)
    assert set(cmds) == WRITES and set(reading(targets)) == READS
    before = snapshot(conn)
    env = {"FORKLIFT_DSN": roles["console"], "FORKLIFT_ACTOR": "viewer"}
    for args in cmds.values():
        for extra in ([], ["--json"]) if args[0] not in ("enqueue", "migrate") else ([],):
            got = CliRunner().invoke(cli, [*args, *extra], env=env)
            assert got.exit_code == 1, (args, got.stdout, got.stderr)
            assert "Traceback" not in got.stderr
            assert "(read_only)" in got.stderr, (args, got.stderr)
            if extra:
                body = json.loads(got.stdout)  # one refusal, or one per job named
                codes = {e["code"] for e in body.get("errors") or [body.get("error", {})]}
                assert codes == {"read_only"}, (args, got.stdout)
    assert snapshot(conn) == before  # nothing changed, not even an audit row

    for args in reading(targets).values():
        got = CliRunner().invoke(cli, args, env=env)
        assert got.exit_code == 0, (args, got.stdout, got.stderr)


def test_the_console_opens_read_only_under_the_read_only_role(roles: dict[str, str]) -> None:
    from forklift_console.app import ConsoleApp
    from forklift_console.backend import Backend

    backend = Backend.open(roles["console"], actor="viewer")
    try:
        backend.operator.check_role()  # what `forklift console` does before it opens
        app = ConsoleApp(backend)
        assert app.read_only and app.status.read_only  # actions off, READ-ONLY in the header
    finally:
        backend.close()
