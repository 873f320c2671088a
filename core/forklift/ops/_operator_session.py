"""The Operator's session: its context (schema, actor, read-only), its one connection, and how
every call runs on it (serialised across threads, rehearsed in :meth:`rehearse`, sharing a
snapshot in :meth:`snapshot`). The feature clients of :class:`forklift.ops.operator.Operator`
each hold it and make their calls through :meth:`run`."""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections.abc import Callable, Iterator
from dataclasses import replace
from types import TracebackType
from typing import Any, Concatenate, ParamSpec, Self, TypeVar

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from forklift._db import config, pooler
from forklift._db.connections import connect, connect_kwargs, unavailable
from forklift.ops import stats as _stats
from forklift.ops.context import OpsContext

__all__ = ["OperatorSession"]

T = TypeVar("T")
P = ParamSpec("P")


class OperatorSession:
    """One database session for operator calls; see :class:`forklift.ops.operator.Operator`."""

    def __init__(
        self,
        dsn: str | None = None,
        *,
        schema: str | None = None,
        actor: str | None = None,
        read_only: bool | None = None,
        conn: psycopg.Connection[Any] | None = None,
    ) -> None:
        self._ctx = OpsContext.from_env(schema=schema, actor=actor, read_only=read_only)
        self._dsn = dsn
        self._conn = conn
        self._own = conn is None
        self._lock = threading.RLock()
        #: The stats' closed buckets, read once per session (forklift.ops.stats.WindowCache).
        self.window = _stats.WindowCache()
        #: Inside rehearse(), on the thread running it: the context its calls act with.
        self._rehearsal = threading.local()

    @property
    def ctx(self) -> OpsContext:
        """Schema, actor and read-only mode (inside :meth:`dry_run`, on its thread, writable)."""
        return getattr(self._rehearsal, "ctx", None) or self._ctx

    @ctx.setter
    def ctx(self, value: OpsContext) -> None:
        self._ctx = value

    @property
    def schema(self) -> str:
        return self.ctx.schema

    @property
    def actor(self) -> str:
        return self.ctx.actor

    @property
    def read_only(self) -> bool:
        return self.ctx.read_only

    @property
    def conn(self) -> psycopg.Connection[Any]:
        if self._conn is None or self._conn.closed or self._conn.broken:
            target = config.resolve(self._dsn, schema=self.ctx.schema).dsn
            if self.ctx.read_only and not pooler.pooled(target):
                # Belt and braces: the session refuses writes even if a code path forgot to ask
                # (a startup option: not behind a transaction pooler, which refuses them).
                kwargs = connect_kwargs(target, "ops")
                params = conninfo_to_dict(kwargs["conninfo"])
                params["options"] = f"{params.get('options', '')} -c default_transaction_read_only=on"
                kwargs["conninfo"] = make_conninfo("", **params)
                try:
                    self._conn = psycopg.Connection.connect(**kwargs)
                except psycopg.OperationalError as exc:
                    if not pooler.refused_options(exc):
                        raise unavailable(target, exc) from None
                    pooler.learn(target)
                    self._conn = connect(target, "ops")
            else:
                self._conn = connect(target, "ops")
                self._check_role(self._conn)
            self._own = True
        return self._conn

    def abort(self) -> None:
        """Cut off a call that hangs (a server that stopped answering): shut this operator's
        session's socket, so the waiting call fails like a dropped connection and the next
        call reconnects. Safe from another thread; opens nothing; never raises."""
        conn = self._conn
        if conn is not None:
            from forklift._db.session import shut_socket

            shut_socket(conn)

    def _check_role(self, conn: psycopg.Connection[Any]) -> None:
        # A role that may not write (forklift roles: the console's) makes this Operator
        # read-only, so the console disables its actions and says why.
        from forklift.ops import roles

        if not roles.can_write(conn, self.ctx.schema):
            role = conn.info.parameter_status("session_authorization") or "this role"
            self.ctx = dataclasses.replace(
                self.ctx, read_only=True,
                read_only_reason=f"the database role {role} may not write forklift's tables",
            )

    def check_role(self) -> bool:
        """Connect now and say whether this Operator is read-only (asked for, or because its
        database role may not write)."""
        self.conn  # noqa: B018 - connecting is the check
        return self.ctx.read_only

    def close(self) -> None:
        if self._own and self._conn is not None:
            self._conn.close()
        self._conn = None if self._own else self._conn

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def run(
        self,
        fn: Callable[Concatenate[psycopg.Connection[Any], OpsContext, P], T],
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        """``fn(conn, ctx, *args, **kwargs)`` on this session's connection, one call at a time;
        a refused write becomes :class:`forklift._base.errors.ReadOnly`, a relation missing
        from an old schema :class:`forklift.SchemaOutdated`."""
        with self._lock:
            conn = self.conn
            try:
                return fn(conn, self.ctx, *args, **kwargs)
            except psycopg.Error as exc:
                # The roles module loads only when the database refuses something.
                from forklift.ops import roles

                if isinstance(exc, roles.REFUSED):
                    raise roles.refusal(exc, getattr(fn, "__name__", "write")) or exc from None
                if isinstance(exc, _MISSING):
                    raise _outdated(conn, self.ctx.schema) or exc from None
                if isinstance(exc, psycopg.OperationalError) and self._own and conn.closed:
                    self._conn = None  # reopened on the next call
                raise

    def rehearse(self, fn: Callable[[], T]) -> T:
        """Run ``fn()`` inside one transaction that is always rolled back, its calls acting
        with a writable context on this thread (see :meth:`forklift.ops.operator.Operator.dry_run`)."""
        with self._lock:
            conn = self.conn
            try:
                with conn.transaction(force_rollback=True):
                    if self._ctx.read_only:
                        conn.execute("SET TRANSACTION READ WRITE")
                    self._rehearsal.ctx = replace(self._ctx, read_only=False)
                    return fn()
            finally:
                self._rehearsal.ctx = None

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[None]:
        """Calls made inside share one read-only snapshot (REPEATABLE READ), so figures read
        by several calls agree (the stats and the list of running jobs the console shows
        beside them). Other threads' calls wait until it ends."""
        with self._lock:
            conn = self.conn
            with conn.transaction():
                conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                yield


# What a read against a schema older than this forklift fails with: a table, column or function
# a later migration adds. Checked only then, so a call on a current schema pays nothing for it.
_MISSING = (psycopg.errors.UndefinedTable, psycopg.errors.UndefinedColumn,
            psycopg.errors.UndefinedFunction)


def _outdated(conn: psycopg.Connection[Any], schema: str) -> Exception | None:
    """The :class:`forklift.SchemaOutdated` that explains a missing relation, if the schema is
    behind (``run `forklift migrate```); None when it is current or cannot be asked now (inside
    a transaction the failure aborted)."""
    from forklift._base.errors import SchemaOutdated
    from forklift._db.migrate import ensure_current

    if conn.closed or conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
        return None
    try:
        ensure_current(conn, schema)
    except SchemaOutdated as exc:
        return exc
    except psycopg.Error:
        return None
    return None

