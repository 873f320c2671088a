"""The public facade tools use instead of forklift's internals: connect, apps, migrations,
and cutting off a hung call with ``Operator.abort()``."""

from __future__ import annotations

import threading
from typing import Any

import psycopg
import pytest
from helpers import wait_until

from forklift import ConfigError, DatabaseUnavailable, Forklift
from forklift.ops import Operator, migrations
from forklift.ops import connect as fc
from forklift.ops.apps import load_app, sync_definitions


def test_resolve_prefers_the_explicit_dsn_then_the_environment(
    dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FORKLIFT_DSN", "host=/nowhere dbname=env")
    assert fc.resolve(dsn) == fc.Source(dsn, "--dsn")
    assert fc.resolve(None).origin == "FORKLIFT_DSN"
    monkeypatch.delenv("FORKLIFT_DSN")
    monkeypatch.setenv("DATABASE_URL", "postgresql://u@h/db")
    assert fc.resolve(None) == fc.Source("postgresql://u@h/db", "DATABASE_URL")


def test_connection_names_its_purpose_and_describes_the_target(dsn: str) -> None:
    with fc.connection(dsn) as conn:
        row = conn.execute("SELECT current_setting('application_name')").fetchone()
        assert row == ("forklift:ops",)
        assert conn.autocommit
    assert conn.closed
    assert "s3cret" not in fc.describe_target("postgresql://u:s3cret@db.example:6543/app")
    assert fc.describe_target("postgresql://u:s3cret@db.example:6543/app") == "db.example:6543/app"
    with pytest.raises(DatabaseUnavailable, match=r"127\.0\.0\.1:1"):
        fc.connect("postgresql://nobody:s3cret@127.0.0.1:1/nowhere")


def test_migration_status_and_apply(empty_dsn: str) -> None:
    with fc.connection(empty_dsn, "migrate") as conn:
        before = migrations.status(conn, "forklift")
        assert (before.current, before.up_to_date) == (0, False)
        assert before.pending == [migrations.label(m) for m in migrations.pending(conn, "forklift")]
        assert before.required == migrations.required_version() == int(before.pending[-1][:4])
        applied = migrations.apply(conn, "forklift")
        assert [migrations.label(m) for m in applied] == before.pending
        after = migrations.status(conn, "forklift")
        assert after.up_to_date and after.current == after.required
        assert after.to_json()["pending"] == []
        assert migrations.apply(conn, "forklift") == []


def test_load_app_and_record_its_definitions(dsn: str, conn: psycopg.Connection[Any]) -> None:
    app = load_app("tests.apps.scheduled:app")
    assert isinstance(app, Forklift)
    with fc.connection(dsn) as c:
        sync_definitions(c, app, "forklift")
    names = {r[0] for r in conn.execute("SELECT name FROM forklift.schedules")}
    assert "beat" in names
    with pytest.raises(ConfigError, match="no_such_module"):
        load_app("tests.apps.no_such_module:app")
    with pytest.raises(ConfigError, match=r"not a forklift\.Forklift"):
        load_app("tests.apps.scheduled:ITEMS")


def test_abort_cuts_off_a_hung_call_and_the_next_call_reconnects(dsn: str) -> None:
    op = Operator(dsn)
    op.abort()  # nothing open: opens nothing, raises nothing
    assert op.session._conn is None
    first = op.conn
    failed: list[BaseException] = []

    def hang() -> None:
        try:
            op.conn.execute("SELECT pg_sleep(60)")
        except BaseException as exc:
            failed.append(exc)

    thread = threading.Thread(target=hang)
    thread.start()
    with fc.connection(dsn) as watch:
        wait_until(lambda: watch.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(60)'"
            " AND state = 'active'").fetchone() == (1,), timeout=30)
    op.abort()
    thread.join(timeout=30)
    assert not thread.is_alive()
    assert failed and isinstance(failed[0], psycopg.OperationalError)
    assert op.stats().totals is not None  # a fresh session
    assert op.conn is not first
    op.close()


def test_the_operator_loads_its_modules_on_first_use() -> None:
    """Importing the Operator (what `forklift stats --json` does) loads the stats, not the
    actions, batches, backfills, schedules, dead letters, health or roles; naming a client
    loads its own modules and no other client's."""
    import subprocess
    import sys

    probe = ("import sys, forklift.ops.operator as m; op = m.Operator('host=/nowhere'); {}"
             "print(sorted(n for n in sys.modules if n.startswith('forklift.ops.')))")
    lazy = ("actions", "batches", "backfills", "schedules", "prune", "dead", "health",
            "horizon", "roles", "locks", "explain", "jobs", "retention", "outbox", "events",
            "keys", "rates", "kinds", "charts")

    def loaded(step: str) -> str:
        return subprocess.run([sys.executable, "-c", probe.format(step)], capture_output=True,
                              text=True, check=True, timeout=60).stdout

    imported = loaded("")
    for name in lazy:
        assert f"'forklift.ops.{name}'" not in imported, (name, imported)
        assert f"'forklift.ops._clients.{name}'" not in imported, (name, imported)
    named = loaded("op.stats; op.workers; ")
    assert "'forklift.ops._clients.stats'" in named and "'forklift.ops._clients.workers'" in named
    for name in lazy:
        assert f"'forklift.ops.{name}'" not in named, (name, named)
    assert "'forklift.ops.actions'" in loaded("op.jobs; ")


def test_what_the_cli_shows_without_importing_the_filters_is_theirs() -> None:
    from forklift.cli import jobs as cli_jobs
    from forklift.ops import filters

    assert cli_jobs.SORT_KEYS == filters.SORT_KEYS
    assert cli_jobs.TIME_FIELDS == filters.TIME_FIELDS


def test_every_public_ops_module_and_embedded_says_what_it_exports() -> None:
    """forklift.ops, each of its modules and forklift.embedded have an explicit ``__all__``;
    every name listed exists, and every name of ``forklift.ops.__all__`` is listed by the
    module it comes from."""
    import importlib
    import pkgutil

    import forklift.ops

    names = ["forklift.embedded", "forklift.ops"] + [
        f"forklift.ops.{m.name}" for m in pkgutil.iter_modules(forklift.ops.__path__)
        if not m.name.startswith("_")]
    assert len(names) > 25
    for name in names:
        module = importlib.import_module(name)
        exported = module.__dict__.get("__all__")
        assert isinstance(exported, list) and exported, name
        assert len(set(exported)) == len(exported), name
        for item in exported:
            assert hasattr(module, item), f"{name}.{item}"
    for item in forklift.ops.__all__:
        home = importlib.import_module(forklift.ops._HOME[item])
        assert item in home.__all__, (item, home.__name__)
