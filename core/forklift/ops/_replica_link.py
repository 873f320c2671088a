"""The operator's link to a streaming replica: its one read-only connection, whether reads may
go there now (in recovery, lag within the limit, caught up with this operator's own changes),
and what the console header and ``--json`` say about it (:class:`ReplicaStatus`).

The replica never makes a read fail: whatever goes wrong with it (stopped, unreachable, too far
behind, promoted), :meth:`ReplicaLink.choose` answers None and the read goes to the primary.
A replica that could not be reached is tried again after ``retry_after`` seconds, so one that
comes back is used again without a restart; its lag is measured at most every
``check_every`` seconds, so a refresh that makes several reads pays for one check.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from forklift._base.errors import ConfigError, DatabaseUnavailable
from forklift._db import pooler
from forklift._db.connections import connect_kwargs, describe_target, unavailable
from forklift.ops.replica import ReplicaStatus
from forklift.ops.stats import SETTLE_MARGIN, WindowCache

__all__ = ["ReplicaLink"]

log = logging.getLogger("forklift.ops")

# Lag as the brief's operators read it: 0 when everything received has been replayed (an idle
# primary sends nothing, and must not look like a replica falling behind), else the age of the
# last transaction replayed. Negative (clocks apart) reads as 0.
CHECK_SQL = """
SELECT pg_is_in_recovery(),
       CASE WHEN pg_is_in_recovery() THEN
         CASE WHEN pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn() THEN 0.0
              ELSE greatest(0.0, extract(epoch FROM now() - pg_last_xact_replay_timestamp()))::float8
         END
       END,
       CASE WHEN pg_is_in_recovery() AND %(lsn)s::text IS NOT NULL
            THEN pg_last_wal_replay_lsn() >= %(lsn)s::text::pg_lsn END
"""

#: A replica that does not answer its connection this fast is treated as gone (unless its DSN
#: or PGCONNECT_TIMEOUT says otherwise): reads must not wait on it.
CONNECT_TIMEOUT = 3
#: Errors of a read on the replica after which that read is made on the primary instead: the
#: connection failed, or the standby cancelled the query (a conflict with recovery).
FALLBACK_ERRORS: tuple[type[BaseException], ...] = (
    psycopg.OperationalError,
    psycopg.InterfaceError,
    psycopg.errors.SerializationFailure,
    DatabaseUnavailable,
    OSError,
)


class ReplicaLink:
    """A replica's connection and state; the caller holds :attr:`lock` around
    :meth:`choose` and the read made on what it returns."""

    def __init__(
        self,
        dsn: str,
        *,
        max_lag: float,
        retry_after: float = 10.0,
        check_every: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        primary_lsn: Callable[[], str | None] | None = None,
    ) -> None:
        self.dsn = dsn
        self.target = describe_target(dsn)
        self.max_lag = max_lag
        self.retry_after = retry_after
        self.check_every = check_every
        self._clock = clock
        self._primary_lsn = primary_lsn
        #: Held around a read on the replica (its one connection serves one call at a time).
        self.lock = threading.RLock()
        #: The stats' closed buckets as read on the replica (see :meth:`window`).
        self.cache = WindowCache()
        self._conn: psycopg.Connection[Any] | None = None
        self._checked_at: float | None = None
        self._down_until = 0.0
        #: The primary's WAL position after this operator's last change, until replayed here.
        self.pending_lsn: str | None = None
        #: What :attr:`pending_lsn` stands for, in the status's reason while it is not replayed.
        self._pending_why = "this operator's last change"
        self.status = ReplicaStatus(
            target=self.target, state="not_asked", max_lag_seconds=max_lag,
            reason="no read has gone to it yet",
        )

    # -- where a read goes -------------------------------------------------------------------
    def choose(self) -> psycopg.Connection[Any] | None:
        """The replica's connection if a read may go there now, else None (:attr:`status`
        says why). Never raises."""
        now = self._clock()
        fresh = self._checked_at is not None and now - self._checked_at < self.check_every
        if self.status.state == "unreachable" and now < self._down_until:
            return None
        if fresh and self.pending_lsn is None and self._conn is not None and not self._conn.closed:
            return self._conn if self.status.used else None
        pending = self._floor()
        try:
            conn = self._connection()
            row = conn.execute(CHECK_SQL, {"lsn": pending}).fetchone()
        except FALLBACK_ERRORS as exc:
            self.failed(exc)
            return None
        self._checked_at = now
        in_recovery, lag, caught_up = row if row is not None else (False, None, None)
        if not in_recovery:
            self._set("not_standby", "it is not in recovery (a primary, or promoted):"
                      " reads go to the primary")
            return None
        if lag is None:
            self._set("lag_unknown", "it has replayed nothing since it started and is not"
                      " streaming yet: reads go to the primary")
            return None
        lag = float(lag)
        if lag > self.max_lag:
            self._set("lagging", f"its lag {lag:.1f}s is over the {self.max_lag:g}s limit"
                      " (--replica-max-lag): reads go to the primary", lag)
            return None
        if caught_up is False:
            self._set("catching_up", f"it has not yet replayed {self._pending_why}:"
                      " reads go to the primary", lag)
            return None
        if self.pending_lsn == pending:  # not a newer change made meanwhile
            self.pending_lsn = None
            self._pending_why = "this operator's last change"
        self._set("used", f"lag {lag:.1f}s is within the {self.max_lag:g}s limit", lag)
        return conn

    def _floor(self) -> str | None:
        """The WAL position the replica must have replayed before a read goes there. Back from
        a spell of reads on the primary (unreachable, lagging, promoted), that is where the
        primary stands now: those reads showed everything up to it, and the next ones must not
        show less (a restarted standby reads as caught up with what it has received before
        it has received anything)."""
        if self.pending_lsn is None and self._primary_lsn is not None and (
            self.status.state not in ("used", "not_asked")
        ):
            try:
                lsn = self._primary_lsn()
            except FALLBACK_ERRORS:
                lsn = None  # the primary's own read finds its trouble
            except psycopg.Error:
                lsn = None  # a refusal, say: choose() never raises; the primary answers
            if lsn is not None:
                self.pending_lsn = lsn
                self._pending_why = "what reads on the primary have already shown"
        return self.pending_lsn

    def failed(self, exc: BaseException) -> None:
        """A read on the replica failed: that read goes to the primary; a broken connection is
        dropped and the replica tried again after ``retry_after`` seconds."""
        conn = self._conn
        if conn is None or conn.closed or conn.broken or isinstance(exc, DatabaseUnavailable):
            self.drop()
            self._down_until = self._clock() + self.retry_after
            self._set("unreachable", f"unreachable ({self._why(exc)}): reads go to the primary")
        else:  # a query the standby cancelled: this read only
            self._checked_at = None
            self._set("read_failed", f"a read failed there ({self._why(exc)}):"
                      " that read went to the primary", self.status.lag_seconds)

    def window(self) -> WindowCache:
        """The replica's stats cache while its lag leaves settled buckets settled (under
        :data:`forklift.ops.stats.SETTLE_MARGIN`); a throwaway one (a full read) beyond."""
        lag = self.status.lag_seconds or 0.0
        return self.cache if lag < SETTLE_MARGIN / 2 else WindowCache()

    # -- at start -----------------------------------------------------------------------------
    def check_standby(self) -> ReplicaStatus:
        """Connect now; a server that is not in recovery is refused (:class:`ConfigError`),
        one that cannot be reached is not an error (reads go to the primary until it is)."""
        conn = self.choose()
        if conn is not None:  # fit: but no read has gone to it yet (the next one re-checks)
            self._checked_at = None
            self.status = replace(self.status, state="not_asked",
                                  reason="a standby within the lag limit; no read has gone to"
                                  " it yet")
        if conn is None and self.status.state == "not_standby":
            raise ConfigError(
                f"--replica-dsn points at {self.target}, which is not a standby (it is not in"
                " recovery): give a streaming replica's DSN, or drop the option to read the"
                " primary", option="--replica-dsn", target=self.target,
            )
        return self.status

    # -- the connection -------------------------------------------------------------------------
    def _connection(self) -> psycopg.Connection[Any]:
        if self._conn is not None and not self._conn.closed and not self._conn.broken:
            return self._conn
        kwargs = connect_kwargs(self.dsn, "ops-replica")
        params = conninfo_to_dict(kwargs["conninfo"])
        if not pooler.pooled(self.dsn):
            # A standby refuses writes anyway; this makes it so on a server given by mistake too.
            params["options"] = f"{params.get('options', '')} -c default_transaction_read_only=on"
        try:
            mine = conninfo_to_dict(self.dsn)
        except psycopg.ProgrammingError:
            mine = {}  # psycopg reports the malformed DSN when it connects
        if not mine.get("connect_timeout") and not os.environ.get("PGCONNECT_TIMEOUT"):
            params["connect_timeout"] = CONNECT_TIMEOUT
        kwargs["conninfo"] = make_conninfo("", **params)
        try:
            self._conn = psycopg.Connection.connect(**kwargs)
        except psycopg.OperationalError as exc:
            raise unavailable(self.dsn, exc) from None
        return self._conn

    def drop(self) -> None:
        conn, self._conn = self._conn, None
        self._checked_at = None
        if conn is not None:
            try:
                conn.close()
            except Exception:  # a dead connection may fail to close; it is gone
                log.debug("closing the replica connection failed", exc_info=True)

    def abort(self) -> None:
        conn = self._conn
        if conn is not None:
            from forklift._db.session import shut_socket

            shut_socket(conn)

    def close(self) -> None:
        self.drop()

    def _set(self, state: str, reason: str, lag: float | None = None) -> None:
        before = self.status
        self.status = ReplicaStatus(target=self.target, state=state, reason=reason,
                                    max_lag_seconds=self.max_lag, lag_seconds=lag)
        if before.used and state != "used":
            log.warning("replica %s not used: %s", self.target, reason)
        elif state == "used" and before.state not in ("used", "not_asked"):
            log.info("replica %s used again: %s", self.target, reason)


    def _why(self, exc: BaseException) -> str:
        """The failure in one line, without the target the status names already."""
        text = exc.message if isinstance(exc, DatabaseUnavailable) else _one_line(exc)
        return text.removeprefix(f"cannot reach PostgreSQL at {self.target}: ")


def _one_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__
