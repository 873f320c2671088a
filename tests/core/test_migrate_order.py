"""Migrations are applied by number, whatever order they landed in."""

from __future__ import annotations

import psycopg
import pytest

from forklift import SchemaOutdated
from forklift._db.migrate import ensure_current, pending


def test_a_lower_migration_that_lands_later_is_still_pending(dsn: str) -> None:
    # Two branches numbered their migrations 0005 and 0006; a database that got 0006 first
    # must still get 0005, and a worker must refuse it until it has.
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute("DELETE FROM forklift.schema_version WHERE version = 2")
        assert [m.version for m in pending(c, "forklift")] == [2]
        with pytest.raises(SchemaOutdated):
            ensure_current(c, "forklift")


def test_an_operator_on_an_older_schema_says_to_migrate(dsn: str) -> None:
    # A database not yet at version 15 has no stats rollup: stats() names the fix, not the
    # missing table. The check runs only once a read failed, so a current schema pays nothing.
    from forklift.ops import Operator

    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute("DROP TABLE forklift.stats_minutes, forklift.stats_rollup")
        c.execute("DELETE FROM forklift.schema_version WHERE version = 15")
    with Operator(dsn, actor="tester") as op:
        with pytest.raises(SchemaOutdated, match="run `forklift migrate`") as caught:
            op.stats()
        assert caught.value.code == "schema_outdated"
        assert op.queues() is not None  # the session is fine for what the schema has


def test_an_operator_read_on_a_current_schema_raises_what_failed(dsn: str) -> None:
    from forklift.ops import Operator

    with Operator(dsn, actor="tester") as op, pytest.raises(psycopg.errors.UndefinedTable):
        op._run(lambda conn, ctx: conn.execute("SELECT * FROM forklift.no_such_table"))
