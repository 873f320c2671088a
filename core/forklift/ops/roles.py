"""Least-privilege roles: a worker, an operator and a read-only console, and what each may do.

``forklift roles create [--prefix app] [--print]`` creates (or prints the SQL for) three login
roles, ``<prefix>_worker``, ``<prefix>_operator`` and ``<prefix>_console``, and grants each
only what it needs on the forklift schema, its sequences and functions. Running it again is
safe (roles that exist are kept, grants re-applied): run it after every ``forklift migrate``
so new tables are covered. Passwords are the administrator's business: ``ALTER ROLE ...
PASSWORD`` (or a ``pg_hba.conf`` rule) after creating them.

A statement the database refuses for lack of privilege (SQLSTATE 42501) or because the session
is read-only (25006) becomes :class:`forklift._base.errors.ReadOnly` (code ``read_only``) in the
operator API: :func:`refusal`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg import sql

from forklift._base.errors import ForkliftError, ReadOnly
from forklift._db.sqltext import check_schema
from forklift.ops.context import OpsContext
from forklift.ops.shape import Shape

__all__ = [
    "APPEND",
    "EXTRA_WRITES",
    "OWNER_ONLY",
    "REFUSED",
    "ROLE_KINDS",
    "ROLE_SETTINGS",
    "STATS_GRANT",
    "WRITES",
    "RolesRefused",
    "RolesReport",
    "can_write",
    "create",
    "refusal",
    "role_names",
    "statements",
]

_PREFIX = re.compile(r"^[a-z_][a-z0-9_]{0,40}$")

#: Tables each role writes (INSERT, UPDATE, DELETE); every role reads every table. A table of
#: the schema named in none of these is read-only for everyone but its owner (a test keeps
#: the lists in step with the schema).
WRITES: dict[str, tuple[str, ...]] = {
    "worker": ("jobs", "queues", "workers", "leader", "batches", "schedules", "schedule_ticks",
               "backfills", "backfill_runs", "locks", "flow_keys", "flow_values", "dead_letters",
               "idle_workers", "job_steps", "job_deps", "events", "outbox", "stats_minutes",
               "stats_rollup", "consumers", "webhook_endpoints", "webhook_attempts",
               "webhook_receipts", "job_logs", "job_holds"),
    "operator": ("jobs", "queues", "batches", "schedules", "schedule_ticks", "backfills",
                 "backfill_runs", "settings", "retention", "flow_keys", "dead_letters",
                 "idle_workers", "job_steps", "job_deps", "events", "outbox", "consumers",
                 "webhook_endpoints", "job_logs", "pauses", "job_holds"),
    "console": (),
}
#: Append-only for both writers (its trigger refuses UPDATE and DELETE anyway).
APPEND = {"worker": ("audit",), "operator": ("audit",), "console": ()}
#: Tables no role writes: the owner's (migrations) alone.
OWNER_ONLY = ("schema_version",)
#: Extra tables a worker writes (partitioned history), when they exist.
EXTRA_WRITES: dict[str, tuple[str, ...]] = {"worker": ("jobs_history",),
                                            "operator": ("jobs_history",)}

ROLE_KINDS = ("worker", "operator", "console")
#: Session defaults of every role (what forklift's connections otherwise set at connect).
ROLE_SETTINGS = (("statement_timeout", "30s"), ("lock_timeout", "5s"),
                 ("idle_in_transaction_session_timeout", "60s"))


class RolesRefused(ForkliftError):
    """The session may not create roles or grant (it needs CREATEROLE and to own the schema)."""

    code = "roles_refused"


@dataclass(frozen=True)
class RolesReport(Shape):
    schema: str
    roles: dict[str, str]
    #: The statements, in order (what --print shows).
    statements: list[str]
    #: False with --print: nothing was run.
    applied: bool
    notes: list[str] = field(default_factory=list)


def role_names(prefix: str) -> dict[str, str]:
    if not _PREFIX.match(prefix):
        from forklift.ops.settings import InvalidSetting

        raise InvalidSetting(
            f"role prefix {prefix!r} is not valid: lower-case letters, digits and underscores,"
            " at most 40", value=prefix)
    return {kind: f"{prefix}_{kind}" for kind in ROLE_KINDS}


def statements(schema: str, prefix: str, tables: list[str] | None = None) -> list[sql.Composed]:
    """The SQL for the three roles; ``tables`` (the schema's, when known) limits the grants to
    tables that exist."""
    check_schema(schema)
    names = role_names(prefix)
    s = sql.Identifier(schema)
    have = set(tables) if tables is not None else None
    out: list[sql.Composed] = []
    for kind, name in names.items():
        role = sql.Identifier(name)
        out.append(sql.SQL(
            "DO $$ BEGIN CREATE ROLE {} LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$"
        ).format(role))
        out.append(sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(s, role))
        out.append(sql.SQL("GRANT SELECT ON ALL TABLES IN SCHEMA {} TO {}").format(s, role))
        writes = [t for t in (*WRITES[kind], *EXTRA_WRITES.get(kind, ()))
                  if have is None or t in have]
        if writes:
            out.append(sql.SQL("GRANT INSERT, UPDATE, DELETE ON {} TO {}").format(
                sql.SQL(", ").join(sql.Identifier(schema, t) for t in writes), role))
        for t in APPEND[kind]:
            out.append(sql.SQL("GRANT INSERT ON {} TO {}").format(sql.Identifier(schema, t), role))
        if kind == "worker" and have is not None:
            # Partitioned history: the leader creates and drops day partitions, which takes
            # owning the partitioned tables and creating tables in the schema.
            parts = sorted(x for x in have if x.startswith("jobs_history"))
            if parts:
                out.append(sql.SQL("GRANT CREATE ON SCHEMA {} TO {}").format(s, role))
            for t in parts:
                out.append(sql.SQL("ALTER TABLE {} OWNER TO {}").format(
                    sql.Identifier(schema, t), role))
        # forklift sends these per purpose at connect; a transaction pooler refuses startup
        # options, so the role carries defaults that hold there too (forklift._db.pooler).
        for name, value in ROLE_SETTINGS:
            out.append(sql.SQL("ALTER ROLE {} SET {} = {}").format(
                role, sql.Identifier(name), sql.Literal(value)))
        if kind == "console":
            out.append(sql.SQL("ALTER ROLE {} SET default_transaction_read_only = on").format(role))
        else:
            out.append(sql.SQL("GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA {} TO {}")
                       .format(s, role))
            out.append(sql.SQL("GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA {} TO {}").format(s, role))
    return out


STATS_GRANT = "GRANT pg_read_all_stats TO {}"

TABLES_SQL = "SELECT tablename::text FROM pg_tables WHERE schemaname = %s"


def create(
    conn: psycopg.Connection[Any], ctx: OpsContext, prefix: str = "forklift", *,
    print_only: bool = False,
) -> RolesReport:
    """Create the roles and grant (in one transaction), or with ``print_only`` only say how."""
    names = role_names(prefix)
    tables = [r[0] for r in conn.execute(TABLES_SQL, (ctx.schema,)).fetchall()] or None
    todo = statements(ctx.schema, prefix, tables)
    stats = [sql.SQL(STATS_GRANT).format(sql.Identifier(n)) for n in names.values()]
    text = [q.as_string(conn) for q in (*todo, *stats)]
    if print_only:
        return RolesReport(ctx.schema, names, text, False)
    notes: list[str] = []
    try:
        with conn.transaction():
            for q in todo:
                conn.execute(q)
            for q in stats:
                try:
                    with conn.transaction():
                        conn.execute(q)
                except psycopg.errors.InsufficientPrivilege:
                    notes.append("pg_read_all_stats was not granted (it takes a superuser):"
                                 " health sees other sessions' details only with it")
                    break
    except psycopg.errors.InsufficientPrivilege as exc:
        raise RolesRefused(
            f"cannot create the roles: {str(exc).strip().splitlines()[0]}; run it as a role"
            " with CREATEROLE that owns the forklift schema, or use --print and hand the SQL"
            " to one", prefix=prefix) from None
    return RolesReport(ctx.schema, names, text, True, notes)


#: SQLSTATEs meaning "this session may not write that": insufficient_privilege and
#: read_only_sql_transaction.
REFUSED = (psycopg.errors.InsufficientPrivilege, psycopg.errors.ReadOnlySqlTransaction)


def refusal(exc: BaseException, action: str = "write") -> ReadOnly | None:
    """The :class:`ReadOnly` error for a database refusal of a write, else None."""
    if not isinstance(exc, REFUSED):
        return None
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return ReadOnly(f"{action} refused by the database: {text} (this role may not write;"
                    " see `forklift roles`)", action=action, sqlstate=exc.sqlstate)


def can_write(conn: psycopg.Connection[Any], schema: str) -> bool:
    """Whether this session's role may change jobs (the operator's first write)."""
    row = conn.execute(
        "SELECT coalesce(has_table_privilege(to_regclass(%s), 'UPDATE'), true)"
        " AND NOT current_setting('default_transaction_read_only')::bool",
        (f"{check_schema(schema)}.jobs",),
    ).fetchone()
    return bool(row and row[0])
