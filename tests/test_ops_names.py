"""Operator entry points that take a queue, kind, schedule or backfill name check it as enqueue
does (forklift._names.check_name): a name that hides characters, is blank at an end or is
empty is refused with InvalidName (invalid_name), and nothing is done."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from forklift import InvalidName
from forklift.ops import Operator

HIDDEN = ["mail\u200b", "mail ", " mail", "ma\x1bil", "", "mail\u202e"]

CALLS: dict[str, Callable[[Operator, str], Any]] = {
    "pause": lambda op, n: op.pause(n, create=True),
    "resume": lambda op, n: op.resume(n),
    "set_concurrency": lambda op, n: op.set_concurrency(n, 3),
    "explain_queue": lambda op, n: op.explain_queue(n),
    "dead_groups(queue)": lambda op, n: op.dead_groups(queue=n or " "),
    "dead_groups(kind)": lambda op, n: op.dead_groups(kind=n or " "),
    "set_retention(queue)": lambda op, n: op.set_retention("dead", "7d", queue=n or "\x00",
                                                             create=True),
    "schedule": lambda op, n: op.schedule(n),
    "pause_schedule": lambda op, n: op.pause_schedule(n),
    "backfill": lambda op, n: op.backfill(n),
    "pause_backfill": lambda op, n: op.pause_backfill(n),
}


@pytest.mark.parametrize("call", sorted(CALLS))
def test_a_name_that_hides_characters_is_refused_and_nothing_is_done(
    dsn: str, conn: psycopg.Connection[Any], call: str
) -> None:
    with Operator(dsn, actor="tester") as op:
        for name in HIDDEN:
            with pytest.raises(InvalidName) as info:
                CALLS[call](op, name)
            assert info.value.code == "invalid_name", name
    assert conn.execute("SELECT count(*) FROM forklift.queues").fetchone() == (0,)
    assert conn.execute("SELECT count(*) FROM forklift.audit").fetchone() == (0,)


def test_a_plain_name_still_works(dsn: str) -> None:
    with Operator(dsn, actor="tester") as op:
        assert op.pause("mail", create=True).paused
        assert not op.resume("mail").paused
        assert op.dead_groups(queue="mail", kind="mail.send").dead == 0
