"""Running behind a pooler in transaction mode (PgBouncer ``pool_mode = transaction``).

Such a pooler hands each transaction to whichever server session is free, so nothing that lives
in a session survives: startup ``options`` (PgBouncer refuses them: "unsupported startup
parameter: options"), ``SET``, ``LISTEN``, session advisory locks, and prepared statements
(PgBouncer 1.18 has no protocol-level support for them). forklift then:

- sends no ``options``: the per-purpose ``statement_timeout``/``lock_timeout`` and
  ``idle_in_transaction_session_timeout`` come from the database role instead (``forklift roles
  create`` sets them on its roles), and every worker operation keeps its client-side deadline;
- prepares no statements (psycopg's ``prepare_threshold=None``), so the claim is planned on each
  call (a custom plan, from current statistics; the generic-plan settings of a direct claim
  session are not needed then);
- LISTENs only on a direct connection: ``listen_dsn=`` / ``FORKLIFT_LISTEN_DSN``; without one
  the worker warns and relies on its poll (``--poll-interval``);
- takes only transaction-scoped advisory locks (as it always does).

A target is pooled when ``FORKLIFT_POOLER=transaction`` says so, or once a connection to it was
refused for its ``options`` (learned for the rest of the process, with one warning).
"""

from __future__ import annotations

import logging
import os
from typing import Any

from psycopg.conninfo import conninfo_to_dict, make_conninfo

log = logging.getLogger("forklift.db")

ENV = "FORKLIFT_POOLER"
LISTEN_ENV = "FORKLIFT_LISTEN_DSN"
_REFUSAL = "unsupported startup parameter"
_learned: set[str] = set()


def _key(conninfo: str) -> str:
    try:
        p = conninfo_to_dict(conninfo)
    except Exception:
        return conninfo
    return f"{p.get('host')}:{p.get('port')}/{p.get('dbname')}"


def pooled(conninfo: str) -> bool:
    """Whether connections to ``conninfo`` go through a transaction-mode pooler."""
    if os.environ.get(ENV, "").strip().lower() in ("transaction", "1", "true", "yes", "on"):
        return True
    return _key(conninfo) in _learned


def refused_options(exc: BaseException) -> bool:
    """A connection refused because a pooler does not keep startup ``options``."""
    return _REFUSAL in str(exc)


def learn(conninfo: str) -> None:
    key = _key(conninfo)
    if key not in _learned:
        _learned.add(key)
        log.warning(
            "%s is behind a pooler in transaction mode (it refused startup options): forklift"
            " sends none and prepares no statements from now on; set statement_timeout and"
            " lock_timeout on the role (forklift roles create does), LISTEN needs a direct"
            " connection (listen_dsn= or %s), and set %s=transaction to skip this first try",
            key, LISTEN_ENV, ENV)


def adapt(kwargs: dict[str, Any]) -> dict[str, Any]:
    """Connection arguments without what a transaction pooler cannot keep."""
    params = conninfo_to_dict(kwargs["conninfo"])
    params["options"] = ""  # empty, not absent: libpq would fall back to PGOPTIONS
    return {**kwargs, "conninfo": make_conninfo(**params), "prepare_threshold": None}  # type: ignore[arg-type]


def listen_dsn(conninfo: str, explicit: str | None = None) -> str | None:
    """Where to LISTEN: the explicit DSN, ``FORKLIFT_LISTEN_DSN``, the DSN itself unless it is
    pooled; None when there is nowhere (the worker polls)."""
    chosen = explicit or os.environ.get(LISTEN_ENV) or None
    if chosen:
        return chosen
    return None if pooled(conninfo) else conninfo
