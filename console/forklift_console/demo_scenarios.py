"""What ``forklift demo --scenario NAME`` plays: each scenario is a set of traffic streams
(:mod:`forklift_console.demo_traffic`) and the on-call tasks it lets a person rehearse."""

from __future__ import annotations

from dataclasses import dataclass

#: The streams a scenario may switch on (demo_traffic knows how to play each).
STREAMS = ("mix", "long", "batches", "flow", "workflows", "backfill", "horizon")


@dataclass(frozen=True)
class Scenario:
    name: str
    #: What a person sees once it runs, in one line.
    promise: str
    streams: tuple[str, ...]
    #: The on-call tasks (docs/how-to/console.md) it is made for.
    tasks: tuple[str, ...]


#: The twelve on-call tasks the demo rehearses (the console guide's table, in this order).
TASKS = (
    "what is failing",
    "why is a job not running",
    "requeue a dead group",
    "pause and resume",
    "watch a drain",
    "batch progress and cancel",
    "backfill pace and rate",
    "keys at limit and change a rate",
    "a parked workflow job and what wakes it",
    "database health including the xmin holder",
    "read-only",
    "small and wide terminals without colour",
)

SCENARIOS: dict[str, Scenario] = {s.name: s for s in (
    Scenario("all", "every stream below at once (the horizon is pinned on demand: p on Health)",
             ("mix", "long", "batches", "flow", "workflows", "backfill"), TASKS),
    Scenario("failing", "a steady mix in which demo.failing and demo.flaky keep failing:"
             " dead-letter groups grow", ("mix",),
             ("what is failing", "requeue a dead group", "pause and resume")),
    Scenario("drain", "long exports on every worker: drain one and watch its cutoff",
             ("mix", "long"), ("watch a drain", "why is a job not running")),
    Scenario("batches", "books of chapters two at a time: batches that last minutes",
             ("batches",), ("batch progress and cancel",)),
    Scenario("flow", "tenant acme at its limit of 2 on key demo.tenant; queue vendor held to"
             " 1 job a second", ("flow",),
             ("keys at limit and change a rate", "why is a job not running")),
    Scenario("workflows", "orders waiting for their payment event, then sleeping; summaries"
             " held until their extract and load complete", ("workflows",),
             ("a parked workflow job and what wakes it", "why is a job not running")),
    Scenario("backfill", "the reindex backfill, held back by its rate of 2 pages a second",
             ("backfill",), ("backfill pace and rate",)),
    Scenario("horizon", "a transaction pins the xmin horizon from the start (p on Health"
             " releases it)", ("mix", "horizon"),
             ("database health including the xmin holder",)),
)}
