"""The backend's settings, checked when Django creates the backend (the first ``@task``).

Every refusal names the setting it comes from (``TASKS['default']['OPTIONS']['...']``), so a
typo fails at start with the place to fix, not at the first enqueue in production.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ImproperlyConfigured

from forklift._base.errors import ConfigError

#: OPTIONS keys the backend understands, and what each is for (shown when a key is unknown).
KNOWN = {
    "database": "the DATABASES alias forklift's tables live in (default 'default')",
    "dsn": "forklift's own database instead of Django's",
    "app": "'module:attr' of a forklift app to run the tasks on (its kinds run beside them)",
    "schema": "forklift's schema (default FORKLIFT_SCHEMA or 'forklift')",
    "enqueue_on_commit": "True (default): a task exists exactly when Django's transaction commits",
    "max_attempts": "attempts before a failing task is FAILED (default 3)",
}
DEFAULT_MAX_ATTEMPTS = 3


class DjangoConfigError(ConfigError, ImproperlyConfigured):  # type: ignore[misc]
    """A ``TASKS`` setting forklift cannot work with; the message names the setting."""

    code = "django_config"


@dataclass(frozen=True)
class Options:
    alias: str
    queues: tuple[str, ...]  # empty: any queue (Django's own rule)
    database: str
    dsn: str | None
    app: str | None
    schema: str | None
    enqueue_on_commit: bool
    max_attempts: int

    def setting(self, key: str | None = None) -> str:
        return setting(self.alias, key)

    @property
    def default_queue(self) -> str:
        return self.queues[0] if self.queues else "default"


def setting(alias: str, key: str | None = None, top: str = "OPTIONS") -> str:
    base = f"TASKS[{alias!r}][{top!r}]"
    return base if key is None else f"{base}[{key!r}]"


def _refuse(where: str, problem: str) -> DjangoConfigError:
    return DjangoConfigError(f"{where}: {problem}", setting=where)


def _queues(alias: str, params: Mapping[str, Any]) -> tuple[str, ...]:
    where = setting(alias, top="QUEUES")
    raw = params.get("QUEUES", ["default"])
    if isinstance(raw, str) or not isinstance(raw, Iterable):
        raise _refuse(where, f"must be a list of queue names, not {type(raw).__name__}")
    names = list(raw)
    for name in names:
        if not isinstance(name, str) or not name or len(name) > 128 or "\x00" in name:
            raise _refuse(where, f"names queue {name!r}, which is not a valid forklift queue name"
                                 " (a non-empty string of at most 128 characters, without NUL)")
    return tuple(dict.fromkeys(names))


def parse(alias: str, params: Mapping[str, Any]) -> Options:
    """The checked options of backend ``alias``; raises :class:`DjangoConfigError`."""
    from django.conf import settings

    queues = _queues(alias, params)
    raw = params.get("OPTIONS", {})
    if not isinstance(raw, Mapping):
        raise _refuse(setting(alias), f"must be a dict, not {type(raw).__name__}")
    unknown = sorted(set(raw) - set(KNOWN))
    if unknown:
        known = "; ".join(f"{k}: {v}" for k, v in KNOWN.items())
        raise _refuse(setting(alias, unknown[0]), f"unknown option (forklift knows {known})")

    database = raw.get("database", "default")
    if not isinstance(database, str) or database not in settings.DATABASES:
        have = ", ".join(sorted(settings.DATABASES)) or "none"
        raise _refuse(setting(alias, "database"),
                      f"names {database!r}, which is not in DATABASES (it has: {have})")
    dsn, app = raw.get("dsn"), raw.get("app")
    for key, value in (("dsn", dsn), ("app", app)):
        if value is not None and (not isinstance(value, str) or not value):
            raise _refuse(setting(alias, key), "must be a non-empty string")
    if dsn is not None and app is not None:
        raise _refuse(setting(alias, "dsn"), "give dsn or app, not both (an app has its database)")
    schema = raw.get("schema")
    if schema is not None:
        from forklift._db.sqltext import check_schema

        try:
            check_schema(schema if isinstance(schema, str) else repr(schema))
        except ConfigError as exc:
            raise _refuse(setting(alias, "schema"), exc.message) from None
    on_commit = raw.get("enqueue_on_commit", True)
    if not isinstance(on_commit, bool):
        raise _refuse(setting(alias, "enqueue_on_commit"), f"must be True or False, not {on_commit!r}")
    attempts = raw.get("max_attempts", DEFAULT_MAX_ATTEMPTS)
    if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 1:
        raise _refuse(setting(alias, "max_attempts"), f"must be a whole number >= 1, not {attempts!r}")
    options = Options(alias, queues, database, dsn, app, schema, on_commit, attempts)
    if dsn is None and app is None:
        require_psycopg(options, "database")  # forklift's tables are in Django's database
    elif on_commit:
        require_psycopg(options, "enqueue_on_commit")
    return options


def require_psycopg(options: Options, key: str) -> None:
    """Refuse a Django database that forklift cannot share a transaction with."""
    from django.db import connections

    wrapper = connections[options.database]
    if wrapper.vendor != "postgresql":
        raise _refuse(
            options.setting(key),
            f"DATABASES[{options.database!r}] is {wrapper.vendor}; forklift needs PostgreSQL"
            + (" there to enqueue inside Django's transaction: set it False, or give"
               " OPTIONS['dsn']" if key == "enqueue_on_commit" else
               " (or give OPTIONS['dsn'] for a database of its own, with enqueue_on_commit False)"),
        )
    from django.db.backends.postgresql.psycopg_any import is_psycopg3

    if not is_psycopg3:
        raise _refuse(options.setting(key),
                      f"DATABASES[{options.database!r}] uses psycopg2; forklift needs psycopg 3")


def dsn_of(options: Options) -> str:
    """Conninfo of Django's database, for forklift's own sessions (workers, get_result)."""
    from django.db import connections
    from psycopg.conninfo import make_conninfo

    params = connections[options.database].get_connection_params()
    plain = {str(k): str(v) for k, v in params.items()
             if isinstance(v, (str, int)) and not isinstance(v, bool) and k != "prepare_threshold"}
    return make_conninfo("", **plain)
