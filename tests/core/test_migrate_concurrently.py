"""Migrations that build indexes concurrently, and the headers a migration may carry.

A statement marked ``-- concurrently`` runs as ``CREATE INDEX CONCURRENTLY IF NOT EXISTS`` after
the migration's transaction commits: writers to the table keep writing while it builds, the
version is recorded only once the index is valid, and a build that was interrupted is dropped
and built again by the next run, without replaying what already committed.
"""

from __future__ import annotations

import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from helpers import wait_until

from forklift._base.errors import ConfigError
from forklift._db.migrate import Migration, apply, building, migrations, pending

FIXTURE = Path(__file__).resolve().parent / "migrations_concurrently"
SCHEMA = "shop"


def source(tmp_path: Path, *names: str) -> Path:
    """A migrations folder holding the named fixture files (``source`` for ``apply``)."""
    folder = tmp_path / "src" / "migrations"
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        shutil.copy(FIXTURE / name, folder / name)
    return folder.parent


def recorded(conn: psycopg.Connection[Any]) -> list[int]:
    return [r[0] for r in conn.execute(f"SELECT version FROM {SCHEMA}.schema_version ORDER BY 1")]


def index_valid(conn: psycopg.Connection[Any], name: str) -> bool | None:
    row = conn.execute(
        "SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid"
        " JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relname = %s",
        (SCHEMA, name),
    ).fetchone()
    return None if row is None else bool(row[0])


def building_concurrently(conn: psycopg.Connection[Any], pid: int) -> bool:
    row = conn.execute(
        "SELECT command, phase FROM pg_stat_progress_create_index WHERE pid = %s", (pid,)
    ).fetchone()
    return row is not None and row[0] == "CREATE INDEX CONCURRENTLY"


class Migrator:
    """``apply`` on a connection of its own, in a thread: the test watches it from outside."""

    def __init__(self, dsn: str, src: Path) -> None:
        self.conn = psycopg.connect(dsn, autocommit=True, application_name="forklift:migrate")
        self.pid = self.conn.info.backend_pid
        self.applied: list[Migration] = []
        self.failure: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(src,), daemon=True)
        self.thread.start()

    def _run(self, src: Path) -> None:
        try:
            self.applied = apply(self.conn, SCHEMA, source=src)
        except BaseException as exc:  # looked at by the test
            self.failure = exc

    def join(self) -> None:
        self.thread.join(60)
        assert not self.thread.is_alive(), "the migrator did not finish"
        self.conn.close()


@pytest.fixture
def items(empty_dsn: str, tmp_path: Path) -> Iterator[psycopg.Connection[Any]]:
    """A schema at version 1 (the items table), and a writer whose transaction is open on it."""
    with psycopg.connect(empty_dsn, autocommit=True) as c:
        assert [m.version for m in apply(c, SCHEMA, source=source(tmp_path, "0001_items.sql"))
                ] == [1]
    with psycopg.connect(empty_dsn) as writer:
        writer.execute(f"INSERT INTO {SCHEMA}.items (sku) VALUES ('held-open')")
        yield writer


def test_the_index_builds_while_writers_keep_writing(
    empty_dsn: str, tmp_path: Path, items: psycopg.Connection[Any]
) -> None:
    src = source(tmp_path, "0001_items.sql", "0002_items_sku.sql")
    migrator = Migrator(empty_dsn, src)
    with psycopg.connect(empty_dsn, autocommit=True) as watch:
        # The build waits for the open writer (as every concurrent build does)...
        wait_until(lambda: building_concurrently(watch, migrator.pid), timeout=30,
                   message="the index should be building concurrently")
        # ...and meanwhile other writers are not blocked: a plain CREATE INDEX would hold a
        # SHARE lock, queued behind the open writer, and this insert would wait behind it.
        watch.execute("SET lock_timeout = '2s'")
        watch.execute(f"INSERT INTO {SCHEMA}.items (sku) VALUES ('while-building')")
        # The migration's transaction is in; the version is not, until the index is valid.
        assert recorded(watch) == [-2, 1]
        assert building(watch, SCHEMA) == [2]
        assert index_valid(watch, "items_sku_idx") is False
        items.commit()
        migrator.join()
        assert migrator.failure is None, migrator.failure
        assert [m.version for m in migrator.applied] == [2]
        assert recorded(watch) == [1, 2]
        assert index_valid(watch, "items_sku_idx") is True
        row = watch.execute(f"SELECT count(*) FROM {SCHEMA}.items").fetchone()
        assert row == (502,)
        assert apply(watch, SCHEMA, source=src) == []


def test_an_interrupted_build_is_repaired_on_the_next_run(
    empty_dsn: str, tmp_path: Path, items: psycopg.Connection[Any]
) -> None:
    src = source(tmp_path, "0001_items.sql", "0002_items_sku.sql")
    migrator = Migrator(empty_dsn, src)
    with psycopg.connect(empty_dsn, autocommit=True) as watch:
        wait_until(lambda: building_concurrently(watch, migrator.pid), timeout=30,
                   message="the index should be building concurrently")
        watch.execute("SELECT pg_cancel_backend(%s)", (migrator.pid,))
        migrator.join()
        assert isinstance(migrator.failure, psycopg.errors.QueryCanceled), migrator.failure
        # Left behind: the committed table, an invalid index, and no version recorded.
        assert index_valid(watch, "items_sku_idx") is False
        assert recorded(watch) == [-2, 1]
        assert [m.version for m in pending(watch, SCHEMA, migrations(src))] == [2]
        items.rollback()

        # The next run drops the invalid index and builds it again; the CREATE TABLE that
        # committed is not replayed (it would fail: the table exists).
        again = apply(watch, SCHEMA, source=src)
        assert [m.version for m in again] == [2]
        assert index_valid(watch, "items_sku_idx") is True
        assert recorded(watch) == [1, 2]
        with pytest.raises(psycopg.errors.UniqueViolation, match="items_sku_idx"):
            watch.execute(f"INSERT INTO {SCHEMA}.items (sku) VALUES ('sku-1')")


def test_two_migrators_during_a_build_record_it_once(
    empty_dsn: str, tmp_path: Path, items: psycopg.Connection[Any]
) -> None:
    # The second waits for the first's build without holding a snapshot it would wait for
    # (no deadlock), then finds the version recorded and applies nothing.
    src = source(tmp_path, "0001_items.sql", "0002_items_sku.sql")
    first = Migrator(empty_dsn, src)
    with psycopg.connect(empty_dsn, autocommit=True) as watch:
        wait_until(lambda: building_concurrently(watch, first.pid), timeout=30,
                   message="the index should be building concurrently")
        second = Migrator(empty_dsn, src)
        wait_until(lambda: watch.execute(
            "SELECT state = 'idle' AND query LIKE '%%pg_try_advisory_lock%%'"
            " FROM pg_stat_activity WHERE pid = %s", (second.pid,)).fetchone() == (True,),
            timeout=30, message="the second migrator should poll for the build lock")
        items.commit()
        first.join()
        second.join()
        assert (first.failure, second.failure) == (None, None)
        assert [m.version for m in first.applied] == [2] and second.applied == []
        assert recorded(watch) == [1, 2]
        assert index_valid(watch, "items_sku_idx") is True


def test_a_concurrent_build_refuses_a_connection_inside_a_transaction(
    empty_dsn: str, tmp_path: Path
) -> None:
    src = source(tmp_path, "0001_items.sql", "0002_items_sku.sql")
    with (psycopg.connect(empty_dsn) as conn, conn.transaction(),
          pytest.raises(ConfigError, match="outside a transaction")):
        apply(conn, SCHEMA, source=src)


def test_headers_are_read(tmp_path: Path) -> None:
    found = {m.version: m for m in migrations(source(tmp_path, "0001_items.sql",
                                                                "0002_items_sku.sql"))}
    assert (found[1].workers, found[1].concurrent) == (None, ())
    assert found[2].workers == 2
    (ix,) = found[2].concurrent
    assert ix.sql() == ("CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS items_sku_idx"
                        " ON {s}.items (sku)")
    assert "items_sku_idx" not in found[2].text and "item_notes" in found[2].text


def test_concurrently_must_mark_an_index(tmp_path: Path) -> None:
    folder = tmp_path / "bad" / "migrations"
    folder.mkdir(parents=True)
    (folder / "0001_oops.sql").write_text("-- concurrently\nALTER TABLE {s}.t ADD COLUMN c int;\n")
    with pytest.raises(ConfigError, match="must precede a CREATE INDEX"):
        migrations(folder.parent)


def test_forklift_s_own_migrations_keep_plain_indexes_in_schema_sql() -> None:
    from forklift._db.migrate import schema_text

    assert "CONCURRENTLY" not in schema_text().upper()
    assert all("CONCURRENTLY" not in m.text.upper() for m in migrations())
