"""SQL text with the schema filled in.

Queries are written with ``{s}`` where the schema goes, so they can sit beside the Python that
runs them and still serve any configured schema. Rendering is cached per (text, schema).
"""

from __future__ import annotations

import re
from functools import lru_cache

from psycopg import sql

_SCHEMA_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


def check_schema(name: str) -> str:
    if not _SCHEMA_NAME.match(name):
        from forklift._errors import ConfigError

        raise ConfigError(
            f"schema name {name!r} is not valid: use lower-case letters, digits and underscores"
        )
    return name


def channel(schema: str) -> str:
    """The NOTIFY channel that wakes workers of one schema; the payload is a queue name."""
    return f"{schema}_wake"


def control_channel(schema: str) -> str:
    """The NOTIFY channel for operator signals to workers (cancel a running job, ...)."""
    return f"{schema}_control"


@lru_cache(maxsize=512)
def render(text: str, schema: str) -> str:
    quoted = sql.Identifier(check_schema(schema)).as_string(None)
    return text.replace("{s}", quoted).replace("{channel}", sql.Literal(channel(schema)).as_string(None))
