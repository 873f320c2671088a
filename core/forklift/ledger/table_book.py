"""The default book: one row per posting line in a table of the app's.

The table may be one forklift creates (:meth:`TableBook.create`) or the app's own (a Django
model's or an SQLAlchemy table's), named with its columns. Whatever its other columns, it needs
a unique constraint on (tenant, key, line): the insert is ``ON CONFLICT DO NOTHING`` on it, which
is what makes a posting land once however many workers write it at the same moment.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from psycopg import sql

from forklift._base.errors import ConfigError
from forklift.ledger.balance_row import CurrencyTotal
from forklift.ledger.book_check import BookCheck
from forklift.ledger.errors import InvalidPosting, PostingConflict

if TYPE_CHECKING:
    import psycopg

    from forklift.ledger.posting import Posting

__all__ = ["DEFAULT_TABLE", "TableBook"]

DEFAULT_TABLE = "ledger_lines"
#: The tenant stored for a posting without one: the unique key cannot hold a NULL.
NO_TENANT = ""


@dataclass(frozen=True)
class TableBook:
    """A book in the table ``table`` (``schema``-qualified when given, else found on the
    search path), its columns named by the ``*_column`` fields; ``tenant_column=None`` for a
    book without tenants (a posting that names one is then refused) and ``job_column=None``
    for a table that does not record which job wrote a line."""

    table: str = DEFAULT_TABLE
    schema: str | None = None
    tenant_column: str | None = "tenant"
    key_column: str = "posting_key"
    line_column: str = "line"
    account_column: str = "account"
    currency_column: str = "currency"
    amount_column: str = "amount_minor"
    job_column: str | None = "job_id"

    @classmethod
    def named(cls, name: str, **columns: Any) -> TableBook:
        """The book in ``name``, ``table`` or ``schema.table`` (a Django model's
        ``_meta.db_table``, an SQLAlchemy table's ``fullname``)."""
        schema, dot, table = name.rpartition(".")
        if not table or (dot and not schema):
            raise ConfigError(f"a book's table must be 'table' or 'schema.table', not {name!r}")
        return cls(table=table, schema=schema or None, **columns)

    @property
    def name(self) -> str:
        return f"{self.schema}.{self.table}" if self.schema else self.table

    def _table(self) -> sql.Composable:
        if self.schema:
            return sql.Identifier(self.schema, self.table)
        return sql.Identifier(self.table)

    def _key_columns(self) -> list[str]:
        cols = [self.key_column, self.line_column]
        return [self.tenant_column, *cols] if self.tenant_column else cols

    # -- the table ----------------------------------------------------------------------------
    def create_sql(self) -> sql.Composed:
        """``CREATE TABLE IF NOT EXISTS`` for this book (and its columns' names)."""
        ident = sql.Identifier
        cols: list[sql.Composable] = []
        if self.tenant_column:
            cols.append(sql.SQL("{} text NOT NULL DEFAULT ''").format(ident(self.tenant_column)))
        cols += [
            sql.SQL("{} text NOT NULL").format(ident(self.key_column)),
            sql.SQL("{} integer NOT NULL").format(ident(self.line_column)),
            sql.SQL("{} text NOT NULL").format(ident(self.account_column)),
            sql.SQL("{} text NOT NULL").format(ident(self.currency_column)),
            sql.SQL("{} bigint NOT NULL").format(ident(self.amount_column)),
        ]
        if self.job_column:
            cols.append(sql.SQL("{} bigint").format(ident(self.job_column)))
        cols.append(sql.SQL("posted_at timestamptz NOT NULL DEFAULT now()"))
        cols.append(sql.SQL("PRIMARY KEY ({})").format(
            sql.SQL(", ").join(map(ident, self._key_columns()))))
        return sql.SQL("CREATE TABLE IF NOT EXISTS {} (\n    {}\n)").format(
            self._table(), sql.SQL(",\n    ").join(cols))

    def create(self, conn: psycopg.Connection[Any]) -> None:
        """Create the table if it does not exist (an app's own table needs no call)."""
        conn.execute(self.create_sql())

    # -- writing ------------------------------------------------------------------------------
    def _tenant(self, tenant: str | None) -> str:
        if self.tenant_column is None:
            if tenant is not None:
                raise InvalidPosting(f"the book {self.name} has no tenant column, and the"
                                     " posting names a tenant", field="tenant",
                                     reason="no_tenant_column")
            return NO_TENANT
        return NO_TENANT if tenant is None else tenant

    def write(self, conn: psycopg.Connection[Any], posting: Posting, *, tenant: str | None,
              job_id: int | None) -> bool:
        """Insert the lines, or find them already there (see :class:`LedgerBook`)."""
        stored_tenant = self._tenant(tenant)
        ident = sql.Identifier
        where = [sql.SQL("{} = %(key)s").format(ident(self.key_column))]
        into = [ident(self.key_column), ident(self.line_column), ident(self.account_column),
                ident(self.currency_column), ident(self.amount_column)]
        values: list[sql.Composable] = [sql.SQL("%(key)s"), sql.SQL("l.line"),
                                        sql.SQL("l.account"), sql.SQL("l.currency"),
                                        sql.SQL("l.amount")]
        if self.tenant_column:
            into.insert(0, ident(self.tenant_column))
            values.insert(0, sql.SQL("%(tenant)s"))
            where.insert(0, sql.SQL("{} = %(tenant)s").format(ident(self.tenant_column)))
        if self.job_column:
            into.append(ident(self.job_column))
            values.append(sql.SQL("%(job)s"))
        entries = posting.entries
        params = {
            "tenant": stored_tenant, "key": posting.key, "job": job_id,
            "lines": list(range(len(entries))),
            "accounts": [e.account for e in entries],
            "currencies": [e.amount.currency for e in entries],
            "amounts": [e.amount.minor for e in entries],
        }
        insert = sql.SQL(
            "INSERT INTO {table} ({into}) SELECT {values} FROM unnest(%(lines)s::integer[],"
            " %(accounts)s::text[], %(currencies)s::text[], %(amounts)s::bigint[])"
            " AS l(line, account, currency, amount) ORDER BY l.line"
            " ON CONFLICT ({keys}) DO NOTHING"
        ).format(table=self._table(), into=sql.SQL(", ").join(into),
                 values=sql.SQL(", ").join(values),
                 keys=sql.SQL(", ").join(map(ident, self._key_columns())))
        inserted = conn.execute(insert, params).rowcount
        if inserted == len(entries):
            return True  # a posting's lines are written together: none of them was there
        if inserted == 0:
            stored = conn.execute(sql.SQL(
                "SELECT {account}, {currency}, {amount} FROM {table} WHERE {where}"
                " ORDER BY {line}").format(
                account=ident(self.account_column), currency=ident(self.currency_column),
                amount=ident(self.amount_column), table=self._table(),
                where=sql.SQL(" AND ").join(where), line=ident(self.line_column)),
                params).fetchall()
            mine = [(e.account, e.amount.currency, e.amount.minor) for e in entries]
            if [tuple(row) for row in stored] == mine:
                return False  # the same posting, written before: a replay posts nothing
        raise PostingConflict(
            f"the book {self.name} already holds posting {posting.key!r}"
            + (f" of tenant {tenant!r}" if tenant is not None else "")
            + " with other lines; a correction is a new posting under a new key",
            key=posting.key, tenant=tenant)

    # -- reading ------------------------------------------------------------------------------
    def check(self, conn: psycopg.Connection[Any], *, tenant: str | None = None) -> BookCheck:
        """Every currency's total (zero in a balanced book), for one tenant when given."""
        ident = sql.Identifier
        posting = (sql.SQL("({}, {})").format(ident(self.tenant_column), ident(self.key_column))
                   if self.tenant_column else ident(self.key_column))
        where: sql.Composable = sql.SQL("")
        if tenant is not None:
            if self.tenant_column is None:
                raise ConfigError(f"the book {self.name} has no tenant column")
            where = sql.SQL(" WHERE {} = %(tenant)s").format(ident(self.tenant_column))
        rows = conn.execute(sql.SQL(
            "SELECT {currency}, sum({amount}), count(*), count(DISTINCT {posting})"
            " FROM {table}{where} GROUP BY 1 ORDER BY 1").format(
            currency=ident(self.currency_column), amount=ident(self.amount_column),
            posting=posting, table=self._table(), where=where),
            {"tenant": tenant}).fetchall()
        return BookCheck(self.name, tenant, tuple(
            CurrencyTotal(str(c), int(total), int(lines), int(postings))
            for c, total, lines, postings in rows))
