"""Your app, for tools: load it from ``module:attr``, and record its schedules and backfills.

    from forklift.ops.apps import load_app, sync_definitions

    app = load_app("myapp.jobs:app")          # or None: FORKLIFT_APP
    with connection(dsn) as conn:
        sync_definitions(conn, app)           # what `--app` does for `schedules`/`backfills`

A leading worker records the definitions by itself; this is for commands run before one has.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import psycopg

if TYPE_CHECKING:
    from forklift import Forklift

__all__ = ["load_app", "sync_definitions"]


def load_app(spec: str | None) -> Forklift:
    """Import ``module:attr`` (attr defaults to ``app``); ``None`` reads ``FORKLIFT_APP``.

    The current directory is importable, as with ``python -m``. Raises
    :class:`forklift.ConfigError` (one line) when there is no spec, the module does not import,
    or the attribute is not a :class:`forklift.Forklift`.
    """
    from forklift._app.loader import load_app as _load

    return _load(spec)


def sync_definitions(
    conn: psycopg.Connection[Any], app: Forklift, schema: str | None = None
) -> None:
    """Record the app's cron schedules and backfill definitions (in one transaction)."""
    from forklift._features.cron import sync_definitions_now
    from forklift.ops.connect import schema_from_env

    sync_definitions_now(conn, app, schema or schema_from_env())
