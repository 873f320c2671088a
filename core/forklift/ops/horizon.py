"""Who holds back vacuum: the oldest transaction, replication slot or prepared transaction.

VACUUM may only remove a dead row version once no snapshot can still see it. The oldest xmin
still needed (the *horizon*) belongs to one of three kinds of holder: a session with an open
transaction or snapshot (an idle-in-transaction client, a long report, a REPEATABLE READ
snapshot, a standby's ``hot_standby_feedback`` through its walsender), a replication slot with
an ``xmin``, or a prepared (two-phase) transaction nobody finished. While it is held, every job
completed, retried or deleted leaves a dead row that autovacuum cannot reclaim, and the jobs
table and its indexes bloat. Only holders that affect this database are listed (sessions of
other databases do not hold back vacuum of its tables; slots and walsenders are server-wide).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg

from forklift.ops.context import OpsContext
from forklift.ops.shape import Shape

__all__ = ["HorizonHolder", "advice", "holders"]

# Ordered by how far back each holds the horizon (xid age), then by how long (oldest first).
HOLDERS_SQL = """
WITH holders AS (
    SELECT 'transaction'::text AS kind, a.pid, NULL::text AS name, a.application_name,
           host(a.client_addr) AS client, a.usename::text AS role, a.state, a.backend_type,
           a.xact_start AS since, a.query_start,
           age(coalesce(a.backend_xid, a.backend_xmin))::bigint AS xid_age,
           left(a.query, 300) AS query
    FROM pg_stat_activity a
    WHERE (a.datname = current_database() OR a.backend_type = 'walsender')
      AND a.pid <> pg_backend_pid()
      AND (a.backend_xid IS NOT NULL OR a.backend_xmin IS NOT NULL)
    UNION ALL
    SELECT 'replication_slot', s.active_pid, s.slot_name::text, NULL, NULL, NULL,
           CASE WHEN s.active THEN 'active' ELSE 'inactive' END, s.slot_type, NULL, NULL,
           age(s.xmin)::bigint, NULL
    FROM pg_replication_slots s
    WHERE s.xmin IS NOT NULL AND (s.database IS NULL OR s.database = current_database())
    UNION ALL
    SELECT 'prepared_transaction', NULL, p.gid, NULL, NULL, p.owner::text, 'prepared', NULL,
           p.prepared, NULL, age(p.transaction)::bigint, NULL
    FROM pg_prepared_xacts p
    WHERE p.database = current_database()
)
SELECT kind, pid, name, application_name, client, role, state, backend_type, since,
       query_start, extract(epoch FROM now() - since)::float8, xid_age, query
FROM holders
ORDER BY xid_age DESC NULLS LAST, since ASC NULLS LAST
LIMIT %s
"""


@dataclass(frozen=True)
class HorizonHolder(Shape):
    #: transaction, replication_slot or prepared_transaction
    kind: str
    #: The backend holding it (a slot's consumer while active); None for a prepared transaction.
    pid: int | None
    #: The slot's name or the prepared transaction's gid.
    name: str | None
    application: str | None
    client: str | None
    role: str | None
    #: A session's state (active, idle in transaction...), a slot's active|inactive, prepared.
    state: str | None
    backend_type: str | None
    #: When the transaction began (or was prepared); None for a slot.
    since: datetime | None
    query_start: datetime | None
    age_seconds: float | None
    #: Transactions since the held xmin: how much history vacuum must keep for it.
    xid_age: int | None
    #: The session's current or last statement (first 300 characters).
    query: str | None
    #: What an operator can do about it, as SQL to run (or a sentence).
    action: str

    @classmethod
    def from_row(cls, row: tuple[Any, ...]) -> HorizonHolder:
        columns = [f for f in cls.__dataclass_fields__ if f != "action"]
        return cls(**dict(zip(columns, row, strict=True)),
                   action=advice(str(row[0]), row[1], row[2], row[6]))


def advice(kind: str, pid: int | None, name: str | None, state: str | None) -> str:
    if kind == "replication_slot":
        if state == "active":
            return (f"stop or fix the consumer of slot {name!r} (pid {pid}), which is not"
                    f" confirming progress; if it is abandoned: SELECT pg_terminate_backend({pid});"
                    f" SELECT pg_drop_replication_slot({_literal(name)});")
        return (f"slot {name!r} has no consumer: if nothing will read it again,"
                f" SELECT pg_drop_replication_slot({_literal(name)});")
    if kind == "prepared_transaction":
        return (f"a two-phase transaction was prepared and never finished: ask its owner, then"
                f" ROLLBACK PREPARED {_literal(name)}; (or COMMIT PREPARED {_literal(name)};)")
    if state == "active":
        return (f"a long statement: SELECT pg_cancel_backend({pid}); cancels it,"
                f" SELECT pg_terminate_backend({pid}); ends the session")
    return (f"end the session: SELECT pg_terminate_backend({pid}); then fix the client that"
            " leaves transactions open (idle_in_transaction_session_timeout helps)")


def _literal(text: str | None) -> str:
    return "'" + (text or "").replace("'", "''") + "'"


def holders(conn: psycopg.Connection[Any], ctx: OpsContext, limit: int = 5) -> list[HorizonHolder]:
    """The oldest holders of the xmin horizon first (at most ``limit``)."""
    rows = conn.execute(HOLDERS_SQL, (max(1, min(int(limit), 100)),)).fetchall()
    return [HorizonHolder.from_row(r) for r in rows]
