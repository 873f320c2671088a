"""The weighted jobs tests' app (tests/worker/test_weighted_claims.py), run in-process or as worker
subprocesses.

Handlers write an external ledger, ``public.weight_ledger``: one row per run with the job's
weight, the worker, its start and end (``clock_timestamp()``). The tests read the ledger, not
forklift's own rows, for the slots in use at any instant and for who started before whom.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg

from apps.thread_sql import ThreadSql
from forklift import Forklift, JobContext, Key, Rate

app = Forklift()

SETUP_SQL = """
CREATE TABLE IF NOT EXISTS public.weight_ledger (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id bigint NOT NULL, worker text NOT NULL, weight int NOT NULL, tenant text,
    started_at timestamptz NOT NULL DEFAULT clock_timestamp(), ended_at timestamptz);
"""


def setup(conn: psycopg.Connection[Any]) -> None:
    conn.execute(SETUP_SQL)


# Handlers run statements on connections of their own, one per thread.
sql = ThreadSql(app, "weights-app")


@dataclass
class Load:
    tenant: str = "t"
    work: float = 0.0  # seconds the handler holds its slots


def _run(ctx: JobContext, load: Load) -> None:
    weight = sql("SELECT coalesce(weight, 1) FROM forklift.jobs WHERE id = %s", (ctx.job_id,))
    row = sql("INSERT INTO public.weight_ledger (job_id, worker, weight, tenant)"
              " VALUES (%s, %s, %s, %s) RETURNING id",
              (ctx.job_id, ctx.worker_id, weight[0][0], load.tenant))[0][0]
    if load.work:
        sql("SELECT pg_sleep(%s)", (load.work,))
    sql("UPDATE public.weight_ledger SET ended_at = clock_timestamp() WHERE id = %s", (row,))


@app.job(name="weights.heavy", queue="weighted", weight=3)
def heavy(ctx: JobContext, load: Load) -> None:
    _run(ctx, load)


@app.job(name="weights.light", queue="weighted")
def light(ctx: JobContext, load: Load) -> None:
    _run(ctx, load)


@app.job(name="weights.plain", queue="plain")
def plain(ctx: JobContext, load: Load) -> None:
    _run(ctx, load)


_TENANT = Key(lambda p: p.tenant, limit=3, name="weights.tenant")


@app.job(name="weights.keyed", queue="wkeyed", weight=2, concurrency=[_TENANT])
def keyed(ctx: JobContext, load: Load) -> None:
    _run(ctx, load)


@app.job(name="weights.keyed_light", queue="wkeyed", concurrency=[_TENANT])
def keyed_light(ctx: JobContext, load: Load) -> None:
    _run(ctx, load)


@app.job(name="weights.rated", queue="wrated", weight=3, rate=Rate(1, per=10, burst=4))
def rated(ctx: JobContext, load: Load) -> None:
    _run(ctx, load)
