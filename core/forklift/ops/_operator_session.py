"""The Operator's session: its context (schema, actor, read-only), its connection to the
primary, and how every call runs on it (serialised across threads, rehearsed in
:meth:`rehearse`, sharing a snapshot in :meth:`snapshot`). The feature clients of
:class:`forklift.ops.operator.Operator` each hold it: changes go through :meth:`run` (the
primary), reads through :meth:`read` (a streaming replica when one is given and fit to answer,
else the primary; see :mod:`forklift.ops._replica_link`)."""

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
from forklift.ops._replica_link import FALLBACK_ERRORS, ReplicaLink
from forklift.ops.context import OpsContext
from forklift.ops.replica import DEFAULT_MAX_LAG, ReplicaStatus

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
        replica_dsn: str | None = None,
        replica_max_lag: float = DEFAULT_MAX_LAG,
        replica_retry: float = 10.0,
    ) -> None:
        self._ctx = OpsContext.from_env(schema=schema, actor=actor, read_only=read_only)
        #: The streaming replica reads may go to (None: every read goes to the primary).
        self._replica = (
            ReplicaLink(replica_dsn, max_lag=replica_max_lag, retry_after=replica_retry,
                        primary_lsn=self._primary_lsn)
            if replica_dsn else None
        )
        #: Inside snapshot(), on the thread running it: the connection its reads share.
        self._pinned = threading.local()
        self._dsn = dsn
        self._conn = conn
        self._own = conn is None
        self._lock = threading.RLock()
        #: The stats' closed buckets, read once per session (forklift.ops.stats.WindowCache).
        self.window = _stats.WindowCache()
        #: Inside rehearse(), on the thread running it: the context its calls act with.
        self._rehearsal = threading.local()
        self._last_lsn: str | None = None

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
        if self._replica is not None:
            self._replica.abort()

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
        if self._replica is not None:
            self._replica.close()

    # -- the replica ----------------------------------------------------------------------------
    @property
    def replica(self) -> ReplicaStatus | None:
        """Where the last read went and why (None without a replica); asks nothing."""
        return self._replica.status if self._replica is not None else None

    def check_replica(self) -> ReplicaStatus | None:
        """Connect to the replica now: a server that is not a standby is refused
        (:class:`forklift.ConfigError`); one that cannot be reached is not an error (reads go to
        the primary until it answers)."""
        if self._replica is None:
            return None
        with self._replica.lock:
            return self._replica.check_standby()

    def window_for(self, conn: psycopg.Connection[Any]) -> _stats.WindowCache:
        """The stats cache for reads on ``conn`` (the replica keeps its own: see
        :meth:`ReplicaLink.window`)."""
        link = self._replica
        if link is not None and conn is not self._conn:
            return link.window()
        return self.window

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
        """``fn(conn, ctx, *args, **kwargs)`` on the primary, one call at a time: every change
        (and its audit row) goes this way. A refused write becomes
        :class:`forklift._base.errors.ReadOnly`, a relation missing from an old schema
        :class:`forklift.SchemaOutdated`."""
        with self._lock:
            conn = self.conn
            result = self._call(conn, fn, *args, **kwargs)
            if self._replica is not None and conn.info.transaction_status == _IDLE and not (
                getattr(self._rehearsal, "ctx", None)
            ):
                self._note_change(conn)
            return result

    def read(
        self,
        fn: Callable[Concatenate[psycopg.Connection[Any], OpsContext, P], T],
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        """``fn(conn, ctx, *args, **kwargs)`` for a call that only reads: on the replica when
        one is given and fit to answer (in recovery, lag within the limit, this operator's own
        changes replayed), else on the primary. Inside :meth:`rehearse` always the primary (a
        rehearsal reads its own changes); inside :meth:`snapshot` its connection."""
        link = self._replica
        pinned: psycopg.Connection[Any] | None = getattr(self._pinned, "conn", None)
        if link is None or getattr(self._rehearsal, "ctx", None) is not None or (
            pinned is not None and pinned is self._conn
        ):
            return self._on_primary(fn, *args, **kwargs)
        with link.lock:
            conn = pinned if pinned is not None and not pinned.closed else link.choose()
            if conn is not None:
                try:
                    return self._call(conn, fn, *args, **kwargs)
                except FALLBACK_ERRORS as exc:
                    link.failed(exc)
                    if pinned is not None:
                        self._pinned.conn = None  # the rest of the snapshot reads the primary
        return self._on_primary(fn, *args, **kwargs)

    def read_primary(
        self,
        fn: Callable[Concatenate[psycopg.Connection[Any], OpsContext, P], T],
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        """A read that describes the primary server itself (its tables' upkeep, sessions,
        locks, xmin horizon): always there, whatever the replica."""
        return self._on_primary(fn, *args, **kwargs)

    def _on_primary(
        self,
        fn: Callable[Concatenate[psycopg.Connection[Any], OpsContext, P], T],
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        with self._lock:
            return self._call(self.conn, fn, *args, **kwargs)

    def _call(
        self,
        conn: psycopg.Connection[Any],
        fn: Callable[Concatenate[psycopg.Connection[Any], OpsContext, P], T],
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        try:
            return fn(conn, self.ctx, *args, **kwargs)
        except psycopg.Error as exc:
            # The roles module loads only when the database refuses something.
            from forklift.ops import roles

            if isinstance(exc, roles.REFUSED):
                raise roles.refusal(exc, getattr(fn, "__name__", "write")) or exc from None
            if isinstance(exc, _MISSING):
                raise _outdated(conn, self.ctx.schema) or exc from None
            if isinstance(exc, psycopg.OperationalError) and self._own and conn.closed and (
                conn is self._conn
            ):
                self._conn = None  # reopened on the next call
            raise

    def _note_change(self, conn: psycopg.Connection[Any]) -> None:
        """Remember where the primary's WAL stands after a call that may have changed
        something: reads stay on the primary until the replica has replayed that far, so the
        operator sees their own change at once."""
        link = self._replica
        if link is None:
            return
        try:
            row = conn.execute(_WAL_SQL).fetchone()
        except psycopg.Error:
            return  # the next read finds the connection's trouble itself
        if row is not None and row[0] is not None and row[0] != self._last_lsn:
            self._last_lsn = link.pending_lsn = str(row[0])

    def _primary_lsn(self) -> str | None:
        """Where the primary's WAL stands now (the replica must reach it before reads go back
        there after a spell on the primary)."""
        with self._lock:
            row = self.conn.execute(_WAL_SQL).fetchone()
        return None if row is None or row[0] is None else str(row[0])

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
        beside them). Other threads' calls wait until it ends. With a replica fit to answer,
        the snapshot is taken there; should it fail midway, the remaining reads go to the
        primary."""
        link = self._replica
        if link is not None and getattr(self._rehearsal, "ctx", None) is None:
            with link.lock:
                conn = link.choose()
                if conn is not None:
                    with contextlib.ExitStack() as stack:
                        try:
                            stack.enter_context(conn.transaction())
                            conn.execute(_SNAPSHOT_SQL)
                        except FALLBACK_ERRORS as exc:
                            _abandon(stack)
                            link.failed(exc)
                        else:
                            self._pinned.conn = conn
                            try:
                                yield
                            finally:
                                if getattr(self._pinned, "conn", None) is not conn:
                                    _abandon(stack)  # a read failed there: nothing to end
                                self._pinned.conn = None
                            return
        with self._lock:
            conn = self.conn
            with conn.transaction():
                conn.execute(_SNAPSHOT_SQL)
                self._pinned.conn = conn
                try:
                    yield
                finally:
                    self._pinned.conn = None


class _Abandoned(Exception):
    """Ends a snapshot's transaction on the replica by rolling it back (its read failed)."""


def _abandon(stack: contextlib.ExitStack) -> None:
    """Leave a snapshot's transaction on the replica without committing it: rolled back on a
    live connection; on a dead one there is nothing left to end."""
    gone = _Abandoned()
    with contextlib.suppress(psycopg.Error, _Abandoned):
        stack.__exit__(_Abandoned, gone, None)


_IDLE = psycopg.pq.TransactionStatus.IDLE
_SNAPSHOT_SQL = "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY"
#: Where the primary's WAL ends: a change just committed is before it.
_WAL_SQL = "SELECT pg_current_wal_insert_lsn()::text"

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

