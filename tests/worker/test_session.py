"""A worker's session bounds every operation in time, in both of its ways of running one: in
the caller's task (the hot path's sessions) and in a task of its own (the others)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import psycopg
import pytest

from forklift._db.session import GRACE, Session


async def _sleep(conn: psycopg.AsyncConnection[Any], seconds: float = 30.0) -> None:
    await conn.execute("SELECT pg_sleep(%s)", (seconds,))


async def _one(conn: psycopg.AsyncConnection[Any]) -> int:
    cur = await conn.execute("SELECT 1")
    row = await cur.fetchone()
    return int(row[0]) if row else 0


async def _sleeping(conn: psycopg.AsyncConnection[Any]) -> bool:
    cur = await conn.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
        " AND state = 'active' AND query LIKE 'SELECT pg_sleep%%'")
    row = await cur.fetchone()
    return bool(row and row[0])


@pytest.mark.parametrize("inline", [True, False], ids=["inline", "in-task"])
def test_a_statement_past_its_deadline_fails_at_once_and_the_session_recovers(
    dsn: str, inline: bool
) -> None:
    async def scenario() -> tuple[float, str, int]:
        session = Session(dsn, "test", "w", timeout=10.0, inline=inline)
        try:
            await session.run(_one)  # connected: what is timed below is the statement alone
            began = time.monotonic()
            with pytest.raises(TimeoutError) as raised:
                await session.run(_sleep, timeout=0.3)
            took = time.monotonic() - began
            return took, str(raised.value), await session.run(_one)  # a fresh connection
        finally:
            await session.close()

    took, message, after = asyncio.run(scenario())
    assert "test did not answer within 0.3s" in message
    assert took < 0.3 + GRACE  # the socket was shut: no wait for the 30 s sleep
    assert after == 1


def test_closing_an_inline_session_fails_the_operation_in_flight(dsn: str) -> None:
    async def scenario() -> BaseException | None:
        session = Session(dsn, "test", "w", timeout=10.0, inline=True)
        running = asyncio.ensure_future(session.run(_sleep))
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as watcher:
            deadline = time.monotonic() + 10.0
            while not await _sleeping(watcher):  # until the statement is on the server
                assert time.monotonic() < deadline, "the statement never reached the server"
                await asyncio.sleep(0.01)
        await asyncio.wait_for(session.close(timeout=GRACE), GRACE + 1.0)
        done, _ = await asyncio.wait({running}, timeout=GRACE)
        assert done, "close() left the operation running"
        return running.exception()

    failure = asyncio.run(scenario())
    assert isinstance(failure, psycopg.OperationalError | OSError), repr(failure)
