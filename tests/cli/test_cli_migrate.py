"""`forklift migrate`: the live workers a pending migration would break, --force, and --check
reporting drift (what was changed by hand against schema.sql).

A newer release's migration is simulated by ``upgrade_probe.newer_release``: this process sees
one more migration than forklift ships, with the ``-- workers: N`` header the test chooses.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
from typing import Any

import psycopg
import pytest
from typer.testing import CliRunner
from upgrade_probe import TABLE, newer_release

from forklift import Forklift, JobContext
from forklift._db.migrate import required_version
from forklift.cli.main import app as cli


def run(*args: str) -> Any:
    return CliRunner().invoke(cli, list(args))


def worker_row(conn: psycopg.Connection[Any], wid: str, *, built: int | None,
               state: str = "running", age: float = 0.0, version: str = "0.9.0") -> None:
    """A worker's row as a worker of that build registers it (``built``: the schema it was
    built for; None as written by a worker from before the column existed)."""
    conn.execute(
        "INSERT INTO forklift.workers (id, host, pid, queues, slots, version, state,"
        " heartbeat_at, schema_built, schema_min, exited_at, exit_reason)"
        " VALUES (%s, %s, %s, '{default}', 4, %s, %s, now() - make_interval(secs => %s),"
        " %s, %s, CASE WHEN %s = 'exited' THEN now() END,"
        " CASE WHEN %s = 'exited' THEN 'drained' END)",
        (wid, f"host-{wid}", 100 + len(wid), version, state, age, built, built, state, state),
    )


def applied(conn: psycopg.Connection[Any], version: int) -> bool:
    row = conn.execute("SELECT count(*) FROM forklift.schema_version WHERE version = %s",
                       (version,)).fetchone()
    table = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (f"forklift.{TABLE}",)).fetchone()
    assert row is not None and table is not None
    assert bool(row[0]) == bool(table[0]), "the version is recorded iff the migration ran"
    return bool(row[0])


@pytest.fixture
def fleet(conn: psycopg.Connection[Any]) -> psycopg.Connection[Any]:
    """Workers of every sort: two live ones built for an older schema (one from before workers
    recorded it), and three that do not count (stale, exited, current)."""
    now = required_version()
    worker_row(conn, "old", built=None)
    worker_row(conn, "draining", built=now - 1, state="draining")
    worker_row(conn, "stale", built=now - 1, age=600)
    worker_row(conn, "gone", built=now - 1, state="exited")
    worker_row(conn, "current", built=now, version="1.0.0")
    return conn


def test_migrate_refuses_while_a_live_worker_would_break(
    dsn: str, fleet: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    now = required_version()
    extra = newer_release(monkeypatch, workers=now)
    label = f"{extra.version:04d}_{extra.name}"

    refused = run("migrate", "--dsn", dsn)
    assert refused.exit_code == 1, refused.stdout
    assert "would break 2 live workers" in refused.stdout
    assert (f"host-old pid 103 (running, forklift 0.9.0, built for schema 18 or older; {label}"
            f" needs workers built for {now} or later)") in refused.stdout
    assert f"host-draining pid 108 (draining, forklift 0.9.0, built for schema {now - 1};" \
        in refused.stdout
    assert not any(h in refused.stdout for h in ("host-stale", "host-gone", "host-current"))
    (line,) = refused.stderr.strip().splitlines()
    assert "host-old:103" in line and "--force" in line and "(workers_would_break)" in line
    assert not applied(fleet, extra.version)

    as_json = run("migrate", "--dsn", dsn, "--json")
    assert as_json.exit_code == 1
    error = json.loads(as_json.stdout)["error"]
    assert error["code"] == "workers_would_break"
    assert [(w["host"], w["pid"], w["version"], w["schema_built"], w["needs"], w["broken_by"])
            for w in error["workers"]] == [
        ("host-draining", 108, "0.9.0", now - 1, now, [label]),
        ("host-old", 103, "0.9.0", None, now, [label]),
    ]
    assert not applied(fleet, extra.version)

    dry = run("migrate", "--dsn", dsn, "--dry-run")
    assert dry.exit_code == 0, dry.stderr
    assert f"1 pending: {label} (dry run: nothing applied)" in dry.stdout
    assert "would break 2 live workers" in dry.stdout and "host-old pid 103" in dry.stdout

    check = run("migrate", "--dsn", dsn, "--check", "--json")
    assert check.exit_code == 1
    shape = json.loads(check.stdout)
    assert shape["pending"] == [label] and shape["applied"] == []
    assert [w["id"] for w in shape["breaks_workers"]] == ["draining", "old"]
    # What is pending is compared as recorded, not as schema.sql: it is not drift.
    assert shape["drift"] == []
    assert not applied(fleet, extra.version)

    forced = run("migrate", "--dsn", dsn, "--force")
    assert forced.exit_code == 0, forced.stderr
    assert f"applied: {label}" in forced.stdout and "broke 2 live workers" in forced.stdout
    assert applied(fleet, extra.version)


def test_migrate_proceeds_once_the_old_workers_are_gone(
    dsn: str, fleet: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    extra = newer_release(monkeypatch, workers=required_version())
    assert run("migrate", "--dsn", dsn).exit_code == 1
    fleet.execute("UPDATE forklift.workers SET state = 'exited', exited_at = now(),"
                  " exit_reason = 'drained' WHERE id IN ('old', 'draining')")
    done = run("migrate", "--dsn", dsn, "--json")
    assert done.exit_code == 0, done.stdout
    shape = json.loads(done.stdout)
    assert shape["applied"] == [f"{extra.version:04d}_{extra.name}"]
    assert shape["breaks_workers"] == [] and "forced" not in shape
    assert applied(fleet, extra.version)


def test_a_migration_without_a_workers_line_breaks_nobody(
    dsn: str, fleet: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    extra = newer_release(monkeypatch, workers=None)
    done = run("migrate", "--dsn", dsn)
    assert done.exit_code == 0, done.stderr
    assert "would break" not in done.stdout and "broke" not in done.stdout
    assert applied(fleet, extra.version)


def test_a_running_worker_records_its_schema_and_is_named(
    dsn: str, conn: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from apps.basic import running_worker

    # An app of its own: the shared test apps keep the database they were last pointed at.
    target = Forklift()

    @target.job(name="probe.noop")
    async def noop(ctx: JobContext, args: dict[str, Any]) -> None:
        return None

    target.use(dsn)
    now = required_version()
    with contextlib.closing(target), running_worker(target, concurrency=1) as w:
        row = conn.execute("SELECT pid, schema_built, schema_min FROM forklift.workers"
                           " WHERE id = %s", (w.state.id,)).fetchone()
        assert row == (os.getpid(), now, now)
        extra = newer_release(monkeypatch, workers=now + 1)
        refused = run("migrate", "--dsn", dsn)
        assert refused.exit_code == 1
        assert f"pid {os.getpid()} (running, forklift " in refused.stdout
        assert f"built for schema {now};" in refused.stdout
        assert not applied(conn, extra.version)


def test_check_reports_drift(dsn: str, conn: psycopg.Connection[Any]) -> None:
    clean = run("migrate", "--dsn", dsn, "--check")
    assert clean.exit_code == 0, clean.stdout
    assert "up to date" in clean.stdout and "no drift" in clean.stdout

    conn.execute("DROP INDEX forklift.jobs_dead_idx")
    conn.execute("ALTER TABLE forklift.jobs ADD COLUMN note text")
    drifted = run("migrate", "--dsn", dsn, "--check")
    assert drifted.exit_code == 1
    assert "drift: 2 differences from schema.sql:" in drifted.stdout
    assert "missing  indexes jobs_dead_idx" in drifted.stdout
    assert "extra    columns jobs.note" in drifted.stdout

    as_json = run("migrate", "--dsn", dsn, "--check", "--json")
    assert as_json.exit_code == 1
    shape = json.loads(as_json.stdout)
    assert shape["pending"] == []
    assert [(d["part"], d["name"], d["change"]) for d in shape["drift"]] == [
        ("columns", "jobs.note", "extra"), ("indexes", "jobs_dead_idx", "missing"),
    ]
    # Applying is not --check: drift is reported by --check only, and blocks nothing.
    assert run("migrate", "--dsn", dsn).exit_code == 0


def test_the_command_keeps_its_name_and_options() -> None:
    import forklift.cli.worker as worker_cmd

    assert not hasattr(worker_cmd, "migrate")
    shown = run("migrate", "--help")
    assert shown.exit_code == 0
    for option in ("--check", "--dry-run", "--force", "--partitioned-history", "--json",
                   "--dsn", "--schema"):
        assert option in shown.stdout


def test_check_names_an_index_a_concurrent_build_left_invalid(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    conn.execute("INSERT INTO forklift.jobs (kind) VALUES ('same'), ('same')")
    with pytest.raises(psycopg.errors.UniqueViolation):
        conn.execute("CREATE UNIQUE INDEX CONCURRENTLY jobs_by_hand ON forklift.jobs (kind)")
    drifted = run("migrate", "--dsn", dsn, "--check", "--json")
    assert drifted.exit_code == 1
    found = {(d["name"], d["change"]) for d in json.loads(drifted.stdout)["drift"]}
    assert found == {("jobs_by_hand", "invalid"), ("jobs_by_hand", "extra")}
    text = run("migrate", "--dsn", dsn, "--check").stdout
    assert "invalid  indexes jobs_by_hand" in text


def test_check_by_a_role_that_may_not_create_a_schema(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    # Drift is read against a scratch schema: a role without CREATE on the database gets the
    # rest of --check, and is told drift was not checked.
    role = f"fl_reader_{secrets.token_hex(3)}"
    conn.execute(f"CREATE ROLE {role} LOGIN")
    try:
        conn.execute(f"GRANT USAGE ON SCHEMA forklift TO {role}")
        conn.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA forklift TO {role}")
        reader = psycopg.conninfo.make_conninfo(dsn, user=role)
        done = run("migrate", "--dsn", reader, "--check", "--json")
        assert done.exit_code == 0, done.stdout
        shape = json.loads(done.stdout)
        assert shape["pending"] == [] and "drift" not in shape
        assert "permission denied" in shape["drift_unchecked"]
    finally:
        conn.execute(f"DROP OWNED BY {role}")
        conn.execute(f"DROP ROLE {role}")
