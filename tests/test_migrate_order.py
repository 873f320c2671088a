"""Migrations are applied by number, whatever order they landed in."""

from __future__ import annotations

import psycopg
import pytest

from forklift import SchemaOutdated
from forklift._migrate import ensure_current, pending


def test_a_lower_migration_that_lands_later_is_still_pending(dsn: str) -> None:
    # Two branches numbered their migrations 0005 and 0006; a database that got 0006 first
    # must still get 0005, and a worker must refuse it until it has.
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute("DELETE FROM forklift.schema_version WHERE version = 2")
        assert [m.version for m in pending(c, "forklift")] == [2]
        with pytest.raises(SchemaOutdated):
            ensure_current(c, "forklift")
