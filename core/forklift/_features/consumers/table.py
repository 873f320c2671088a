"""A PostgreSQL table read by an increasing key: the outbox pattern turned around.

The application appends rows to a table of its own (``events``, ``orders``) with an increasing
key (a ``bigserial``, an identity column, a ULID text); a consumer reads them in key order and
stores the last key it processed as its cursor, in the same transaction as its work.

A key taken from a sequence is not committed in key order: a transaction that took key 5 may
commit after one that took key 6. Reading key 6 and moving the cursor past it would skip 5 for
good. So a read stops at the first row written by a transaction that is not older than every
transaction still running (``pg_current_snapshot()``'s xmin, compared with the row's
``xmin``): whatever such a transaction might still commit below that key is waited for, never
passed over. A long transaction that holds a transaction id therefore delays the rows written
after it began (they are read once it ends) and loses none of them; the snapshot is the
server's, so one in another database on the same server does too. A row updated after it was
written counts from its update.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import dict_row

from forklift._base.errors import ConfigError
from forklift._features.consumers.source import Page

__all__ = ["TableSource"]

# The horizon as a 32-bit xid, so age() compares it with a row's xmin across wraparound.
_READ = """
WITH h AS (
    SELECT (pg_snapshot_xmin(pg_current_snapshot())::text::bigint %% 4294967296)::text::xid AS x
)
SELECT {columns}, age(t.xmin) > age(h.x) AS "__forklift_settled"
FROM {table} t, h
WHERE {cursor_clause}
ORDER BY t.{key}
LIMIT %(limit)s
"""


def _identifier(dotted: str, what: str) -> sql.Identifier:
    parts = dotted.split(".") if isinstance(dotted, str) else []
    if not parts or len(parts) > 2 or not all(p and p == p.strip() for p in parts):
        raise ConfigError(f"{what} must be a name like 'events' or 'app.events', not {dotted!r}",
                          field=what)
    return sql.Identifier(*parts)


@dataclass(frozen=True)
class TableSource:
    """Rows of ``table`` in ``key`` order, each as a dict of ``columns`` (default: all).

    ``key``'s values are the cursor: they must increase with each row written and be JSON
    (integers or text). ``where`` narrows the rows (SQL over the table's columns, with no
    parameters: ``"topic = 'orders'"``), written by the application, never by an operator.
    """

    table: str
    key: str = "id"
    columns: Sequence[str] | None = None
    where: str | None = None

    def __post_init__(self) -> None:
        _identifier(self.table, "table")
        _identifier(self.key, "key")
        if self.columns is not None:
            if isinstance(self.columns, str) or not self.columns:
                raise ConfigError("columns must be a list of column names", field="columns")
            for c in self.columns:
                _identifier(c, "columns")
        if self.where is not None and (not isinstance(self.where, str) or not self.where.strip()):
            raise ConfigError("where must be an SQL condition", field="where")

    def _query(self, first: bool) -> sql.Composed:
        key = sql.Identifier(self.key)
        if self.columns is None:
            columns: sql.Composable = sql.SQL("t.*")
        else:
            names = dict.fromkeys([*self.columns, self.key])  # the key is always read
            columns = sql.SQL(", ").join(sql.SQL("t.{}").format(sql.Identifier(c)) for c in names)
        cursor_clause: sql.Composable = sql.SQL("true") if first else sql.SQL(
            "t.{} > %(cursor)s").format(key)
        if self.where is not None:
            cursor_clause = sql.SQL("{} AND ({})").format(cursor_clause, sql.SQL(self.where))
        return sql.SQL(_READ).format(
            columns=columns, table=_identifier(self.table, "table"),
            cursor_clause=cursor_clause, key=key)

    def read(self, cursor: Any, limit: int, conn: psycopg.Connection[Any]) -> Page:
        """Up to ``limit`` settled rows after ``cursor``; the cursor is the last one's key."""
        with conn.cursor(row_factory=dict_row) as cur:
            rows = cur.execute(self._query(cursor is None),
                               {"cursor": cursor, "limit": limit}).fetchall()
        items: list[dict[str, Any]] = []
        for row in rows:
            if not row.pop("__forklift_settled"):
                break  # an older transaction may still commit a smaller key: wait for it
            items.append(row)
        if not items:
            return Page(items=(), cursor=cursor)
        last = items[-1][self.key]
        try:
            json.dumps(last)
        except TypeError:
            raise ConfigError(
                f"the key {self.key!r} of {self.table} is {type(last).__name__}; a consumer's"
                " cursor must be JSON (an integer or text key)", field="key") from None
        return Page(items=items, cursor=last)
