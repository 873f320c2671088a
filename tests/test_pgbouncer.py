"""Through a real PgBouncer in transaction mode (tests/pgbouncer.py)."""

from __future__ import annotations

import psycopg
import pytest
from pgbouncer import Bouncer


def test_the_bouncer_pools_transactions(pgbouncer: Bouncer, dsn: str) -> None:
    routed = pgbouncer.route(dsn)
    with psycopg.connect(routed, autocommit=True, prepare_threshold=None) as c:
        assert c.execute("SELECT current_database()").fetchone() == (
            psycopg.conninfo.conninfo_to_dict(dsn)["dbname"],)
    # A startup parameter it cannot keep is refused, not silently dropped.
    with pytest.raises(psycopg.OperationalError, match="unsupported startup parameter"):
        psycopg.connect(routed, options="-c statement_timeout=1000").close()
