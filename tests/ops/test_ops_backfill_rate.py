"""Relative rate changes of a live backfill (the console's > and <): each one acts on the rate as
it is when the change lands, and the audit says from what to what."""

from __future__ import annotations

import itertools
import threading
from typing import Any

import psycopg
import pytest
from test_backfill_console import audit, rate_of, seed_running

from forklift.ops import Operator
from forklift.ops import backfills as ops
from forklift.ops.context import OpsContext

CTX = OpsContext(schema="forklift", actor="tester")


def test_each_change_doubles_what_is_there_and_the_audit_says_so(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    seed_running(conn, dsn)  # rate 4
    ops.scale_rate(conn, CTX, "reindex", 0.5)
    ops.scale_rate(conn, CTX, "reindex", 2.0)
    ops.scale_rate(conn, CTX, "reindex", 2.0)
    assert rate_of(conn) == ("running", 8.0)
    assert [o for *_, o in audit(conn)] == [
        "done: rate 4/s -> 2/s", "done: rate 2/s -> 4/s", "done: rate 4/s -> 8/s"]


def test_concurrent_changes_all_count(dsn: str, conn: psycopg.Connection[Any]) -> None:
    """Eight operators' presses at once, each on its own session: 4 * 2**8, capped at the
    maximum, and one audit row per press that changed something."""
    seed_running(conn, dsn)
    start = threading.Barrier(8)

    def press() -> None:
        with Operator(dsn, schema="forklift", actor="tester") as op:
            start.wait(timeout=20)
            op.scale_backfill_rate("reindex", 2.0)

    threads = [threading.Thread(target=press) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert rate_of(conn) == ("running", min(ops.bf.MAX_RATE, 4.0 * 2**8))
    outcomes = [o for *_, o in audit(conn)]
    assert len(outcomes) == 8
    changed = [o for o in outcomes if o.startswith("done")]
    assert all(o.startswith(("done: rate", "noop: rate already")) for o in outcomes)
    # The "from" of each change is the "to" of the one before it: none was computed from a
    # value another press had already changed.
    steps = [tuple(float(x.rstrip("/s")) for x in o.removeprefix("done: rate ").split(" -> "))
             for o in changed]
    assert all(a[1] == b[0] for a, b in itertools.pairwise(steps))


def test_limits_and_bad_factors(dsn: str, conn: psycopg.Connection[Any]) -> None:
    seed_running(conn, dsn)
    conn.execute("UPDATE forklift.backfill_runs SET rate = %s", (ops.bf.MAX_RATE,))
    ops.scale_rate(conn, CTX, "reindex", 2.0)
    assert rate_of(conn) == ("running", ops.bf.MAX_RATE)
    assert audit(conn)[-1][-1] == f"noop: rate already {ops.bf.MAX_RATE:g}/s"
    for bad in (0.0, -2.0, 1.0, float("nan"), float("inf")):
        with pytest.raises(ops.bf.InvalidRate) as refused:
            ops.scale_rate(conn, CTX, "reindex", bad)
        assert refused.value.code == "invalid_rate"
