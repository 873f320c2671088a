"""The console's one door to the database: the operator API's :class:`Operator`.

Screens hand :meth:`Backend.call` a function of the operator; refresh workers and actions run
in threads and the operator serialises them on its one session. After any connection failure
the session is dropped, so the next call reconnects: that is how the console recovers by
itself when the database comes back. With a replica, the operator sends the screens' reads
there and falls back to the primary by itself (a replica that fails is never a failed call).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import TypeVar

import psycopg

from forklift import DatabaseUnavailable, ForkliftError
from forklift.ops import Operator
from forklift.ops.connect import describe_target
from forklift.ops.replica import DEFAULT_MAX_LAG, ReplicaStatus

T = TypeVar("T")

#: Errors after which the session cannot be trusted: reconnect on the next call.
CONNECTION_ERRORS: tuple[type[BaseException], ...] = (
    psycopg.OperationalError,
    psycopg.InterfaceError,
    DatabaseUnavailable,
    OSError,
)


def describe_error(exc: BaseException) -> str:
    """A failed call in one line for the operator (a banner, a notification)."""
    if isinstance(exc, ForkliftError):
        return exc.message
    text = str(exc).strip().splitlines()
    first = text[0] if text else ""
    if isinstance(exc, CONNECTION_ERRORS):
        return f"database unreachable: {first or type(exc).__name__}"
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


#: A refresh that has not answered after this long is cut off (its session is dropped), so a
#: database that hangs instead of failing cannot freeze the console's data for good.
FETCH_DEADLINE = 35.0


class Backend:
    def __init__(
        self,
        operator: Operator,
        dsn: str,
        *,
        label: str | None = None,
        fetch_deadline: float = FETCH_DEADLINE,
    ) -> None:
        self.operator = operator
        self.dsn = dsn
        self.label = label
        self.fetch_deadline = fetch_deadline

    @classmethod
    def open(
        cls,
        dsn: str,
        *,
        schema: str | None = None,
        actor: str | None = None,
        read_only: bool | None = None,
        label: str | None = None,
        fetch_deadline: float = FETCH_DEADLINE,
        replica_dsn: str | None = None,
        replica_max_lag: float = DEFAULT_MAX_LAG,
        replica_retry: float = 10.0,
    ) -> Backend:
        """``replica_dsn``: the screens' reads go to this streaming replica while it is fit
        (see :class:`forklift.ops.Operator`); actions always go to ``dsn``."""
        return cls(
            Operator(dsn, schema=schema, actor=actor, read_only=read_only,
                     replica_dsn=replica_dsn, replica_max_lag=replica_max_lag,
                     replica_retry=replica_retry),
            dsn,
            label=label,
            fetch_deadline=fetch_deadline,
        )

    @property
    def target(self) -> str:
        """``host:port/db · schema``, never the password."""
        return f"{self.label or describe_target(self.dsn)} · {self.operator.schema}"

    @property
    def replica(self) -> ReplicaStatus | None:
        """Where the last read went and the replica's lag (None without a replica); asks
        nothing, so the header may show it on every paint."""
        return self.operator.session.replica

    @property
    def read_only(self) -> bool:
        return self.operator.read_only

    @property
    def actor(self) -> str:
        return self.operator.actor

    def call(self, fn: Callable[[Operator], T], *, deadline: float | None = None) -> T:
        """Run ``fn`` on the operator; with a ``deadline`` (seconds), a call still waiting then
        has its session's socket shut, so it fails like a dropped connection and the next call
        reconnects. (A statement timeout cannot help when the server stops answering.)"""
        timer = None
        if deadline is not None:
            timer = threading.Timer(deadline, self._cut_off)
            timer.daemon = True
            timer.start()
        try:
            return fn(self.operator)
        except CONNECTION_ERRORS:
            self.close()
            raise
        finally:
            if timer is not None:
                timer.cancel()

    def _cut_off(self) -> None:
        self.operator.abort()  # shuts the session's socket, if it has one; opens nothing

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.operator.close()
