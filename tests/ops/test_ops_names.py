"""Operator entry points that name something new check the name as enqueue does
(forklift._base.names.check_name): a queue set up by ``pause``/``limit``/``retention set`` with
``create``, and every schedule or backfill name (declared by the app through the same check).
A name that hides characters or is blank at an end is refused with InvalidName
(invalid_name), and nothing is done. A queue that exists is acted on whatever its name holds
(tests/cli/test_cli_display.py: the hostile queue, not its look-alike)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from forklift import InvalidName
from forklift.ops import Operator

HIDDEN = ["mail\u200b", "mail ", " mail", "ma\x1bil", "mail\u202e"]

CALLS: dict[str, Callable[[Operator, str], Any]] = {
    "pause(create)": lambda op, n: op.pause(n, create=True),
    "set_concurrency(create)": lambda op, n: op.set_concurrency(n, 3, create=True),
    "set_queue_rate(create)": lambda op, n: op.set_queue_rate(n, "10/s", create=True),
    "set_fair(create)": lambda op, n: op.set_fair(n, True, create=True),
    "set_retention(queue)": lambda op, n: op.set_retention("dead", "7d", queue=n, create=True),
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


def test_a_plain_name_still_works_and_an_existing_hostile_queue_is_acted_on(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    conn.execute("INSERT INTO forklift.queues (name) VALUES ('mail\u200b')")
    with Operator(dsn, actor="tester") as op:
        assert op.pause("mail", create=True).paused
        assert not op.resume("mail").paused
        assert op.pause("mail\u200b", create=True).paused  # it exists: acted on, not refused
        assert op.set_fair("mail\u200b", True).fair
        assert op.set_retention("dead", "7d", queue="mail\u200b").for_queue("mail\u200b")
