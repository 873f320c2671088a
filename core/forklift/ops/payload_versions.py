"""Live jobs by kind and payload version: what still waits or runs in each version, so an
operator sees when an old version has drained (and an old worker or upcaster may go).

A job's version is the one its producer declared (``@app.job(version=N)``); a job of a kind
that declares none is version 1. One statement over the live jobs (their partial indexes), the
same one the Kinds breakdown reads (:mod:`forklift.ops.kinds`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import psycopg

from forklift.ops import history
from forklift.ops.context import OpsContext
from forklift.ops.shape import Shape

__all__ = ["LIVE_SQL", "PayloadVersions", "VersionRow", "fold", "payload_versions"]

#: Live jobs per queue, kind, payload version (NULL: version 1) and state.
LIVE_SQL = """
SELECT queue, kind, coalesce(payload_version, 1), state, count(*) FROM {s}.jobs
WHERE state IN ('scheduled', 'available', 'running', 'retryable')
GROUP BY 1, 2, 3, 4
"""


@dataclass
class VersionRow(Shape):
    """The live jobs of one queue, kind and payload version."""

    queue: str
    kind: str
    version: int
    #: available and scheduled (a job put back for a worker that reads its version included)
    waiting: int = 0
    running: int = 0
    retrying: int = 0

    @property
    def live(self) -> int:
        return self.waiting + self.running + self.retrying


@dataclass
class PayloadVersions(Shape):
    """Every queue, kind and payload version with live jobs, by queue, kind, then version."""

    rows: list[VersionRow] = field(default_factory=list)

    def versions(self, kind: str) -> list[int]:
        """The versions a kind's live jobs carry, oldest first."""
        return sorted({r.version for r in self.rows if r.kind == kind})


def fold(rows: Iterable[tuple[Any, ...]]) -> list[VersionRow]:
    """:data:`LIVE_SQL`'s rows as one :class:`VersionRow` per queue, kind and version."""
    out: dict[tuple[str, str, int], VersionRow] = {}
    for queue, kind, version, state, n in rows:
        row = out.setdefault((queue, kind, int(version)),
                             VersionRow(queue=queue, kind=kind, version=int(version)))
        if state in ("available", "scheduled"):
            row.waiting += int(n)
        elif state == "running":
            row.running += int(n)
        else:
            row.retrying += int(n)
    return [out[k] for k in sorted(out)]


def payload_versions(conn: psycopg.Connection[Any], ctx: OpsContext,
                     kinds: Iterable[str] = ()) -> PayloadVersions:
    """Live jobs by queue, kind and payload version (only ``kinds`` when given)."""
    wanted = set(kinds)
    rows = fold(conn.execute(history.render_read(LIVE_SQL, conn, ctx.schema)).fetchall())
    return PayloadVersions(rows=[r for r in rows if not wanted or r.kind in wanted])
