"""What a schema holds, read from PostgreSQL's catalog: tables and their storage options,
columns in order with types, defaults and identity, constraints, indexes, functions, triggers
and sequences. Two schemas built from the same SQL read the same, once their own names are
written alike; ``forklift migrate --check`` compares the live schema with one freshly built from
``schema.sql`` to find what was changed by hand."""

from __future__ import annotations

from typing import Any

import psycopg

__all__ = ["CATALOG", "Catalog", "read"]

#: One row list per part, sorted.
Catalog = dict[str, list[tuple[Any, ...]]]

CATALOG: dict[str, str] = {
    "tables": """
        SELECT c.relname, c.relkind::text, c.relpersistence::text,
               coalesce(array_to_string(c.reloptions, ','), '')
        FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = %(s)s AND c.relkind IN ('r', 'p', 'S', 'v', 'm')""",
    "columns": """
        SELECT c.relname, row_number() OVER (PARTITION BY c.relname ORDER BY a.attnum),
               a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull,
               coalesce(pg_get_expr(d.adbin, d.adrelid), ''), a.attidentity::text
        FROM pg_attribute a
        JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
        LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
        WHERE n.nspname = %(s)s AND c.relkind IN ('r', 'p') AND a.attnum > 0
          AND NOT a.attisdropped""",
    "constraints": """
        SELECT c.relname, k.conname, pg_get_constraintdef(k.oid)
        FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid
        JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %(s)s""",
    "indexes": "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = %(s)s",
    "functions": """
        SELECT p.proname, pg_get_function_identity_arguments(p.oid), pg_get_functiondef(p.oid)
        FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = %(s)s""",
    "triggers": """
        SELECT t.tgname, pg_get_triggerdef(t.oid)
        FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
        JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = %(s)s AND NOT t.tgisinternal""",
    "sequences": """
        SELECT sequencename, data_type::text, start_value, increment_by, cycle
        FROM pg_sequences WHERE schemaname = %(s)s""",
}


def read(conn: psycopg.Connection[Any], schema: str,
         rename: dict[str, str] | None = None) -> Catalog:
    """The catalog of ``schema``; every text has each key of ``rename`` replaced by its value
    (a scratch schema's name and wake channel written as the live schema's)."""

    def clean(value: Any) -> Any:
        if isinstance(value, str) and rename:
            for old, new in rename.items():
                value = value.replace(old, new)
        return value

    return {name: sorted(tuple(clean(v) for v in row)
                         for row in conn.execute(query, {"s": schema}).fetchall())
            for name, query in CATALOG.items()}
