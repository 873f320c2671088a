"""The replica harness: a real standby of the test server follows the primary, can be made to
lag and can be stopped (what the tests of reads sent to a replica stand on)."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from helpers import wait_until
from psycopg.conninfo import conninfo_to_dict
from replica import Replica, replica  # noqa: F401 (the fixture)


def test_a_row_committed_on_the_primary_shows_on_the_replica_and_not_when_paused(
    conn: psycopg.Connection[Any], dsn: str, replica: Replica  # noqa: F811
) -> None:
    dbname = str(conninfo_to_dict(dsn)["dbname"])
    conn.execute("CREATE TABLE public.probe (n int)")
    conn.execute("INSERT INTO public.probe VALUES (1)")

    def seen() -> int | None:
        try:
            with replica.connect(dbname) as r:
                row = r.execute("SELECT count(*) FROM public.probe").fetchone()
                return int(row[0]) if row else None
        except psycopg.Error:
            return None  # the database or the table has not been replayed yet

    wait_until(lambda: seen() == 1, timeout=60, message="the replica never showed the row")
    with replica.connect(dbname) as r:
        assert r.execute("SELECT pg_is_in_recovery()").fetchone() == (True,)
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            r.execute("INSERT INTO public.probe VALUES (2)")
    replica.pause()
    try:
        conn.execute("INSERT INTO public.probe VALUES (2)")
        with replica.connect(dbname) as r:
            # Paused replay: the row is received but not applied, however long we look.
            wait_until(lambda: r.execute("SELECT pg_last_wal_receive_lsn() >"
                                         " pg_last_wal_replay_lsn()").fetchone() == (True,),
                       timeout=30, message="the replica did not receive the new WAL")
            assert seen() == 1
    finally:
        replica.resume()
    wait_until(lambda: seen() == 2, timeout=60, message="replay did not resume")
