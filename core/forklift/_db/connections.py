"""Connections: every forklift session names its purpose and carries its own timeouts."""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from forklift._base.errors import DatabaseUnavailable
from forklift._db import pooler

# Per purpose: statement timeout, lock timeout (ms). A claim or a completion flush that waits on
# a lock is a bug or an overloaded server; failing fast lets the loop retry with backoff.
_TIMEOUTS: dict[str, tuple[int, int]] = {
    "claim": (10_000, 2_000),
    "complete": (10_000, 5_000),
    "complete-flow": (10_000, 5_000),
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
_SETTINGS: dict[str, tuple[tuple[str, str], ...]] = {
    "claim": (("plan_cache_mode", "force_generic_plan"), ("enable_seqscan", "off")),
    # A flow worker's outcome lanes send the hand-off (forklift._features.flow.handoff), which the
    # server otherwise planned again on most runs: 827 plans in 1,328, 1.8 ms each against
    # 2.4 ms to run it on its generic plan (tests/worker/test_claim_plan.py checks that plan).
    "complete-flow": (("plan_cache_mode", "force_generic_plan"),),
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


#: PostgreSQL keeps at most this many bytes of an application_name (NAMEDATALEN - 1).
APPNAME_MAX = 63
_GUC = re.compile(r"(?:^|\s)(?:-c\s*|--)([A-Za-z_][A-Za-z0-9_.]*)\s*=")
# libpq reads these from the environment only when the conninfo does not name them, so a
# conninfo that names them (as forklift's did) silently drops the user's environment.
_ENV = {"options": "PGOPTIONS", "application_name": "PGAPPNAME",
        "connect_timeout": "PGCONNECT_TIMEOUT"}


def _users(parts: dict[str, Any], key: str) -> str:
    value = parts.get(key)
    if value in (None, ""):
        value = os.environ.get(_ENV[key], "")
    return str(value)


def app_name(user: str, tag: str) -> str:
    """``user:tag`` (just ``tag`` without a user name) within PostgreSQL's 63 bytes.

    The user's part is shortened first, so forklift's purpose tag stays readable in
    ``pg_stat_activity``; a tag that alone is too long loses its end.
    """
    if not user:
        return _clip(tag, APPNAME_MAX)
    room = APPNAME_MAX - len(tag.encode("utf-8")) - 1
    if room < 1:
        return _clip(tag, APPNAME_MAX)
    return f"{_clip(user, room)}:{tag}"


def _clip(text: str, limit: int) -> str:
    raw = text.encode("utf-8")
    return text if len(raw) <= limit else raw[:limit].decode("utf-8", "ignore")


def connect_kwargs(conninfo: str, purpose: str, worker: str | None = None) -> dict[str, Any]:
    """How to open a forklift session: the user's conninfo with forklift's settings added.

    Everything the user set is kept: the DSN's ``options`` (search_path, role settings...) and
    any server setting named there wins over forklift's per-purpose one, its
    ``application_name`` gets forklift's purpose tag appended (``myapp:forklift:w1:claim``),
    and its ``connect_timeout`` stands (forklift's 10 s is only the default). The same goes
    for ``PGOPTIONS``, ``PGAPPNAME`` and ``PGCONNECT_TIMEOUT`` when the DSN does not set them.
    """
    family = purpose.rstrip("0123456789")  # complete-flow2 is a complete-flow
    statement_ms, lock_ms = _TIMEOUTS.get(family, (30_000, 5_000))
    try:
        parts = conninfo_to_dict(conninfo)
    except psycopg.ProgrammingError:
        parts = {}  # psycopg reports the malformed DSN when it connects
    user_options = _users(parts, "options").strip()
    named = set(_GUC.findall(" " + user_options))
    ours = [
        ("statement_timeout", str(statement_ms)),
        ("lock_timeout", str(lock_ms)),
        ("idle_in_transaction_session_timeout", "60000"),
        *_SETTINGS.get(family, ()),
    ]
    added = " ".join(f"-c {name}={value}" for name, value in ours if name not in named)
    options = f"{user_options} {added}".strip()
    tag = f"forklift:{worker}:{purpose}" if worker else f"forklift:{purpose}"
    kwargs = {
        "conninfo": make_conninfo(
            conninfo,
            application_name=app_name(_users(parts, "application_name"), tag),
            options=options,
            connect_timeout=_users(parts, "connect_timeout") or 10,
        ),
        "autocommit": True,
    }
    return pooler.adapt(kwargs) if pooler.pooled(conninfo) else kwargs


def unavailable(conninfo: str, exc: BaseException) -> DatabaseUnavailable:
    return DatabaseUnavailable(
        f"cannot reach PostgreSQL at {describe_target(conninfo)}: {_reason(exc)}",
        target=describe_target(conninfo),
    )


def connect(conninfo: str, purpose: str, worker: str | None = None) -> psycopg.Connection[Any]:
    for attempt in (1, 2):  # a pooler that refuses startup options: learned, tried again
        try:
            return psycopg.Connection.connect(**connect_kwargs(conninfo, purpose, worker))
        except psycopg.OperationalError as exc:
            if attempt == 2 or not pooler.refused_options(exc) or pooler.pooled(conninfo):
                raise unavailable(conninfo, exc) from None
            pooler.learn(conninfo)
    raise AssertionError("unreachable")


async def aconnect(
    conninfo: str, purpose: str, worker: str | None = None
) -> psycopg.AsyncConnection[Any]:
    for attempt in (1, 2):
        try:
            return await psycopg.AsyncConnection.connect(
                **connect_kwargs(conninfo, purpose, worker))
        except psycopg.OperationalError as exc:
            if attempt == 2 or not pooler.refused_options(exc) or pooler.pooled(conninfo):
                raise unavailable(conninfo, exc) from None
            pooler.learn(conninfo)
    raise AssertionError("unreachable")


@contextlib.contextmanager
def connection(conninfo: str, purpose: str) -> Iterator[psycopg.Connection[Any]]:
    conn = connect(conninfo, purpose)
    try:
        yield conn
    finally:
        conn.close()
