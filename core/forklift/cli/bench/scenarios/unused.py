"""Bench scenario ``unused``: what features a job does not use cost it.

The same no-op jobs (``bench.noop``, on a queue with no limits) run end to end through one
worker process twice over, in one run: a worker of the bench's plain app, and a worker of an
app that also declares kinds using steps, sleep, events, keys (concurrency and rate limits), a
start-by deadline, captured logs, a batch handler, backpressure (a kind that sheds when its
queue is full), a versioned payload, a weight and an outbox sink, which the measured jobs use
none of.
Target: the second within 5% of the first (ratio >= 0.95). The runs alternate (:data:`ORDER`),
each featured run is compared with the plain run beside it in time, and the figure is the
median of those four ratios, so a load that changes during the run weighs on both sides of each
ratio alike.

The keyed and rate-limited kinds sit on a queue of their own, which the featured worker serves
too: a queue holding a kind with keys or a rate is claimed by the flow claim, all its jobs
alike (docs/how-to/flow-control.md), so the measured queue is the one with no limits. The
weighted kind has a queue of its own too (a queue turns weighted only once a weighted job is
enqueued on it, and none is here).
"""

from __future__ import annotations

import logging
import os
import statistics
import sys
from datetime import timedelta
from typing import Any

from forklift import BatchContext, Forklift, JobContext, Key, Rate, Shed
from forklift.cli.bench.measure import Bench, Run
from forklift.cli.bench.procs import Payload
from forklift.cli.bench.registry import scenario
from forklift.cli.bench.report import Figure, Target
from forklift.cli.bench.runs import forklift_run
from forklift.cli.bench.server import SCHEMA

MODULE = "forklift.cli.bench.scenarios.unused"


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


@app.job(name="bench.unused.logged", expires=timedelta(hours=1), capture_logs=True)
async def logged(ctx: JobContext, payload: Payload) -> None:
    ctx.log("ran", n=payload["n"])


@app.batch_job(name="bench.unused.batched", max=100, wait=0.05)
async def batched(ctx: BatchContext, payloads: list[Payload]) -> list[None]:
    return [None] * len(payloads)


@app.job(name="bench.unused.shedding", queue="limited", on_full=Shed(at_or_below=5))
async def shedding(ctx: JobContext, payload: Payload) -> None:
    return None


def _payload_v1_to_v2(old: dict[str, Any]) -> dict[str, Any]:
    return old


@app.job(name="bench.unused.versioned", version=2, upcasters={1: _payload_v1_to_v2})
async def versioned(ctx: JobContext, payload: Payload) -> None:
    return None


@app.job(name="bench.unused.weighted", queue="weighted", weight=4)
async def weighted(ctx: JobContext, payload: Payload) -> None:
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
# the other, and runs 0-1, 2-3, 4-5 and 6-7 each pair one run of each side. Runs of one side in
# one bench run differ by 6 to 36% on this shared machine, more than the 5% the figure must
# resolve, and the machine's speed drifts within a run: each side's best of four (how the figure
# was once taken) picked whichever side ran in the fastest moment (one plain run at 31,685
# jobs/s, its other three at 22,790-26,819; read 0.87 while its pairs read 0.86-1.20).
ORDER = ("plain", "featured", "featured", "plain", "featured", "plain", "plain", "featured")


def _pair_ratios(runs: list[tuple[str, Run]]) -> list[float]:
    """featured / plain for each pair of neighbouring runs (ORDER pairs them)."""
    out = []
    for a, b in zip(runs[::2], runs[1::2], strict=True):
        by = dict((a, b))
        out.append(by["featured"].rate / by["plain"].rate if by["plain"].rate else 0.0)
    return out


@scenario("unused", figures=("e2e_unused",), order=210)
def unused(bench: Bench) -> list[Figure]:
    n = bench.sizes.e2e_jobs
    runs: list[tuple[str, Run]] = []
    for i, side in enumerate(ORDER):
        if side == "plain":
            runs.append((side, forklift_run(bench, 1, n, f"u_plain{i}")))
        else:
            runs.append((side, forklift_run(bench, 1, n, f"u_feat{i}", module=MODULE)))
    featured = [r.rate for side, r in runs if side == "featured"]
    plain = [r.rate for side, r in runs if side == "plain"]
    pairs = _pair_ratios(runs)
    detail: dict[str, Any] = {
        "jobs": n,
        "featured_rates": [round(r, 1) for r in featured],
        "plain_rates": [round(r, 1) for r in plain],
        "pair_ratios": [round(r, 3) for r in pairs],
        "note": "the median of four ratios, each featured run over the plain run beside it"
                " (rates shown: each side's median); the featured app declares kinds using"
                " steps, sleep, events, keys, a rate, a batch handler, a weight and an outbox"
                " sink, unused by the jobs",
    }
    return [Figure("e2e_unused", "end-to-end no-op, app with unused features", "jobs/s",
                   statistics.median(featured), statistics.median(plain), "plain app",
                   ratio=statistics.median(pairs), rule=Target("ratio>=", 0.95),
                   detail=detail)]
