"""The batch tests' app: one kind whose handler writes a ledger, one that fails, callbacks.

Handlers talk to the test through tables beside forklift's (made by :func:`setup`):
``batch_ledger`` (one row per attempt start and end, with how many targets of the batch were
running at that moment, from ``batch_gauge``) and ``batch_gates`` (a handler told to hold waits
until the test opens its gate). They use their own connections, never forklift's.

Run in-process (``apps.basic.running_worker``) or as ``forklift worker --app apps.batches:app``.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any, NotRequired

import psycopg
from typing_extensions import TypedDict  # pydantic needs it for TypedDict on Python < 3.12

from forklift import Backoff, Fail, Forklift, JobContext
from forklift._features.batches import BatchLimits, BatchSummary

app = Forklift()

SETUP_SQL = """
CREATE TABLE IF NOT EXISTS public.batch_gates (name text PRIMARY KEY);
CREATE TABLE IF NOT EXISTS public.batch_gauge (
    batch_id bigint PRIMARY KEY, running integer NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS public.batch_ledger (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    batch_id bigint, idx integer, job_id bigint NOT NULL, attempt integer NOT NULL,
    what text NOT NULL, running integer, detail jsonb,
    at timestamptz NOT NULL DEFAULT clock_timestamp());
"""

# One statement: the gauge moves and the ledger row records where it moved to, so two targets
# starting together cannot both read "1".
START_SQL = """
WITH g AS (
    INSERT INTO public.batch_gauge AS g (batch_id, running) VALUES (%(b)s, 1)
    ON CONFLICT (batch_id) DO UPDATE SET running = g.running + 1
    RETURNING running
)
INSERT INTO public.batch_ledger (batch_id, idx, job_id, attempt, what, running)
SELECT %(b)s, %(i)s, %(j)s, %(a)s, 'start', running FROM g
"""
END_SQL = """
WITH g AS (
    UPDATE public.batch_gauge SET running = running - 1 WHERE batch_id = %(b)s RETURNING running
)
INSERT INTO public.batch_ledger (batch_id, idx, job_id, attempt, what, running)
SELECT %(b)s, %(i)s, %(j)s, %(a)s, %(what)s, running FROM g
"""


def setup(conn: psycopg.Connection[Any]) -> None:
    conn.execute(SETUP_SQL)


@contextlib.contextmanager
def bound(dsn: str, conn: psycopg.Connection[Any], limits: BatchLimits | None = None
          ) -> Iterator[Forklift]:
    """The app on a test's database (side tables made), with ``limits``; reset afterwards."""
    setup(conn)
    app.use(dsn)
    app.batch_limits = limits or BatchLimits()
    try:
        yield app
    finally:
        app.batch_limits = BatchLimits()
        app.close()


_local = threading.local()


def sql(query: str, params: Any = None) -> list[tuple[Any, ...]]:
    conn: psycopg.Connection[Any] | None = getattr(_local, "conn", None)
    if conn is None or conn.closed or conn.broken or getattr(_local, "dsn", None) != app.dsn:
        conn = psycopg.connect(app.dsn, autocommit=True, application_name="batches-app",
                               prepare_threshold=None)  # -m pgbouncer: through PgBouncer
        _local.conn, _local.dsn = conn, app.dsn
    cur = conn.execute(query, params)
    return cur.fetchall() if cur.description else []


class Target(TypedDict):
    n: int
    #: Raise on every attempt up to this one (a retryable error), then succeed.
    flaky: NotRequired[int]
    #: Fail for good (Fail('boom')): dead at once.
    fail: NotRequired[bool]
    #: Fail for good unless this gate is open (so a retry can succeed).
    fail_unless: NotRequired[str]
    #: Hold until this gate opens (on attempts up to ``hold_attempts``).
    hold: NotRequired[str]
    hold_attempts: NotRequired[int]
    #: Seconds to spend in the handler, so that overlapping targets would be seen overlapping.
    work: NotRequired[float]


def gate_is_open(name: str) -> bool:
    return bool(sql("SELECT 1 FROM public.batch_gates WHERE name = %s", (name,)))


def _where(ctx: JobContext) -> dict[str, Any]:
    return {"b": ctx.meta.get("batch_id"), "i": ctx.meta.get("batch_index"), "j": ctx.job_id,
            "a": ctx.attempt}


@app.job(name="batch.step", max_attempts=3, retry=Backoff("fixed", base=0.05, jitter="none"),
         failure_codes=["boom"])
def step(ctx: JobContext, t: Target) -> dict[str, int]:
    where = _where(ctx)
    sql(START_SQL, where)
    outcome = "error"
    try:
        gate = t.get("hold")
        if gate and ctx.attempt <= t.get("hold_attempts", 1_000):
            deadline = time.monotonic() + 120
            while not gate_is_open(gate):
                if ctx.cancelled.wait(0.02) or time.monotonic() > deadline:
                    break
        if t.get("work"):
            time.sleep(t["work"])  # the work itself, not synchronisation
        if t.get("fail"):
            raise Fail("boom", f"target {t['n']} fails for good")
        if t.get("fail_unless") and not gate_is_open(t["fail_unless"]):
            raise Fail("boom", f"target {t['n']} fails until gate {t['fail_unless']} opens")
        if ctx.attempt <= t.get("flaky", 0):
            raise ValueError(f"target {t['n']} flaked on attempt {ctx.attempt}")
        outcome = "end"
        return {"n": t["n"], "square": t["n"] * t["n"]}
    finally:
        sql(END_SQL, {**where, "what": outcome})


@app.job(name="batch.notify", max_attempts=1)
def notify(ctx: JobContext, summary: BatchSummary) -> None:
    """on_complete / on_success: records what it was told."""
    import json

    sql(
        "INSERT INTO public.batch_ledger (batch_id, job_id, attempt, what, detail)"
        " VALUES (%s, %s, %s, 'callback', %s::jsonb)",
        (summary["batch_id"], ctx.job_id, ctx.attempt,
         json.dumps({"summary": summary, "meta": ctx.meta})),
    )


class Note(TypedDict):
    text: str


@app.job(name="batch.note", max_attempts=1)
def note(ctx: JobContext, n: Note) -> None:
    """A callback with its own args: the summary arrives in ctx.meta['batch']."""
    import json

    sql(
        "INSERT INTO public.batch_ledger (batch_id, job_id, attempt, what, detail)"
        " VALUES (%s, %s, %s, 'note', %s::jsonb)",
        (ctx.meta["batch"]["batch_id"], ctx.job_id, ctx.attempt,
         json.dumps({"text": n["text"], "batch": ctx.meta["batch"]})),
    )


def open_gate(conn: psycopg.Connection[Any], name: str) -> None:
    conn.execute("INSERT INTO public.batch_gates VALUES (%s) ON CONFLICT DO NOTHING", (name,))


def ledger(conn: psycopg.Connection[Any], batch_id: int, what: str | None = None
           ) -> list[dict[str, Any]]:
    cur = conn.execute(
        "SELECT idx, job_id, attempt, what, running, detail, at FROM public.batch_ledger"
        " WHERE batch_id = %s AND (%s::text IS NULL OR what = %s) ORDER BY id",
        (batch_id, what, what),
    )
    assert cur.description is not None
    names = [d.name for d in cur.description]
    return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]


def batch_row(conn: psycopg.Connection[Any], batch_id: int) -> dict[str, Any]:
    cur = conn.execute("SELECT * FROM forklift.batches WHERE id = %s", (batch_id,))
    row = cur.fetchone()
    assert row is not None and cur.description is not None
    return {d.name: v for d, v in zip(cur.description, row, strict=True)}


def target_states(conn: psycopg.Connection[Any], batch_id: int) -> list[str]:
    """Each target's state in index order; ``waiting`` for a held one."""
    rows = conn.execute(
        "SELECT CASE WHEN state = 'scheduled' AND run_at = '9999-01-01 00:00:00+00'"
        " THEN 'waiting' ELSE state END FROM forklift.jobs WHERE batch_id = %s"
        " ORDER BY batch_index",
        (batch_id,),
    )
    return [str(r[0]) for r in rows]


def finished(conn: psycopg.Connection[Any], batch_id: int) -> str | None:
    """The batch's state once terminal, else None (for wait_until)."""
    state = str(batch_row(conn, batch_id)["state"])
    return None if state == "running" else state
