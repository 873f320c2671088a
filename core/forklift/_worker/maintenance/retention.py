"""Retention: terminal rows past their window, in short keyset batches (never one huge delete)."""

from __future__ import annotations

from typing import Any

import psycopg

from forklift._features import batches
from forklift._features import retention as _retention
from forklift._worker.maintenance.chore import Chore

# `forklift prune`'s one-off cut (ops.prune); the leader's passes are forklift._features.retention's.
# Targets of a batch whose TTL has not lapsed stay readable (forklift.batches).
RETENTION_SQL = """
WITH old AS (
    SELECT id FROM {s}.jobs j
    WHERE state = %s AND finished_at < now() - make_interval(secs => %s)
      AND (batch_id IS NULL OR NOT EXISTS (
          SELECT 1 FROM {s}.batches b WHERE b.id = j.batch_id AND b.expires_at > now()))
    ORDER BY finished_at LIMIT %s
    FOR UPDATE SKIP LOCKED
)
DELETE FROM {s}.jobs AS t USING old WHERE t.id = old.id AND t.state = %s
"""


async def retention(
    conn: psycopg.AsyncConnection[Any],
    schema: str,
    windows: dict[str, float] | None = None,
    batch: int = 1000,
    max_batches: int = 10,
) -> int:
    """Delete terminal jobs older than their window, in keyset batches; bounded work per call.

    The windows are the database's (``forklift retention``: per state, per queue);
    ``windows`` (``Worker(retention=...)``) overrides the every-queue window of the states it
    names."""
    deleted = await _retention.prune_async(conn, schema, defaults=windows, batch=batch,
                                           max_batches=max_batches)
    await batches.prune_expired(conn, schema, batch)
    return deleted


class Retention(Chore):
    name = "retention"

    def every(self) -> float:
        return 60.0

    async def once(self) -> None:
        await self.db.run(lambda c: retention(c, self.config.schema, self.config.retention))
