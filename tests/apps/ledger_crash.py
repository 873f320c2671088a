"""A posting kind whose book holds its transaction open until the test opens a gate, so a
worker can be killed with lines written and not yet committed.

The gate is a row in ``public.ledger_gate``; the book polls for it on the posting's own
connection, inside the posting's transaction (each poll a fresh read-committed snapshot).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import psycopg

from forklift import Forklift
from forklift.ledger import Posting, TableBook, ledger

app = Forklift()

GATE_SQL = "SELECT count(*) FROM public.ledger_gate"
SETUP_SQL = "CREATE TABLE IF NOT EXISTS public.ledger_gate (opened boolean)"


@dataclass(frozen=True)
class GatedBook(TableBook):
    def write(self, conn: psycopg.Connection[Any], posting: Posting, *, tenant: str | None,
              job_id: int | None) -> bool:
        written = super().write(conn, posting, tenant=tenant, job_id=job_id)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            row = conn.execute(GATE_SQL).fetchone()
            if row and row[0]:
                return written
            time.sleep(0.02)
        raise TimeoutError("the gate was never opened")


book = GatedBook.named("public.ledger_lines")
postings = ledger(app, name="crash.post", book=book)


@contextlib.contextmanager
def bound(dsn: str) -> Iterator[Forklift]:
    app.use(dsn)
    try:
        yield app
    finally:
        app.close()
