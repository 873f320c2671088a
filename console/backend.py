"""The console's one door to the database: the operator API's :class:`Operator`.

Screens hand :meth:`Backend.call` a function of the operator; refresh workers and actions run
in threads and the operator serialises them on its one session. After any connection failure
the session is dropped, so the next call reconnects: that is how the console recovers by
itself when the database comes back.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import TypeVar

import psycopg

from forklift.db import describe_target
from forklift.errors import DatabaseUnavailable
from forklift.ops import Operator

T = TypeVar("T")

#: Errors after which the session cannot be trusted: reconnect on the next call.
CONNECTION_ERRORS: tuple[type[BaseException], ...] = (
    psycopg.OperationalError,
    psycopg.InterfaceError,
    DatabaseUnavailable,
    OSError,
)


class Backend:
    def __init__(self, operator: Operator, dsn: str, *, label: str | None = None) -> None:
        self.operator = operator
        self.dsn = dsn
        self.label = label

    @classmethod
    def open(
        cls,
        dsn: str,
        *,
        schema: str | None = None,
        actor: str | None = None,
        read_only: bool | None = None,
        label: str | None = None,
    ) -> Backend:
        return cls(
            Operator(dsn, schema=schema, actor=actor, read_only=read_only), dsn, label=label
        )

    @property
    def target(self) -> str:
        """``host:port/db · schema``, never the password."""
        return f"{self.label or describe_target(self.dsn)} · {self.operator.schema}"

    @property
    def read_only(self) -> bool:
        return self.operator.read_only

    @property
    def actor(self) -> str:
        return self.operator.actor

    def call(self, fn: Callable[[Operator], T]) -> T:
        try:
            return fn(self.operator)
        except CONNECTION_ERRORS:
            self.close()
            raise

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.operator.close()
