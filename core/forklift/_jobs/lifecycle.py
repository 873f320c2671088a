"""An attempt's lifecycle as a worker tells it, and the registry its observers join.

A worker emits these events; logs, hooks, tracing and metrics observe them. Neither side knows
the other: an observer registers a function with :func:`observe` (when its module is imported),
and each worker, as it starts, calls every registered function once with its
:class:`Lifecycle`. The function appends callables to the points it needs, and only to those,
so a worker nobody observes pays one truthiness test per point and allocates nothing: the
events are the worker's own records, seen through the protocols below.

The points:

- ``on_start(attempt)``: an attempt's handler is about to run. An observer may set
  ``attempt.context`` (a :class:`contextvars.Context`) for the attempt's task to run in.
- ``on_settle(attempt, outcome)``: the attempt has its outcome, queued for writing (a write the
  fence refuses, its lease lost meanwhile, still fired it).
- ``on_lease_lost(attempt)``: the attempt's lease is gone; nothing will be written for it.
- ``on_claim(n)``: one claim took ``n`` jobs.
- ``on_flush(written, refused)``: one outcome statement wrote a batch; ``refused`` of them
  were refused by the fence.
- ``on_drain()``: the worker stopped claiming and drains (once, as the drain begins).
- ``on_rescued(jobs)``: as leader, the worker's rescue ended these attempts (their lease
  expired where they ran).
- ``on_expired(jobs)``: as leader, the worker's sweep ended these waiting jobs past their
  start-by deadline (dead, ``expired``; no attempt ran). Expired jobs a worker claimed are
  settled like any attempt (``on_settle`` with the code ``expired``).
- ``on_aged(queue, n)``: as leader, the worker's priority aging raised the priority of ``n``
  waiting jobs of ``queue`` (each by one step or more).
- ``leader_tasks``: statements an observer wants run periodically while the worker leads
  (each on a session of its own, like the leader's other chores).
"""

from __future__ import annotations

import contextvars
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = [
    "Attempt",
    "AttemptJob",
    "LeaderTask",
    "Lifecycle",
    "Observer",
    "Rescued",
    "Settled",
    "WorkerFacts",
    "attach",
    "forget",
    "job_fields",
    "observe",
]


class AttemptJob(Protocol):
    """The claimed job an attempt runs."""

    @property
    def id(self) -> int: ...
    @property
    def kind(self) -> str: ...
    @property
    def queue(self) -> str: ...
    @property
    def attempt(self) -> int: ...
    @property
    def fence(self) -> int: ...
    @property
    def traceparent(self) -> str | None: ...
    @property
    def lag(self) -> float | None: ...
    @property
    def tenant(self) -> str | None: ...
    @property
    def enqueued_by(self) -> str | None: ...


class Attempt(Protocol):
    """One attempt in a worker's slot."""

    @property
    def job(self) -> AttemptJob: ...

    #: The context the attempt's task runs in (None: a copy of the worker's).
    context: contextvars.Context | None


class Settled(Protocol):
    """What became of an attempt: ``next`` is completed, retryable, scheduled, dead or
    cancelled; ``code`` the failure's code; ``error`` the scrubbed error entry."""

    @property
    def next(self) -> str: ...
    @property
    def code(self) -> str | None: ...
    @property
    def error(self) -> dict[str, Any] | None: ...


class Rescued(Protocol):
    """A job the leader ended (its rescue, an attempt whose lease expired; its sweep, a job
    past its start-by deadline): the job's new state and the error entry."""

    @property
    def id(self) -> int: ...
    @property
    def state(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def queue(self) -> str: ...
    @property
    def attempt(self) -> int: ...
    @property
    def error(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class WorkerFacts:
    """What an observer may know of the worker it observes."""

    id: str
    #: The app whose kinds the worker runs (an observer keeps per-app state by it).
    app: object
    schema: str
    concurrency: int
    prefetch_max: int
    lead: bool
    #: The worker's running counts (claimed, completed, failed, stale_writes, lease_lost,
    #: rescued, staged), read when wanted: they cost nothing per job to observe.
    stats: Any
    #: fence -> attempt, for every attempt running now (a live view).
    running: Mapping[int, object]


@dataclass(frozen=True)
class LeaderTask:
    """A statement run every ``every`` seconds while the worker leads; ``once`` is given the
    task's connection."""

    name: str
    every: float
    once: Callable[[Any], Awaitable[None]]


class Lifecycle:
    """The lifecycle points of one worker, with whatever its observers appended."""

    def __init__(self, worker: WorkerFacts) -> None:
        self.worker = worker
        self.on_start: list[Callable[[Attempt], None]] = []
        self.on_settle: list[Callable[[Attempt, Settled], None]] = []
        self.on_lease_lost: list[Callable[[Attempt], None]] = []
        self.on_claim: list[Callable[[int], None]] = []
        self.on_flush: list[Callable[[int, int], None]] = []
        self.on_drain: list[Callable[[], None]] = []
        self.on_rescued: list[Callable[[Sequence[Rescued]], None]] = []
        self.on_expired: list[Callable[[Sequence[Rescued]], None]] = []
        self.on_aged: list[Callable[[str, int], None]] = []
        self.leader_tasks: list[LeaderTask] = []

    # The emitters: a caller on a hot path tests the list first, and calls only when it holds
    # something (no call, no allocation otherwise).
    def started(self, attempt: Attempt) -> None:
        for fn in self.on_start:
            fn(attempt)

    def settled(self, attempt: Attempt, outcome: Settled) -> None:
        for fn in self.on_settle:
            fn(attempt, outcome)

    def lease_lost(self, attempt: Attempt) -> None:
        for fn in self.on_lease_lost:
            fn(attempt)

    def claimed(self, n: int) -> None:
        for fn in self.on_claim:
            fn(n)

    def flushed(self, written: int, refused: int) -> None:
        for fn in self.on_flush:
            fn(written, refused)

    def draining(self) -> None:
        for fn in self.on_drain:
            fn()

    def rescued(self, jobs: Sequence[Rescued]) -> None:
        for fn in self.on_rescued:
            fn(jobs)

    def expired(self, jobs: Sequence[Rescued]) -> None:
        for fn in self.on_expired:
            fn(jobs)

    def aged(self, queue: str, n: int) -> None:
        for fn in self.on_aged:
            fn(queue, n)


Observer = Callable[[Lifecycle], None]

_OBSERVERS: list[Observer] = []


def observe(observer: Observer) -> Observer:
    """Have ``observer`` called with the lifecycle of every worker started from now on (in
    this process); registering it twice registers it once."""
    if observer not in _OBSERVERS:
        _OBSERVERS.append(observer)
    return observer


def forget(observer: Observer) -> None:
    """Stop attaching ``observer`` to workers that start from now on."""
    if observer in _OBSERVERS:
        _OBSERVERS.remove(observer)


def attach(lifecycle: Lifecycle) -> None:
    """Called once by a starting worker, before its services, in the context they are created
    from: every observer registers what it needs."""
    for observer in tuple(_OBSERVERS):
        observer(lifecycle)


def job_fields(job: AttemptJob) -> dict[str, Any]:
    """The ``extra=`` of a log line about a claimed job (never its payload)."""
    fields = {"job_id": job.id, "kind": job.kind, "queue": job.queue, "attempt": job.attempt,
              "fence": job.fence}
    if job.tenant is not None:
        fields["tenant"] = job.tenant
    if job.enqueued_by is not None:
        fields["enqueued_by"] = job.enqueued_by
    return fields
