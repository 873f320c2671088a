"""Partitioned history upkeep, a leader chore (only where ``migrate --partitioned-history`` ran).

Each pass (forklift._features.history.upkeep): day partitions created ahead and dropped once their
state's longest retention window has passed, each in its own short transaction under a
``lock_timeout`` (a busy table makes the DDL give up until the next pass, never wait behind
readers while blocking writers); finished jobs moved from the jobs table in batches; then rows
of queues whose window is shorter than their state's longest deleted in keyset batches. Every
step is idempotent: a leader killed mid-pass leaves each job in exactly one table, and the next
leader finishes the work.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

import psycopg

from forklift._features import history, retention
from forklift._worker.maintenance.chore import Chore

log = logging.getLogger("forklift.worker")


async def _drive(conn: psycopg.AsyncConnection[Any], gen: Any) -> int:
    try:
        kind, text, params = next(gen)
        while True:
            if kind == "ddl":
                try:
                    async with conn.transaction():
                        await conn.execute(f"SET LOCAL lock_timeout = {history.LOCK_TIMEOUT_MS}")
                        await conn.execute(text)
                    answer: Any = True
                except psycopg.errors.LockNotAvailable:
                    log.info("history upkeep: %s waits for a busy table; next pass", text.strip())
                    answer = False
            elif kind == "count":
                answer = max((await conn.execute(text, params)).rowcount, 0)
            else:
                answer = await (await conn.execute(text, params)).fetchall()
            kind, text, params = gen.send(answer)
    except StopIteration as done:
        return int(done.value)


async def enabled(conn: psycopg.AsyncConnection[Any], schema: str) -> bool:
    cur = await conn.execute(history.EXISTS_SQL, (f"{schema}.jobs_history",))
    row = await cur.fetchone()
    return bool(row and row[0])


async def upkeep(
    conn: psycopg.AsyncConnection[Any], schema: str,
    overrides: dict[str, float] | None = None,
) -> int:
    """One pass where history is partitioned (else nothing); the jobs moved."""
    if not await enabled(conn, schema):
        return 0
    windows = await retention.load_async(conn, schema)
    for state, secs in (overrides or {}).items():
        windows[(state, retention.ALL_QUEUES)] = secs
    keep = history.keep_days(windows)
    today = datetime.now(UTC).date()
    moved = await _drive(conn, history.upkeep(schema, keep, today))
    # Queues whose window is shorter than their state's longest: those rows go one by one.
    short = [p for p in retention.passes(windows)
             if keep[p.state] is not None and p.seconds < (keep[p.state] or 0) * 86_400.0]
    if short:
        gen = retention.steps(schema, short, table="jobs_history")
        await retention.drive_async(conn, gen)
    return moved


class HistoryUpkeep(Chore):
    name = "history"
    partitioned = False

    def every(self) -> float:
        # Without partitioned history: a look once a minute, and no session kept open.
        return 10.0 if self.partitioned else 60.0

    async def once(self) -> None:
        self.partitioned = await self.db.run(lambda c: enabled(c, self.config.schema))
        if not self.partitioned:
            await self.db.reset()
            return
        await self.db.run(lambda c: upkeep(c, self.config.schema, self.config.retention))
