"""Bench scenario ``unused``: what features a job does not use cost it (issues 13 and 14).

The same no-op jobs (``bench.noop``, on a queue with no limits) run end to end through one
worker process twice over, in one run: a worker of the bench's plain app, and a worker of an
app that also declares kinds using steps, sleep, events, keys (concurrency and rate limits) and
an outbox sink, which the measured jobs use none of. Target: the second within 5% of the first
(ratio >= 0.95). The runs alternate (:data:`ORDER`) and each side keeps its best, so a load
that changes during the run weighs on both alike.

The keyed and rate-limited kinds sit on a queue of their own, which the featured worker serves
too: a queue holding a kind with keys or a rate is claimed by the flow claim, all its jobs
alike (README, "Flow control"), so the measured queue is the one with no limits.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

from forklift import Forklift, JobContext, Key, Rate
from forklift_console.bench.measure import Bench, Run
from forklift_console.bench.procs import Payload
from forklift_console.bench.registry import scenario
from forklift_console.bench.report import Figure, Target
from forklift_console.bench.runs import forklift_run
from forklift_console.bench.server import SCHEMA

MODULE = "forklift_console.bench.scenarios.unused"


# -- the featured app: the bench's no-op kind, and kinds using every durable and flow feature --
app = Forklift(schema=SCHEMA)


@app.job(name="bench.noop")
async def noop(ctx: JobContext, payload: Payload) -> None:
    return None


@app.job(name="bench.unused.durable")
async def durable(ctx: JobContext, payload: Payload) -> None:
    await ctx.step("one", lambda: payload["n"])
    await ctx.sleep("nap", 1.0)
    await ctx.wait_for_event("bench.unused", match={"n": payload["n"]}, timeout=60)


@app.job(name="bench.unused.keyed", queue="limited",
         concurrency=[Key(lambda p: str(p["n"] % 4), limit=2, name="shard")])
async def keyed(ctx: JobContext, payload: Payload) -> None:
    return None


@app.job(name="bench.unused.rated", queue="limited", rate=Rate(100, per=1))
async def rated(ctx: JobContext, payload: Payload) -> None:
    return None


@app.job(name="bench.unused.receive")
async def receive(ctx: JobContext, payload: Payload) -> None:
    return None


app.outbox.sink("bench.unused", receive)


def worker_main() -> None:
    """A worker of the featured app, with default settings (``bench.procs.worker_main``'s twin)."""
    from forklift import Worker, run_worker

    logging.basicConfig(level=logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    app.use(os.environ["FORKLIFT_DSN"])
    sys.exit(run_worker(Worker(app)))


# Two ABBA rounds, the second mirrored: each side runs first, last and in between as often as
# the other. Runs of one side in one bench run differ by 6 to 36% on this shared machine, more
# than the 5% the figure must resolve, so each side keeps its best of four.
ORDER = ("plain", "featured", "featured", "plain", "featured", "plain", "plain", "featured")


def _best(runs: list[Run]) -> Run:
    return max(runs, key=lambda r: r.rate)


@scenario("unused", figures=("e2e_unused",), order=210)
def unused(bench: Bench) -> list[Figure]:
    n = bench.sizes.e2e_jobs
    plain: list[Run] = []
    featured: list[Run] = []
    for i, side in enumerate(ORDER):
        if side == "plain":
            plain.append(forklift_run(bench, 1, n, f"u_plain{i}"))
        else:
            featured.append(forklift_run(bench, 1, n, f"u_feat{i}", module=MODULE))
    mine, ref = _best(featured), _best(plain)
    detail: dict[str, Any] = {
        "jobs": n,
        "featured_rates": [round(r.rate, 1) for r in featured],
        "plain_rates": [round(r.rate, 1) for r in plain],
        "note": "best of four alternating runs each; the featured app declares kinds using"
                " steps, sleep, events, keys, a rate and an outbox sink, unused by the jobs",
    }
    return [Figure("e2e_unused", "end-to-end no-op, app with unused features", "jobs/s",
                   mine.rate, ref.rate, "plain app", rule=Target("ratio>=", 0.95),
                   detail=detail)]
