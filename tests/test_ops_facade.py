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
    assert op._conn is None
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


def test_every_operator_method_imports_the_modules_it_loads_lazily() -> None:
    """batches, backfills, schedules, prune, dead, keys and rates load on first use: a method
    naming one must import it itself (mypy cannot tell, the module is imported for type
    checking only)."""
    import ast
    import inspect

    from forklift.ops import operator as module

    tree = ast.parse(inspect.getsource(module))
    lazy = {"_batches", "_backfills", "_schedules", "_prune", "_dead", "_keys", "_rates"}
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Operator")
    for fn in (n for n in cls.body if isinstance(n, ast.FunctionDef)):
        used = {n.value.id for n in ast.walk(ast.Module(body=fn.body, type_ignores=[]))
                if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
                and n.value.id in lazy}
        imported = {a.asname for n in ast.walk(fn) if isinstance(n, ast.ImportFrom)
                    for a in n.names}
        assert used <= imported, (fn.name, used - imported)
