"""One claim round of the producer: the plain claim and the flow claim, which goes first, and
the hand-off of keyed slots that comes back with a batch of outcomes.

A worker of plain queues only sends the plain claim (forklift._worker.claim); of flow queues
only, the flow claim (forklift._features.flow.claim). A worker of both sends the plain claim and then
the flow claim for what it left, except that the flow claim goes first every other round while
it finds work, and once a poll interval otherwise: a backlog in one kind of queue never keeps
the other from being claimed, and an idle flow queue costs the plain ones a claim a second.
A mixin of :class:`forklift._worker.producer.Producer`, which holds the state it reads.
"""

from __future__ import annotations

import functools
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from forklift._db.session import DB_ERRORS
from forklift._worker import claim as claims
from forklift._worker.util import why

if TYPE_CHECKING:
    from forklift._app.app import Forklift
    from forklift._db.session import Session
    from forklift._features.flow.claim import FlowAnswer, FlowClaim
    from forklift._features.flow.handoff import Handoff
    from forklift._jobs.lifecycle import Lifecycle
    from forklift._worker import settle
    from forklift._worker.attempts import Attempts
    from forklift._worker.config import WorkerConfig
    from forklift._worker.state import WorkerState

log = logging.getLogger("forklift.worker")



@dataclass
class Waiting:
    """A claimed job in the local buffer: its lease is held, its handler not yet started."""

    job: claims.Claimed
    lease_deadline: float

class ClaimRound:
    # The producer's state this mixin reads and writes (set in Producer.__init__).
    config: WorkerConfig
    state: WorkerState
    app: Forklift
    attempts: Attempts
    lifecycle: Lifecycle
    claim_db: Session
    flow: FlowClaim
    statement: claims.ClaimStatement
    waiting: dict[int, Waiting]
    paused: set[str]
    _limited: bool
    _retry_in: float | None
    _flow_strict: bool
    _flow_at: float
    _flow_busy: bool
    _flow_turn: bool
    _flow_cap: int
    _flow_more: bool
    _flushes: int
    _awaiting: int | None
    _awaiting_until: float
    _claiming: bool
    _claims_sent: int
    _extra: int

    if TYPE_CHECKING:
        def _hold(self, job: claims.Claimed, lease_deadline: float) -> None: ...
        def fill(self) -> None: ...
        def _kinds_changed(self) -> None: ...

    async def _claim_once(self, n: int) -> list[claims.Claimed]:
        """One claim. A drain does not wait long for a claim the server is not answering:
        it arms :meth:`_abort_stuck_claim` (no task or waiter per claim: pickup latency)."""
        self._claims_sent += 1
        self._claiming = True
        try:
            return await self.claim_db.run(functools.partial(self._claim, n=n))
        finally:
            self._claiming = False

    def _abort_stuck_claim(self, sent: int) -> None:
        if self._claiming and self._claims_sent == sent:
            # Jobs this claim may have taken are rescued when their leases expire.
            self.claim_db.abort()

    async def _claim(self, conn: Any, *, n: int) -> list[claims.Claimed]:
        if len(self.app.kinds) != len(self.state.kinds):
            self._kinds_changed()
        # The first jobs in claim order go to the free slots at once (the buffer is empty when
        # slots are free: fill() ran first); the claim records their start.
        start = max(0, self.config.concurrency - len(self.attempts.running) - len(self.waiting))
        plain = set(self.flow.queues) != set(self.config.queues)  # some queue of ours is not a flow queue
        # The plain claim, then the flow claim for what it left; but the flow claim goes first
        # when it is due (_flow_due): a plain backlog that fills every batch would otherwise
        # keep our flow queues from ever being claimed.
        order = ("flow", "plain") if self.flow.queues and (
            not plain or self._flow_due()) else ("plain", "flow")
        got: list[claims.Claimed] = []
        paused: set[str] = set()
        self._awaiting = None
        flowed: FlowAnswer | None = None
        self._flow_more = False
        for which in order:
            left, at = n - len(got), max(0, start - len(got))
            if left <= 0:
                break
            if which == "plain" and plain:
                jobs, more_paused = await self._plain(conn, left, at)
            elif which == "flow" and self.flow.queues:  # the plain claim may have flagged one
                flowed = await self._flow(conn, left, at)
                jobs, more_paused = flowed.jobs, flowed.paused
            else:
                continue
            got += jobs
            paused |= more_paused
        if flowed is not None and len(got) < n and not self._flow_more \
                and flowed.retry_in is None:
            # Outcomes not yet written still count against their keys' limits: look again
            # once the completer has flushed them (awaits_flush).
            self._awaiting = self._flushes
            self._awaiting_until = time.monotonic() + self.config.poll_interval
        self.paused = paused
        return got

    async def _plain(self, conn: Any, n: int, start: int) -> tuple[list[claims.Claimed], set[str]]:
        """The claim of our queues with no flow control: one statement while none of them has
        a limit, the locked claim once one has."""
        answer = await self.statement.run(conn, self.config.schema, n=n, locked=self._limited, start=start)
        got = answer.jobs
        if answer.limited and not self._limited and len(got) < n:
            # The lock-free claim skipped a limited queue: take its share now, under the locks.
            more = await self.statement.run(conn, self.config.schema, n=n - len(got), locked=True,
                                            start=max(0, start - len(got)))
            got += more.jobs
            answer.limited = more.limited
            answer.flow |= more.flow
        self._limited = answer.limited
        # A queue is flagged for good (forklift._features.flow.claim): from now on the flow claim.
        self.flow.queues = sorted(set(self.flow.queues) | answer.flow)
        return got, answer.paused

    def _flow_due(self) -> bool:
        """Whether the flow claim goes first this round, for a worker of plain and flow queues:
        every other round while it finds work (or a strict queue's job waits for a free slot),
        else once a poll interval or when it said a blocked job may go, so an idle flow queue
        costs the plain queues a claim a second, not one a round."""
        if self._flow_busy:
            self._flow_turn = not self._flow_turn
            return self._flow_turn
        since = time.monotonic() - self._flow_at
        return since >= self.config.poll_interval or (
            self._retry_in is not None and since >= self._retry_in)

    async def _flow(self, conn: Any, n: int, start: int) -> FlowAnswer:
        self._flow_at = time.monotonic()
        # Slow start: the flow claim's cost grows with what it asks for (the partitions it
        # walks, the heads it reads), and per-key limits cap what it can find: ask for at most
        # twice what the last one found (at least the slots), doubling while claims come back
        # full. Without it a buffer sized by the recent rate asks for hundreds of jobs again
        # and again where a handful of keys have room.
        ask = min(n, self._flow_cap)
        flowed = await self.flow.run(conn, self.config.schema, n=ask, start=min(start, ask))
        found = len(flowed.jobs)
        self._flow_more = found >= ask and ask < n  # full at its cap: claim again at once
        self._flow_cap = 2 * ask if found >= ask else max(self.config.concurrency, 2 * found)
        self._retry_in = flowed.retry_in
        self._flow_strict = flowed.strict
        self._flow_busy = bool(flowed.jobs) or flowed.strict
        return flowed

    def handoff_for(self, batch: list[settle.Outcome]) -> Handoff | None:
        """The hand-off to ask for with this batch of outcomes (forklift._features.flow.handoff): when
        some are of our flow queues' jobs and the slots and buffer have room; else None."""
        if not self.flow.queues or self.state.stop_claiming.is_set():
            return None
        flow = self.flow.queues
        if not any(o.job is not None and o.job.queue in flow for o in batch):
            return None
        budget = self.config.concurrency + self._extra - len(self.attempts.running) - len(self.waiting)
        if budget <= 0:
            return None
        from forklift._features.flow.handoff import Handoff

        return Handoff(self.state.id, self.config.lease, self.state.kinds, budget)

    async def handed(self, jobs: list[claims.Claimed], sent: float) -> None:
        """Jobs the hand-off claimed with a batch of outcomes: into the buffer, like a
        claim's; given back at once if a drain began while the statement was in flight."""
        if self.state.stop_claiming.is_set():
            pairs = [(j.id, j.fence) for j in jobs]
            try:
                await self.claim_db.run(lambda c: claims.release(c, self.config.schema, pairs))
            except DB_ERRORS as exc:
                log.warning("giving back handed-off jobs failed (%s)", why(exc))
            return
        if self.lifecycle.on_claim:
            self.lifecycle.claimed(len(jobs))
        for job in jobs:
            self._hold(job, sent + self.config.lease)
        self.fill()
