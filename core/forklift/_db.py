"""Connections: every forklift session names its purpose and carries its own timeouts."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from forklift._errors import DatabaseUnavailable

# Per purpose: statement timeout, lock timeout (ms). A claim or a completion flush that waits on
# a lock is a bug or an overloaded server; failing fast lets the loop retry with backoff.
_TIMEOUTS: dict[str, tuple[int, int]] = {
    "claim": (10_000, 2_000),
    "complete": (10_000, 5_000),
    "heartbeat": (5_000, 2_000),
    "leader": (30_000, 5_000),
    "listen": (5_000, 1_000),
    "ops": (30_000, 5_000),
    "enqueue": (30_000, 10_000),
    "migrate": (0, 0),
}

# Per purpose: more settings. The claim is planned once per session, not once per call:
# re-planning it cost twice its execution (~170 us a claim, most of a single job's pickup
# time on the server). Its generic plan reads only indexes (the claim index, the primary key,
# the queues' key), and with sequential scans off it cannot turn to one when the table is
# small at first and large later.
_SETTINGS: dict[str, str] = {
    "claim": " -c plan_cache_mode=force_generic_plan -c enable_seqscan=off",
}


def describe_target(conninfo: str) -> str:
    """`host:port/dbname` of a conninfo, for messages; never the password."""
    try:
        parts = conninfo_to_dict(conninfo)
    except psycopg.ProgrammingError:
        return "an unparseable DSN"
    host = str(parts.get("host") or "localhost")
    if host.startswith("/"):
        host = f"socket {host}"
    port = parts.get("port")
    db = parts.get("dbname") or parts.get("user") or ""
    return f"{host}{':' + str(port) if port else ''}/{db}"


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    # libpq prefixes lines with 'connection to server at ...' which repeats the target.
    for line in reversed(text):
        line = line.strip()
        if line:
            return line.split(": ", 1)[-1] if line.startswith("connection to server") else line
    return type(exc).__name__


def connect_kwargs(conninfo: str, purpose: str, worker: str | None = None) -> dict[str, Any]:
    statement_ms, lock_ms = _TIMEOUTS.get(purpose, (30_000, 5_000))
    name = f"forklift:{worker}:{purpose}" if worker else f"forklift:{purpose}"
    options = (
        f"-c statement_timeout={statement_ms} -c lock_timeout={lock_ms}"
        " -c idle_in_transaction_session_timeout=60000" + _SETTINGS.get(purpose, "")
    )
    return {
        "conninfo": make_conninfo(
            conninfo, application_name=name[:63], options=options, connect_timeout=10
        ),
        "autocommit": True,
    }


def unavailable(conninfo: str, exc: BaseException) -> DatabaseUnavailable:
    return DatabaseUnavailable(
        f"cannot reach PostgreSQL at {describe_target(conninfo)}: {_reason(exc)}",
        target=describe_target(conninfo),
    )


def connect(conninfo: str, purpose: str, worker: str | None = None) -> psycopg.Connection[Any]:
    try:
        return psycopg.Connection.connect(**connect_kwargs(conninfo, purpose, worker))
    except psycopg.OperationalError as exc:
        raise unavailable(conninfo, exc) from None


async def aconnect(
    conninfo: str, purpose: str, worker: str | None = None
) -> psycopg.AsyncConnection[Any]:
    try:
        return await psycopg.AsyncConnection.connect(**connect_kwargs(conninfo, purpose, worker))
    except psycopg.OperationalError as exc:
        raise unavailable(conninfo, exc) from None


@contextlib.contextmanager
def connection(conninfo: str, purpose: str) -> Iterator[psycopg.Connection[Any]]:
    conn = connect(conninfo, purpose)
    try:
        yield conn
    finally:
        conn.close()
