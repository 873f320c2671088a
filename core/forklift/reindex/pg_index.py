"""The default search index: a PostgreSQL table of documents with a full-text column, created
on the app's schema by :meth:`PgSearchIndex.create` (the app owns it, not forklift's migrations).

Each id holds one row: its newest document, or a tombstone (``deleted``) at the version it was
removed at. Writes are single statements whose ``ON CONFLICT ... WHERE`` compares versions, so
two writers of one id (a reindex page and the app's own write) serialise on the row and the
newer one wins whichever commits last.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import psycopg
from psycopg import sql

from forklift.reindex.document import Document
from forklift.reindex.listed import Listed

__all__ = ["PgSearchIndex"]

CREATE_SQL = """
CREATE TABLE IF NOT EXISTS {t} (
    id          text        PRIMARY KEY,
    tenant      text,
    version     bigint      NOT NULL,
    deleted     boolean     NOT NULL DEFAULT false,
    document    jsonb,
    search      tsvector,
    indexed_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS {search_idx} ON {t} USING gin (search) WHERE NOT deleted;
"""
# A document replaces what the index holds only when it is newer: an equal version is either
# the same document again or a removal at that version, which outranks it.
PUT_SQL = """
INSERT INTO {t} AS t (id, tenant, version, deleted, document, search)
SELECT d.id, d.tenant, d.version, false, d.fields, to_tsvector({config}, d.text)
FROM jsonb_to_recordset(%s::jsonb) AS d(id text, tenant text, version bigint, fields jsonb,
                                         text text)
ON CONFLICT (id) DO UPDATE SET
    tenant = excluded.tenant, version = excluded.version, deleted = false,
    document = excluded.document, search = excluded.search, indexed_at = now()
WHERE t.version < excluded.version
"""
# A removal at version v outranks a document at v (and anything older), never a newer one.
REMOVE_SQL = """
INSERT INTO {t} AS t (id, tenant, version, deleted)
SELECT r.id, r.tenant, r.version, true
FROM jsonb_to_recordset(%s::jsonb) AS r(id text, tenant text, version bigint)
ON CONFLICT (id) DO UPDATE SET
    version = excluded.version, deleted = true, document = NULL, search = NULL,
    indexed_at = now()
WHERE (t.version, t.deleted) < (excluded.version, true)
"""
# The page's conditions are added only when given ({where}): on a prepared statement's generic
# plan an optional "IS NULL OR" form is a filter, and every page would walk the primary key from
# its first id instead of seeking to the page.
LISTED_SQL = """
SELECT id, version, tenant FROM {t}
WHERE NOT deleted {where}
ORDER BY id LIMIT %(limit)s
"""
SEARCH_SQL = """
SELECT id, document FROM {t}
WHERE NOT deleted AND search @@ websearch_to_tsquery({config}, %(q)s)
  AND (%(tenant)s::text IS NULL OR tenant = %(tenant)s)
ORDER BY ts_rank(search, websearch_to_tsquery({config}, %(q)s)) DESC, id
LIMIT %(limit)s
"""
PRUNE_SQL = "DELETE FROM {t} WHERE deleted AND indexed_at < now() - %s"


@dataclass(frozen=True)
class PgSearchIndex:
    """Documents in the table ``schema.table``, searched with the text search ``config``."""

    table: str
    schema: str = "public"
    config: str = "simple"

    def _t(self) -> sql.Composable:
        return sql.Identifier(self.schema, self.table)

    def _sql(self, text: str) -> sql.Composed:
        return sql.SQL(text).format(t=self._t(), config=sql.Literal(self.config),
                                    search_idx=sql.Identifier(f"{self.table}_search_idx"))

    def create(self, conn: psycopg.Connection[Any]) -> None:
        """Create the table and its full-text index if they do not exist."""
        conn.execute(self._sql(CREATE_SQL))

    def put(self, conn: psycopg.Connection[Any], documents: Sequence[Document]) -> None:
        if documents:
            rows = [{"id": d.id, "tenant": d.tenant, "version": d.version, "fields": d.fields,
                     "text": d.text} for d in documents]
            conn.execute(self._sql(PUT_SQL), (json.dumps(rows, default=str),))

    def remove(self, conn: psycopg.Connection[Any], removals: Sequence[Listed]) -> None:
        if removals:
            rows = [{"id": r.id, "tenant": r.tenant, "version": r.version} for r in removals]
            conn.execute(self._sql(REMOVE_SQL), (json.dumps(rows),))

    def listed(self, conn: psycopg.Connection[Any], after: str | None, limit: int,
               tenant: str | None = None) -> list[Listed]:
        where = [sql.SQL("AND id > %(after)s")] if after is not None else []
        if tenant is not None:
            where.append(sql.SQL("AND tenant = %(tenant)s"))
        query = sql.SQL(LISTED_SQL).format(t=self._t(), where=sql.SQL(" ").join(where))
        return [Listed(i, int(v), t) for i, v, t in conn.execute(
            query, {"after": after, "limit": limit, "tenant": tenant})]

    def search(self, conn: psycopg.Connection[Any], query: str, *, tenant: str | None = None,
               limit: int = 20) -> list[tuple[str, dict[str, Any]]]:
        """(id, document) of the live documents matching ``query`` (web search syntax), best
        first; only ``tenant``'s when given."""
        return [(i, d) for i, d in conn.execute(
            self._sql(SEARCH_SQL), {"q": query, "tenant": tenant, "limit": limit})]

    def prune(self, conn: psycopg.Connection[Any], older_than: timedelta) -> int:
        """Drop tombstones older than ``older_than`` (once no page that could replay an older
        document is still in flight); how many were dropped."""
        return conn.execute(self._sql(PRUNE_SQL), (older_than,)).rowcount
