"""A worker process killed with SIGKILL while its postings' transactions are open: nothing of
them was committed, the jobs are rescued after their lease, and another worker posts each of
them once; the book balances."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import psycopg
from apps import ledger_crash
from apps.faults import Procs, registered
from helpers import wait_until

from forklift.ledger import TableBook

IN_GATE = ("SELECT count(*) FROM pg_stat_activity WHERE query = %s AND xact_start IS NOT NULL"
           " AND pid <> pg_backend_pid()")


def posting(i: int) -> dict[str, Any]:
    return {"key": f"order-{i}", "entries": [
        {"account": "cash", "amount": {"minor": 100 + i, "currency": "EUR"}},
        {"account": "fees", "amount": {"minor": 3, "currency": "EUR"}},
        {"account": "sales", "amount": {"minor": -(103 + i), "currency": "EUR"}},
    ]}


def test_a_worker_killed_mid_posting_loses_nothing_and_posts_each_key_once(
        dsn: str, conn: psycopg.Connection[Any], tmp_path: Path) -> None:
    TableBook.named("public.ledger_lines").create(conn)
    conn.execute(ledger_crash.SETUP_SQL)
    with ledger_crash.bound(dsn):
        ids = [ledger_crash.postings.enqueue(posting(i)).id for i in range(12)]
    procs = Procs(dsn, tmp_path)
    try:
        first = procs.start(app="apps.ledger_crash:app", concurrency=4, lease=2.0)
        registered(conn, first)
        wait_until(lambda: conn.execute(IN_GATE, (ledger_crash.GATE_SQL,)).fetchone() == (4,),
                   timeout=30, message="four postings hold their transactions open")
        assert conn.execute("SELECT count(*) FROM public.ledger_lines").fetchone() == (0,)
        first.signal(signal.SIGKILL)
        wait_until(first.exited, timeout=10, message="the worker died")
        conn.execute("INSERT INTO public.ledger_gate VALUES (true)")
        procs.start(app="apps.ledger_crash:app", concurrency=4, lease=2.0)
        wait_until(lambda: conn.execute(
            "SELECT count(*) FROM forklift.jobs WHERE id = ANY(%s) AND state = 'completed'",
            (ids,)).fetchone() == (12,), timeout=90, message=procs.logs)
    finally:
        procs.close()
    rescued = conn.execute(
        "SELECT count(*) FROM forklift.jobs WHERE id = ANY(%s) AND attempt = 2"
        " AND errors->0->>'code' = 'lease_expired'", (ids,)).fetchone()
    assert rescued == (4,)
    assert conn.execute(
        "SELECT count(*) FROM forklift.jobs WHERE id = ANY(%s)"
        " AND (result->>'written')::boolean", (ids,)).fetchone() == (12,)
    assert conn.execute(
        "SELECT posting_key, count(*) FROM public.ledger_lines GROUP BY 1 HAVING count(*) <> 3"
    ).fetchall() == []
    check = TableBook.named("public.ledger_lines").check(conn)
    assert check.balanced and check.currencies[0].postings == 12
