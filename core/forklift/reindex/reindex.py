"""A search reindex over an app table: a paced backfill in two phases.

**rows**: the table in key order, a page at a time; each row's document (its searchable
columns, its version, its tenant) is put into the index. **sweep**: the documents the index
lists, a page at a time; each whose row no longer exists, or now belongs to another tenant, is
removed at the version listed. The index keeps only the newer version of each id, so a page
replayed after a crash, or read just before the app wrote the row again, never overwrites a
newer document, and a removal never hides a row written again meanwhile.

The cursor is ``{"phase": "rows" | "sweep", "after": <last key or id, as text> | null}``, plus
``"tenant"`` for a run over one tenant's rows and documents (started ``--from
'{"tenant": "acme"}'``); the backfill checkpoints it with each page, so a run resumes where it
stopped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, is_dataclass
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import sql

from forklift._base.errors import ConfigError
from forklift.reindex.document import Document
from forklift.reindex.listed import Listed
from forklift.reindex.pg_index import PgSearchIndex
from forklift.reindex.search_index import SearchIndex

if TYPE_CHECKING:
    from forklift import Forklift

__all__ = ["Reindex", "reindex"]

TIMESTAMPS = ("timestamp with time zone", "timestamp without time zone")
TYPES_SQL = """
SELECT a.attname, format_type(a.atttypid, a.atttypmod)
FROM pg_attribute a
WHERE a.attrelid = %s::regclass AND a.attnum > 0 AND NOT a.attisdropped
"""


@dataclass(frozen=True)
class _Shape:
    """The table's column types, read once: the key's (to compare a cursor) and the version's
    (a timestamp counts in microseconds)."""

    key_type: str
    version: sql.Composable


class Reindex:
    """A declared reindex: the table it reads, the index it writes, and the backfill that runs
    it (``forklift backfills start <name>``). Also the app's live path: :meth:`index_rows`
    and :meth:`remove` write the same documents when the app writes its rows."""

    def __init__(self, app: Forklift, name: str, *, table: str, version: str,
                 searchable: Sequence[str], key: str = "id", tenant: str | None = None,
                 schema: str = "public", index: SearchIndex | None = None) -> None:
        if not searchable:
            raise ConfigError(f"reindex {name!r} needs at least one searchable column",
                              field="searchable")
        self.app = app
        self.name = name
        self.table = table
        self.key = key
        self.version = version
        self.searchable = tuple(searchable)
        self.tenant = tenant
        self.schema = schema
        self.index: SearchIndex = index or PgSearchIndex(f"{table}_search", schema)
        self._shape: _Shape | None = None

    def declaration(self) -> dict[str, Any]:
        """What a run reads and writes, in the backfill's code hash: a change (another
        ``searchable`` column, table or index) shows as "code changed", so the operator knows
        the index needs a run over every row again."""
        index = self.index
        return {"table": self.table, "schema": self.schema, "key": self.key,
                "version": self.version, "searchable": list(self.searchable),
                "tenant": self.tenant,
                # a dataclass's repr is its fields; another object's would hold its address
                "index": repr(index) if is_dataclass(index) else type(index).__qualname__}

    # -- the table ------------------------------------------------------------------------------
    def _t(self) -> sql.Composable:
        return sql.Identifier(self.schema, self.table)

    def _shape_of(self, conn: psycopg.Connection[Any]) -> _Shape:
        if self._shape is None:
            qualified = f"{sql.Identifier(self.schema).as_string(conn)}." \
                        f"{sql.Identifier(self.table).as_string(conn)}"
            try:
                types = dict(conn.execute(TYPES_SQL, (qualified,)).fetchall())
            except psycopg.errors.UndefinedTable:
                raise ConfigError(f"reindex {self.name!r}: table {self.schema}.{self.table}"
                                  " does not exist", field="table") from None
            wanted = [self.key, self.version, *self.searchable,
                      *([self.tenant] if self.tenant else [])]
            missing = [c for c in wanted if c not in types]
            if missing:
                raise ConfigError(f"reindex {self.name!r}: {self.schema}.{self.table} has no"
                                  f" column {', '.join(missing)}", field="columns")
            column = sql.Identifier(self.version)
            version = (sql.SQL("(extract(epoch FROM {}) * 1000000)::bigint").format(column)
                       if types[self.version] in TIMESTAMPS else sql.SQL("{}::bigint").format(column))
            self._shape = _Shape(types[self.key], version)
        return self._shape

    def _documents_sql(self, conn: psycopg.Connection[Any], where: sql.Composable,
                       limit: sql.Composable | None = None) -> sql.Composed:
        shape = self._shape_of(conn)
        fields = sql.SQL(", ").join(
            sql.SQL("{}, {}").format(sql.Literal(c), sql.Identifier(c)) for c in self.searchable)
        words = sql.SQL(", ").join(sql.SQL("{}::text").format(sql.Identifier(c))
                                   for c in self.searchable)
        tenant = (sql.SQL("{}::text").format(sql.Identifier(self.tenant)) if self.tenant
                  else sql.SQL("NULL::text"))
        return sql.SQL(
            "SELECT {key}::text AS doc_id, {version}, jsonb_build_object({fields}),"
            " concat_ws(' ', {words}), {tenant} FROM {t} AS src WHERE {where}"
            " ORDER BY src.{key} {limit}"
        ).format(key=sql.Identifier(self.key), version=shape.version, fields=fields,
                 words=words, tenant=tenant, t=self._t(), where=where,
                 limit=limit if limit is not None else sql.SQL(""))

    def documents(self, conn: psycopg.Connection[Any], after: str | None, limit: int,
                  tenant: str | None = None) -> list[Document]:
        """Up to ``limit`` rows' documents with keys above ``after``, in key order; only
        ``tenant``'s rows when given."""
        shape = self._shape_of(conn)
        # Conditions are left out rather than made optional with "IS NULL OR": on a prepared
        # statement's generic plan the optional form is a filter, not an index condition, so
        # every page would walk the key's index from its start (a pass quadratic in the table).
        where: sql.Composable = sql.SQL("true")
        if after is not None:
            where = sql.SQL("{key} > %(after)s::{type}").format(
                key=sql.Identifier(self.key), type=sql.SQL(shape.key_type))
        if tenant is not None:
            where = sql.SQL("{} AND {}::text = %(tenant)s").format(
                where, sql.Identifier(self._tenant_column()))
        return self._rows(conn, self._documents_sql(conn, where, sql.SQL("LIMIT %(limit)s")),
                          {"after": after, "limit": limit, "tenant": tenant})

    def _tenant_column(self) -> str:
        if self.tenant is None:
            raise ConfigError(f"reindex {self.name!r} declares no tenant column: it cannot run"
                              " for one tenant", field="tenant")
        return self.tenant

    def _rows(self, conn: psycopg.Connection[Any], query: sql.Composed,
              params: dict[str, Any]) -> list[Document]:
        return [Document(i, int(v), f, w, t) for i, v, f, w, t in conn.execute(query, params)]

    # -- the live path --------------------------------------------------------------------------
    def index_rows(self, conn: psycopg.Connection[Any], keys: Sequence[Any]) -> None:
        """Put the current documents of the rows with these keys (call it in the transaction
        that wrote them, or after it)."""
        shape = self._shape_of(conn)
        where = sql.SQL("{} = ANY(%(keys)s::text[]::{}[])").format(
            sql.Identifier(self.key), sql.SQL(shape.key_type))
        self.index.put(conn, self._rows(conn, self._documents_sql(conn, where),
                                        {"keys": [str(k) for k in keys]}))

    def remove(self, conn: psycopg.Connection[Any], key: Any, version: int) -> None:
        """Remove the document of a row deleted at ``version`` (its version when deleted)."""
        self.index.remove(conn, [Listed(str(key), version)])

    # -- the backfill's three functions ---------------------------------------------------------
    def read(self, cursor: Any, limit: int,
             conn: psycopg.Connection[Any]) -> tuple[list[Document] | list[Listed], Any]:
        """One page of the phase the cursor names, and the cursor after it."""
        given = cursor if isinstance(cursor, dict) else {}
        phase, after, tenant = given.get("phase", "rows"), given.get("after"), given.get("tenant")
        scope = {} if tenant is None else {"tenant": str(tenant)}
        if phase == "rows":
            rows = self.documents(conn, after, limit, scope.get("tenant"))
            if len(rows) == limit:
                return rows, {"phase": "rows", "after": rows[-1].id, **scope}
            return rows, {"phase": "sweep", "after": None, **scope}
        if tenant is not None:
            self._tenant_column()
        listed = self.index.listed(conn, after, limit, scope.get("tenant"))
        return listed, ({"phase": "sweep", "after": listed[-1].id, **scope}
                        if len(listed) == limit else None)

    def process(self, items: list[Any], conn: psycopg.Connection[Any]) -> None:
        if isinstance(items[0], Document):
            self.index.put(conn, items)
        else:
            self.index.remove(conn, self.gone(conn, items))

    def gone(self, conn: psycopg.Connection[Any], listed: Sequence[Listed]) -> list[Listed]:
        """The listed documents whose row no longer exists or moved to another tenant."""
        shape = self._shape_of(conn)
        tenant = (sql.SQL("{}::text").format(sql.Identifier(self.tenant)) if self.tenant
                  else sql.SQL("NULL::text"))
        rows = dict(conn.execute(sql.SQL(
            "SELECT {key}::text, {tenant} FROM {t} WHERE {key} = ANY(%s::text[]::{type}[])"
        ).format(key=sql.Identifier(self.key), tenant=tenant, t=self._t(),
                 type=sql.SQL(shape.key_type)), ([d.id for d in listed],)).fetchall())
        return [d for d in listed
                if d.id not in rows or (self.tenant is not None and rows[d.id] != d.tenant)]

    def total(self, conn: psycopg.Connection[Any]) -> int | None:
        """An estimate of the items of both phases: the table's rows and as many documents."""
        row = conn.execute("SELECT reltuples FROM pg_class WHERE oid = %s::regclass",
                           (f"{sql.Identifier(self.schema).as_string(conn)}."
                            f"{sql.Identifier(self.table).as_string(conn)}",)).fetchone()
        return None if row is None or row[0] < 0 else 2 * int(row[0])


def reindex(app: Forklift, name: str, *, table: str, version: str, searchable: Sequence[str],
            key: str = "id", tenant: str | None = None, schema: str = "public",
            index: SearchIndex | None = None, page_size: int = 500, rate: float = 2.0,
            **backfill: Any) -> Reindex:
    """Declare a reindex of ``schema.table`` as the backfill ``name`` (start it with
    ``forklift backfills start NAME``). ``version`` is a column every write of a row raises (a
    number, or a timestamp counted in microseconds); ``searchable`` the columns a document
    holds; ``tenant`` the column naming the row's tenant, if any. ``index`` defaults to a
    :class:`PgSearchIndex` on ``<table>_search`` (create it with its ``create``).
    ``backfill`` passes ``max_attempts``, ``retry`` and ``clock`` to the backfill."""
    declared = Reindex(app, name, table=table, version=version, searchable=searchable, key=key,
                       tenant=tenant, schema=schema, index=index)
    app.backfill(name, page_size=page_size, rate=rate, **backfill)(declared)
    return declared
