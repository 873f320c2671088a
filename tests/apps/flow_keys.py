"""The keys tests' app (tests/core/test_keys.py, test_rates.py, test_fair_share.py), run in-process
or as worker subprocesses.

Handlers write an external ledger, ``public.key_ledger``: one row per run with the job's key
values, its start (``clock_timestamp()`` at the handler's start) and end. The tests check the
ledger, not forklift's own rows, for overlaps beyond a limit and starts beyond a rate.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg

from apps.thread_sql import ThreadSql
from forklift import Forklift, JobContext, Key, Rate

app = Forklift()

SETUP_SQL = """
CREATE TABLE IF NOT EXISTS public.gates (name text PRIMARY KEY);
CREATE TABLE IF NOT EXISTS public.key_ledger (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id bigint NOT NULL, worker text NOT NULL, tenant text, account text,
    started_at timestamptz NOT NULL DEFAULT clock_timestamp(), ended_at timestamptz);
"""


def setup(conn: psycopg.Connection[Any]) -> None:
    conn.execute(SETUP_SQL)


# Handlers run statements on connections of their own, one per thread.
sql = ThreadSql(app, "flow-keys-app")


@dataclass
class Work:
    tenant: str
    account: str = "a"
    work: float = 0.0  # seconds the handler holds its slot
    gate: str = ""  # hold the slot until the test opens this gate


def _run(ctx: JobContext, w: Work) -> None:
    row = sql("INSERT INTO public.key_ledger (job_id, worker, tenant, account)"
              " VALUES (%s, %s, %s, %s) RETURNING id", (ctx.job_id, ctx.worker_id, w.tenant,
                                                         w.account))[0][0]
    if w.work:
        sql("SELECT pg_sleep(%s)", (w.work,))
    while w.gate and not sql("SELECT 1 FROM public.gates WHERE name = %s", (w.gate,)):
        sql("SELECT pg_sleep(0.02)")
    sql("UPDATE public.key_ledger SET ended_at = clock_timestamp() WHERE id = %s", (row,))


@app.job(name="flow.keys.sync", queue="keyed", concurrency=[
    Key(lambda p: p.tenant, limit=2, name="tenant"),
    Key(lambda p: p.account, limit=1, name="account"),
])
def keyed(ctx: JobContext, w: Work) -> None:
    _run(ctx, w)


@app.job(name="flow.keys.tenant", queue="keyed",
         concurrency=[Key(lambda p: p.tenant, limit=1, name="solo")])
def solo(ctx: JobContext, w: Work) -> None:
    _run(ctx, w)


@app.job(name="flow.keys.fair", queue="fair", concurrency=[Key(lambda p: p.tenant, name="t")])
def fair(ctx: JobContext, w: Work) -> None:
    _run(ctx, w)


@app.job(name="flow.keys.tenanted", queue="fair", tenant=lambda p: p.tenant or None)
def tenanted(ctx: JobContext, w: Work) -> None:
    """No key: in a fair queue its jobs take turns by their tenant (none when it is empty)."""
    _run(ctx, w)


@app.job(name="flow.keys.tenant_keyed", queue="fair", tenant="tenant",
         concurrency=[Key(lambda p: p.account, name="acct")])
def tenant_keyed(ctx: JobContext, w: Work) -> None:
    """A tenant and a key: its jobs take turns by the key, its first."""
    _run(ctx, w)


@app.job(name="flow.keys.plain", queue="keyed")
def plain(ctx: JobContext, w: Work) -> None:
    _run(ctx, w)


@app.job(name="flow.keys.rated", queue="rated", rate=Rate(20, per=1, burst=5))
def rated(ctx: JobContext, w: Work) -> None:
    _run(ctx, w)


@app.job(name="flow.keys.vendor", queue="rated",
         concurrency=[Key(lambda p: p.tenant, rate=Rate(10, per=1, burst=2), name="vendor")])
def vendor(ctx: JobContext, w: Work) -> None:
    _run(ctx, w)


@app.job(name="flow.keys.loose", queue="keyed",
         concurrency=[Key(lambda p: p["tenant"], limit=1, name="loose")])
def loose(ctx: JobContext, args: dict[str, Any]) -> None:
    """Keyed on a field a dict payload may lack, or hold as a number: refused at enqueue."""


def claim_once(dsn: str, fc: Any, n: int, start: int | None = None) -> Any:
    """One pass of a flow claim (forklift._features.flow.claim.FlowClaim) for up to ``n`` jobs, the
    first ``start`` (default all) to start now and the others for a worker's buffer, on a
    connection of its own; what it claimed."""
    import asyncio

    async def go() -> Any:
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as c:
            return await fc.run(c, "forklift", n=n, start=start)

    return asyncio.run(go())


def count_flow_claims(monkeypatch: Any) -> list[int]:
    """Record the size asked of every flow claim from now on (a pytest monkeypatch undoes it)."""
    from forklift._features.flow.claim import FlowClaim

    asked: list[int] = []
    real = FlowClaim.run

    async def counted(self: FlowClaim, *args: Any, **kw: Any) -> Any:
        asked.append(kw["n"])
        return await real(self, *args, **kw)

    monkeypatch.setattr(FlowClaim, "run", counted)
    return asked
