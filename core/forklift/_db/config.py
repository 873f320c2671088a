"""Where the database comes from, and the settings every entry point shares.

Order: an explicit DSN (``--dsn``) > ``FORKLIFT_DSN`` > ``DATABASE_URL`` > the embedded server
kept under ``FORKLIFT_HOME``.
"""

from __future__ import annotations

import getpass
import os
from dataclasses import dataclass
from pathlib import Path

from forklift._db.sqltext import check_schema

__all__ = ["DEFAULT_SCHEMA", "Source", "actor_from_env", "env_flag", "home", "resolve",
           "schema_from_env"]

DEFAULT_SCHEMA = "forklift"


def home() -> Path:
    explicit = os.environ.get("FORKLIFT_HOME")
    if explicit:
        return Path(explicit).expanduser().resolve()
    import platformdirs  # only the embedded server needs it

    return Path(platformdirs.user_data_dir("forklift", appauthor=False))


def schema_from_env() -> str:
    return check_schema(os.environ.get("FORKLIFT_SCHEMA", DEFAULT_SCHEMA))


def env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in {"1", "true", "yes", "on"}


def actor_from_env() -> str:
    explicit = os.environ.get("FORKLIFT_ACTOR")
    if explicit:
        return explicit
    try:
        return getpass.getuser()
    except Exception:
        return f"uid:{os.getuid()}"


@dataclass(frozen=True)
class Source:
    """A resolved database: the conninfo and where it came from (for messages)."""

    dsn: str
    origin: str  # "--dsn", "FORKLIFT_DSN", "DATABASE_URL" or "embedded"


def resolve(dsn: str | None = None, *, schema: str | None = None, migrate: bool = True) -> Source:
    """Find the database. The embedded server is started (and migrated) on first use."""
    if dsn:
        return Source(dsn, "--dsn")
    for var in ("FORKLIFT_DSN", "DATABASE_URL"):
        value = os.environ.get(var)
        if value:
            return Source(value, var)
    from forklift._db.embedded import manage as embedded

    conninfo = embedded.ensure_server(home())
    if migrate:
        from forklift._db.migrate import migrate as apply_migrations

        apply_migrations(conninfo, schema or schema_from_env())
    return Source(conninfo, "embedded")
