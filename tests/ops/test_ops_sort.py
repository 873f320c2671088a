"""Operator.jobs sorted on the server by any allow-listed key: keyset pages, put end to end,
are exactly the whole matching set in that order, and the count agrees with them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from apps.ops import insert_job

from forklift.ops import JobFilter, Operator, Sort
from forklift.ops.errors import InvalidFilter
from forklift.ops.filters import Cursor

EXPR = {"changed_at": "coalesce(finished_at, attempted_at, created_at)"}


@pytest.fixture
def many(conn: psycopg.Connection[Any]) -> psycopg.Connection[Any]:
    now = datetime.now(UTC)
    states = ["available", "running", "retryable", "completed", "dead", "scheduled"]
    for i in range(130):
        state = states[i % len(states)]
        insert_job(conn, state=state, queue=["mail", "reports", "alpha"][i % 3],
                   kind=f"k{(i * 7) % 11:02d}", attempt=1 + i % 4 if state != "scheduled" else 0,
                   created_at=now - timedelta(seconds=1000 - i),
                   attempted_at=(now - timedelta(seconds=500 - i % 50))
                   if state not in ("available", "scheduled") else None,
                   finished_at=(now - timedelta(seconds=i % 17))
                   if state in ("completed", "dead") else None,
                   worker_id="w" if state == "running" else None)
    return conn


@pytest.mark.parametrize("key", ["state", "queue", "kind", "attempt", "changed_at", "id"])
@pytest.mark.parametrize("descending", [False, True], ids=["asc", "desc"])
def test_pages_in_a_server_sort_are_the_whole_set_in_order(
    dsn: str, many: psycopg.Connection[Any], key: str, descending: bool
) -> None:
    d = "DESC" if descending else "ASC"
    col = EXPR.get(key, key)
    order = f"{col} {d}, id {d}" if key != "id" else f"id {d}"
    expected = [r[0] for r in many.execute(
        f"SELECT id FROM forklift.jobs WHERE state <> 'scheduled' ORDER BY {order}")]
    flt = JobFilter.build(states="available,running,retryable,completed,dead")
    seen: list[int] = []
    with Operator(dsn) as op:
        page = op.jobs(flt, sort=Sort(key, descending), limit=25)
        assert page.count == len(expected)
        seen += [j.id for j in page.jobs]
        while page.next_cursor:
            page = op.jobs(flt, sort=Sort(key, descending), limit=25, cursor=page.next_cursor)
            assert page.count == len(expected)  # the count agrees with every page
            seen += [j.id for j in page.jobs]
    assert seen == expected
    assert page.sort == ("-" if descending else "") + key


def test_a_text_cursor_is_checked_like_any_other() -> None:
    s = Sort("queue", False)
    good = Cursor("queue", False, "mail", 7).encode()
    assert Cursor.decode(good, s).value == "mail"
    with pytest.raises(InvalidFilter):
        Cursor.decode(Cursor("queue", False, 12, 7).encode(), s)  # a queue is text
    with pytest.raises(InvalidFilter):
        Sort.parse("args")  # not allow-listed
