"""Where the database is, and a connection to it, for tools built on the operator API.

The order is the one every forklift entry point uses: an explicit DSN (``--dsn``) >
``FORKLIFT_DSN`` > ``DATABASE_URL`` > the embedded server under ``FORKLIFT_HOME`` (started, and
migrated, on first use).

    from forklift.ops.connect import connection, resolve

    source = resolve(None, schema="forklift")        # Source(dsn=..., origin="FORKLIFT_DSN")
    with connection(source.dsn) as conn:              # autocommit, named forklift:ops
        ...

Connections name their purpose in ``application_name`` and carry forklift's statement and lock
timeouts; a server that cannot be reached raises :class:`forklift.DatabaseUnavailable` with a
one-line message naming ``host:port/db`` (never the password).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg

from forklift._db import config as _cfg
from forklift._db import connections as _db

__all__ = [
    "DEFAULT_SCHEMA",
    "Source",
    "check_schema",
    "connect",
    "connection",
    "describe_target",
    "home",
    "resolve",
    "schema_from_env",
]

DEFAULT_SCHEMA = _cfg.DEFAULT_SCHEMA
#: A resolved database: ``dsn`` (conninfo) and ``origin`` (``--dsn``, ``FORKLIFT_DSN``,
#: ``DATABASE_URL`` or ``embedded``), for messages.
Source = _cfg.Source


def resolve(dsn: str | None = None, *, schema: str | None = None, migrate: bool = True) -> Source:
    """Find the database; the embedded server is started (and, with ``migrate``, migrated)."""
    return _cfg.resolve(dsn, schema=schema, migrate=migrate)


def home() -> Path:
    """The forklift home (``FORKLIFT_HOME``, else the per-user data directory)."""
    return _cfg.home()


def schema_from_env() -> str:
    """``FORKLIFT_SCHEMA``, checked, else ``forklift``."""
    return _cfg.schema_from_env()


def check_schema(name: str) -> str:
    """``name`` if it is a valid schema name (lower-case letters, digits, underscores), else a
    :class:`forklift.ConfigError`."""
    from forklift._db.sqltext import check_schema as check

    return check(name)


def describe_target(dsn: str) -> str:
    """``host:port/dbname`` of a conninfo, for messages; never the password."""
    return _db.describe_target(dsn)


def connect(dsn: str, purpose: str = "ops") -> psycopg.Connection[Any]:
    """An autocommit connection named ``forklift:<purpose>`` with forklift's timeouts."""
    return _db.connect(dsn, purpose)


@contextmanager
def connection(dsn: str, purpose: str = "ops") -> Iterator[psycopg.Connection[Any]]:
    """:func:`connect`, closed on exit."""
    conn = connect(dsn, purpose)
    try:
        yield conn
    finally:
        conn.close()
