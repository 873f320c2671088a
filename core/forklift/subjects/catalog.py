"""What the database says about the app's tables: their columns, the columns a comment marks
as personal data, and their single-column foreign keys. Read once per check, in two queries."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import psycopg

__all__ = ["MARK", "Catalog", "read_catalog"]

#: A column comment that starts with the word ``personal`` marks the column as personal data:
#: ``COMMENT ON COLUMN users.email IS 'personal: contact address'``.
MARK = re.compile(r"^\s*personal\b", re.IGNORECASE)

COLUMNS_SQL = """
SELECT c.relname, a.attname, col_description(c.oid, a.attnum)
FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
WHERE n.nspname = %s AND c.relkind IN ('r', 'p') AND NOT c.relispartition
"""
FOREIGN_KEYS_SQL = """
SELECT src.relname, sa.attname, dst.relname, da.attname
FROM pg_constraint k
JOIN pg_class src ON src.oid = k.conrelid
JOIN pg_namespace n ON n.oid = src.relnamespace
JOIN pg_class dst ON dst.oid = k.confrelid
JOIN pg_namespace dn ON dn.oid = dst.relnamespace
JOIN pg_attribute sa ON sa.attrelid = k.conrelid AND sa.attnum = k.conkey[1]
JOIN pg_attribute da ON da.attrelid = k.confrelid AND da.attnum = k.confkey[1]
WHERE k.contype = 'f' AND n.nspname = %s AND dn.nspname = %s AND cardinality(k.conkey) = 1
"""


@dataclass(frozen=True)
class Catalog:
    """The app schema's tables as the database has them."""

    columns: dict[str, frozenset[str]]
    #: Columns marked by a ``personal`` comment, per table.
    commented: dict[str, frozenset[str]]
    #: (table, parent) -> [(column, parent column)], one entry per single-column foreign key.
    foreign_keys: dict[tuple[str, str], list[tuple[str, str]]]

    def has(self, table: str, column: str | None = None) -> bool:
        cols = self.columns.get(table)
        return cols is not None and (column is None or column in cols)


def read_catalog(conn: psycopg.Connection[Any], schema: str) -> Catalog:
    columns: dict[str, set[str]] = {}
    commented: dict[str, set[str]] = {}
    for table, column, comment in conn.execute(COLUMNS_SQL, (schema,)):
        columns.setdefault(table, set()).add(column)
        if comment is not None and MARK.match(comment):
            commented.setdefault(table, set()).add(column)
    keys: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for table, column, parent, parent_column in conn.execute(FOREIGN_KEYS_SQL, (schema, schema)):
        keys.setdefault((table, parent), []).append((column, parent_column))
    return Catalog(
        columns={t: frozenset(c) for t, c in columns.items()},
        commented={t: frozenset(c) for t, c in commented.items()},
        foreign_keys=keys,
    )
