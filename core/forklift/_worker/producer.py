"""The producer: claims jobs for free slots in one statement, and keeps a short local buffer.

The local buffer
    When jobs finish quickly, a claim takes more than the free slots: about ``prefetch_horizon``
    seconds of work at the recent completion rate, at most ``prefetch_max`` jobs. Buffered jobs
    are claimed (their leases held and renewed like running ones) and start, most urgent first,
    the moment a slot frees, with no round trip. Slow jobs get no buffer: at one job a second,
    50 ms of work is no job at all. A buffered job whose lease is lost is dropped; one whose
    cancel is requested is settled ``cancelled`` without running; a drain gives every buffered
    job back at once (``available``, attempt refunded, no error entry) so other workers can take
    it.

One claim round
    A worker of plain queues only sends the plain claim (forklift._worker.claim); of flow
    queues only, the flow claim (forklift._features.flow.claim). A worker of both sends the
    plain claim and then the flow claim for what it left, except that the flow claim goes first
    every other round while it finds work, and once a poll interval otherwise: a backlog in one
    kind of queue never keeps the other from being claimed, and an idle flow queue costs the
    plain ones a claim a second.

Weighted jobs
    A job of weight N takes N slots (``state.busy`` counts them). When the flow claim says a
    heavy job waits for more slots than are free (``need``), the worker keeps them for it: it
    claims nothing, plain or flow, until that many are free (or a poll interval passed: the job
    may have gone to another worker), then claims with the flow claim first. In the buffer, a
    weighted job first in line waits for its slots and nothing behind it starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import heapq
import itertools
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from forklift._base.scrub import error_entry
from forklift._base.words import plural
from forklift._db.session import DB_ERRORS, Session
from forklift._jobs.lifecycle import Lifecycle, job_fields
from forklift._worker import claim as claims
from forklift._worker import settle
from forklift._worker.config import PREFETCH_HORIZON, PREFETCH_MAX
from forklift._worker.idle import IdleMark
from forklift._worker.util import wait_any, why

if TYPE_CHECKING:
    from forklift._app.app import Forklift
    from forklift._features.flow.claim import FlowAnswer
    from forklift._features.flow.handoff import Handoff
    from forklift._worker.attempts import Attempts
    from forklift._worker.config import WorkerConfig
    from forklift._worker.state import WorkerState

log = logging.getLogger("forklift.worker")

__all__ = ["CLAIM_GRACE", "FLUSH_MAX", "PREFETCH_HORIZON", "PREFETCH_MAX", "Producer"]

CLAIM_GRACE = 2.0  # how long a drain waits for a claim already sent
# Most finished jobs whose outcome is not yet written before the worker stops claiming: a flush
# that falls behind (a slow or stalled server) holds the claims back instead of piling up work,
# leases and memory. Also the most outcomes in one settle statement.
FLUSH_MAX = 1000


@dataclass
class Waiting:
    """A claimed job in the local buffer: its lease is held, its handler not yet started."""

    job: claims.Claimed
    lease_deadline: float


@dataclass
class CompletionRate:
    """The worker's recent completion rate (jobs a second), read at each claim decision.

    Measured over windows of at least ``WINDOW`` seconds; a faster rate is taken at once and a
    slower one halves the gap. Completions inside a window not yet closed count too, as a floor
    (their number over a whole window): a burst of instant jobs that all end within one window
    of a reading, the worker then idle, otherwise left the rate at zero until the next reading,
    so the next claim kept no buffer (seen as a flake in the buffer tests, once the worker got
    fast enough to finish 30 warm-up jobs inside 50 ms).
    """

    WINDOW = 0.05

    rate: float = 0.0
    at: float = 0.0
    done: int = 0

    def observe(self, now: float, done: int) -> float:
        elapsed, new = now - self.at, done - self.done
        if elapsed >= self.WINDOW:
            seen = new / elapsed
            self.rate = seen if seen > self.rate else 0.5 * (self.rate + seen)
            self.at, self.done = now, done
        elif new / self.WINDOW > self.rate:
            self.rate = new / self.WINDOW
        return self.rate


class Outcomes(Protocol):
    """The completer, as the producer settles a buffered job an operator cancelled."""

    def add(self, outcome: settle.Outcome) -> None: ...


class Producer:
    name = "producer"

    def __init__(self, config: WorkerConfig, state: WorkerState, *, app: Forklift,
                 attempts: Attempts, lifecycle: Lifecycle, claim_db: Session) -> None:
        self.config = config
        self.state = state
        self.app = app
        self.attempts = attempts
        self.lifecycle = lifecycle
        self.claim_db = claim_db
        self.completer: Outcomes | None = None  # connect()
        # The local buffer: fence -> entry, and a heap in start order (claim order, but a flow
        # queue's job first within a priority: _hold). An entry dropped from the dict stays in
        # the heap and is skipped when it surfaces.
        self.waiting: dict[int, Waiting] = {}
        self._heap: list[tuple[tuple[Any, ...], int, Waiting]] = []
        self._seq = itertools.count()
        self.paused: set[str] = set()  # our queues the last claim found paused
        self._give_back: list[Waiting] = []
        self.wake = asyncio.Event()
        self.slot_free = asyncio.Event()
        self._limited = False  # whether one of our queues has a concurrency limit (claim path)
        # Our queues with keys, rates or fair share: claimed by the flow claim.
        from forklift._features.flow import claim as flow

        self.flow = flow.FlowClaim(state.id, config.lease, cap=config.concurrency,
                                   kinds=state.kinds)
        # A weighted job the flow claim found waiting for more slots than are free: the
        # worker claims nothing more until that many are free, or until the time here passes
        # (monotonic; then it claims again, to see whether the job still waits).
        self._need: int | None = None
        self._need_until = 0.0
        self._retry_in: float | None = None  # when the flow claim said a waiting job may go
        self._flow_strict = False  # the flow claim met a fair, rated or limited queue or key
        self._flow_secs = 0.0  # recent duration of a claim round that ran the flow claim
        self._flow_at = 0.0  # when the flow claim last ran (monotonic)
        self._flow_busy = False  # it found jobs, or a strict queue's job waiting for a slot
        self._flow_turn = False  # while busy: whether it went first in the last round
        self._flushes = 0  # batches of outcomes written (flushed())
        self._flow_cap = config.concurrency  # most jobs the next flow claim asks for (_flow)
        self._flow_more = False  # the last flow claim came back full at that cap
        # The flush count when a flow claim came back short with nothing to retry for: until
        # the next flush (or a wake-up, or the poll) a claim would find the same keys held.
        self._awaiting: int | None = None
        self._awaiting_until = 0.0
        self._claiming = False  # a claim is in flight
        self._claims_sent = 0
        self._extra = 0  # buffer target of the last claim decision
        self.completions = CompletionRate()
        self.idle = IdleMark(config.schema, state.id, list(config.queues))
        # A worker claims only the kinds it has handlers for. Clauses a later feature adds
        # (per-key limits, rate limits, fair share...) go in this tuple too.
        self.statement = claims.ClaimStatement(
            (claims.kinds_clause(state.kinds),),
            worker_id=state.id, queues=list(config.queues), lease=config.lease,
        )

    def connect(self, *, completer: Outcomes) -> None:
        """The completer, built after the producer (it calls the producer in turn)."""
        self.completer = completer

    # -- signals ------------------------------------------------------------------------------
    def on_wake(self, queue: str) -> None:
        if queue in self.config.queues:
            self.wake.set()

    def stop(self) -> None:
        """Claiming stops (drain): wake the loop whichever event it waits on."""
        self.wake.set()
        self.slot_free.set()
        loop = self.state.loop
        if self._claiming and loop is not None:
            loop.call_later(CLAIM_GRACE, self._abort_stuck_claim, self._claims_sent)

    # -- the loop -----------------------------------------------------------------------------
    async def run(self) -> None:
        backoff = 0.05
        while not self.state.stop_claiming.is_set():
            if self._give_back:
                await self.give_back_paused()
            self.fill()
            n = self._claim_size()
            if n <= 0:
                self.slot_free.clear()
                left = self._need_until - time.monotonic() if self._need else 0.0
                if left > 0:
                    await wait_any(self.slot_free, timeout=left)
                else:
                    await self.slot_free.wait()
                continue
            if self.awaits_flush():
                # Not at every slot that frees: our own outcomes still hold their keys until
                # they are written, which the completer now does at once.
                self.slot_free.clear()
                await wait_any(self.wake, self.slot_free,
                                 timeout=max(0.0, self._awaiting_until - time.monotonic()))
                continue
            if self.wake.is_set():
                self.idle.woken()  # a wake-up may have consumed the idle mark: write it again
                self.wake.clear()
            self.slot_free.clear()
            sent = time.monotonic()  # the lease runs from the claim's transaction, not its reply
            try:
                got = await self._claim_once(n)
            except DB_ERRORS as exc:
                log.warning("claim failed (%s); retrying in %.2fs", why(exc), backoff)
                await until(self.wake, backoff)
                backoff = min(backoff * 2, 5.0)
                continue
            backoff = 0.05
            if self.flow.queues:
                took = time.monotonic() - sent
                self._flow_secs = took if took > self._flow_secs else (
                    0.8 * self._flow_secs + 0.2 * took)
            if self.lifecycle.on_claim:
                self.lifecycle.claimed(len(got))
            for job in got:
                self._hold(job, sent + self.config.lease)
            if self.paused and (self.waiting or self._give_back):
                await self.give_back_paused()
            self.fill()
            if got and (len(got) == n or self._flow_more):
                continue  # there may be more: claim again when the buffer runs low
            if self.wake.is_set():
                continue  # woken while claiming: claim again at once
            retry, self._retry_in = self._retry_in, None
            if got:
                # The attempts this claim started run first: the idle mark's statement would
                # otherwise go out ahead of their handlers (a third of a millisecond of pickup).
                await asyncio.sleep(0)
            pause = await self._mark_idle()
            if retry is not None and pause > 0:
                pause = min(retry, pause)  # the flow claim said when a blocked job may go
            if pause <= 0:
                self._awaiting = None  # the claim the idle mark's barrier asks for
                continue
            if self.flow.queues:
                # A key's slot frees when one of our jobs is settled: a flush wakes us too
                # (slot_free was cleared before the claim, so a flush during it counts).
                await wait_any(self.wake, self.slot_free, timeout=pause)
            else:
                await until(self.wake, pause)

    async def _mark_idle(self) -> float:
        """Before waiting, leave the idle mark producers look for (forklift._worker.idle):
        how long to wait now (0: claim once more at once)."""
        if self.idle.marked or not self.state.listening:
            return self.config.poll_interval  # marked already, or not listening: nobody to NOTIFY
        try:
            held = await self.claim_db.run(self.idle.mark)
        except DB_ERRORS as exc:
            log.warning("idle mark failed (%s); polling", why(exc))
            return self.config.poll_interval
        return self.idle.pause(held, self.config.poll_interval)

    def _claim_size(self) -> int:
        """How many jobs to claim now (0: wait for a slot or for the buffer to run low)."""
        rate = self.completions.observe(time.monotonic(), self.state.done)
        # Limited queues get no buffer: a buffered job would hold a slot of the queue's limit
        # while other workers sit idle. Nor do fair or rated flow queues (forklift._features.flow.claim);
        # jobs held back by per-key limits do: the limit counts claimed jobs, buffered or not.
        # A flow claim is a heavier statement than the plain one: a flow queue's buffer covers
        # at least two of its round trips, or the worker runs dry while the next is in flight
        # (and the smaller claims that follow keep the measured rate, and the buffer, small).
        horizon = self.config.prefetch_horizon
        if self.flow.queues:
            horizon = max(horizon, 2 * self._flow_secs)
        self._extra = 0 if self._limited or self._flow_strict else min(
            self.config.prefetch_max, int(rate * horizon))
        waiting = len(self.waiting)
        if len(self.state.held) - len(self.attempts.running) - waiting >= FLUSH_MAX:
            return 0  # a flush wakes the claimer when it has caught up
        running = self.state.busy  # slots taken (a weighted job takes several)
        free = self.config.concurrency - running
        if self._need is not None and free < self._need \
                and time.monotonic() < self._need_until:
            return 0  # kept for a heavy job: nothing lighter takes these slots
        if (free > 0 and not waiting) or (self._extra and waiting <= self._extra // 2):
            return self.config.concurrency + self._extra - running - waiting
        return 0

    def _hold(self, job: claims.Claimed, lease_deadline: float) -> None:
        entry = Waiting(job, lease_deadline)
        self.waiting[job.fence] = entry
        self.state.held[job.fence] = job.id
        # Within a priority a flow queue's job starts first: a keyed one holds its values'
        # slots from its claim on, fleet-wide, and one that waited in claim order (run_at)
        # behind a plain backlog older than it sat there while the plain claims kept putting
        # older jobs before it (measured: 15 jobs of a key at limit 1 took the 12 s of a
        # 20,000-job backlog beside them, about one a second, instead of 0.2 s).
        flow = 0 if job.queue in self.flow.queues else 1
        heapq.heappush(self._heap, ((job.priority, flow, job.run_at, job.id), next(self._seq),
                                    entry))

    def fill(self) -> None:
        """Start buffered jobs in free slots, most urgent first; never while draining. A
        weighted job first in line waits for its slots, and nothing behind it takes them."""
        if self.state.stop_claiming.is_set():
            return
        heap = self._heap
        state, concurrency = self.state, self.config.concurrency
        while heap and state.busy < concurrency:
            entry = heap[0][2]
            if self.waiting.get(entry.job.fence) is not entry:
                heapq.heappop(heap)
                continue  # dropped while it waited
            weight = entry.job.weight
            if weight is not None and state.busy + min(weight, concurrency) > concurrency:
                break
            heapq.heappop(heap)
            del self.waiting[entry.job.fence]
            if entry.job.queue in self.paused:
                self._give_back.append(entry)  # the loop gives it back before its next claim
                self.state.held.pop(entry.job.fence, None)
                self.slot_free.set()
                continue
            if time.monotonic() >= entry.lease_deadline:
                # No heartbeat has renewed it in time: another worker may hold it by now.
                self.state.held.pop(entry.job.fence, None)
                self.state.stats.lease_lost += 1
                log.warning("job %s (fence %s): its lease ran out while it waited to start;"
                            " not starting it", entry.job.id, entry.job.fence,
                            extra=job_fields(entry.job))
                continue
            self.attempts.start(entry.job, entry.lease_deadline)

    def flushed(self, freed: bool = True) -> None:
        """The completer wrote a batch of outcomes: the keys they held are free; claim again.
        ``freed`` False: every slot the batch held passed to a next job (the hand-off), so a
        claimer waiting for keys to free keeps waiting."""
        if freed:
            self._flushes += 1
        self.slot_free.set()

    def awaits_flush(self) -> bool:
        """Whether the claimer waits for our outcomes to be written before it claims again
        (the completer then writes them without gathering more): the last flow claim came back
        short with nothing to retry for, and since then no flush landed, no wake-up came and
        no poll interval passed, while jobs of ours are in flight (a flush is coming)."""
        if self._awaiting is None:
            return False
        if (self._awaiting != self._flushes or self.wake.is_set()
                or time.monotonic() >= self._awaiting_until
                or len(self.state.held) <= len(self.waiting)):
            self._awaiting = None
            return False
        return True

    def nudge(self) -> None:
        """Wake the claimer when a slot freed or the buffer ran low."""
        if (not self.waiting and self.state.busy < self.config.concurrency) or (
            self._extra and len(self.waiting) <= self._extra // 2
        ):
            self.slot_free.set()

    def _kinds_changed(self) -> None:
        """A kind declared after the worker started (same process): claim it from now on, and
        register it with the next heartbeat."""
        self.state.kinds = sorted(self.app.kinds)
        self.statement.params["kinds"] = self.state.kinds
        self.flow.kinds = self.state.kinds
        self.state.reregister = True
        log.info("worker %s now also claims %s", self.state.id, ", ".join(self.state.kinds))

    async def give_back_paused(self) -> None:
        """A pause holds for buffered jobs too: give back those of queues the claim found
        paused (available, attempt refunded), so they start when the pause ends, anywhere."""
        back = [e for e in self.waiting.values() if e.job.queue in self.paused]
        for e in back:
            del self.waiting[e.job.fence]
            self.state.held.pop(e.job.fence, None)
        back += self._give_back
        self._give_back = []
        if not back:
            return
        pairs = [(e.job.id, e.job.fence) for e in back]
        queues = sorted({e.job.queue for e in back})
        log.info("giving back %s of paused %s %s", plural(len(pairs), "buffered job"),
                 "queue" if len(queues) == 1 else "queues", ", ".join(queues))
        try:
            await self.claim_db.run(lambda c: claims.release(c, self.config.schema, pairs))
        except DB_ERRORS as exc:
            # Their leases are no longer renewed: they are rescued when they expire.
            log.warning("giving back buffered jobs failed (%s)", why(exc))

    # -- buffered jobs the heartbeat or an operator changed ------------------------------------
    def drop(self, entry: Waiting, reason: str) -> None:
        """A buffered job's lease is gone: forget it without writing anything."""
        if self.waiting.pop(entry.job.fence, None) is None:
            return
        self.state.held.pop(entry.job.fence, None)
        self.state.stats.lease_lost += 1
        log.warning("job %s (fence %s): lease lost before it started, %s; not starting it",
                    entry.job.id, entry.job.fence, reason, extra=job_fields(entry.job))

    def cancel(self, entry: Waiting) -> None:
        """An operator cancelled a buffered job: settle it cancelled, without running it."""
        if self.waiting.pop(entry.job.fence, None) is None:
            return
        err = error_entry(
            None, code="cancelled", attempt=entry.job.attempt, worker_id=self.state.id,
            message="cancelled by an operator before it started",
        )
        assert self.completer is not None
        self.completer.add(settle.Outcome(
            entry.job.id, entry.job.fence, "cancelled", refund=1, error=err, code="cancelled",
            job=entry.job,
        ))

    def cancel_job(self, job_id: int) -> None:
        for entry in list(self.waiting.values()):
            if entry.job.id == job_id:
                self.cancel(entry)

    def take_waiting(self) -> list[tuple[int, int]]:
        """Empty the buffer (drain): the (id, fence) of every buffered job, leases let go."""
        waiting = [(e.job.id, e.job.fence) for e in [*self.waiting.values(), *self._give_back]]
        self.waiting.clear()
        self._give_back = []
        self._heap.clear()
        for _, fence in waiting:
            # Released or not, these leases are no longer renewed: if the release fails they
            # expire and the jobs are rescued.
            self.state.held.pop(fence, None)
        return waiting

    # -- one claim round: the plain claim and the flow claim, which goes first, and the
    # hand-off of keyed slots that comes back with a batch of outcomes ------------------------
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
        start = max(0, self.config.concurrency - self.state.busy - len(self.waiting))
        plain = set(self.flow.queues) != set(self.config.queues)  # some queue of ours is not a flow queue
        # The plain claim, then the flow claim for what it left; but the flow claim goes first
        # when it is due (_flow_due): a plain backlog that fills every batch would otherwise
        # keep our flow queues from ever being claimed.
        order = ("flow", "plain") if self.flow.queues and (
            not plain or self._need is not None or self._flow_due()) else ("plain", "flow")
        got: list[claims.Claimed] = []
        paused: set[str] = set()
        self._awaiting = None
        flowed: FlowAnswer | None = None
        self._flow_more = False
        for which in order:
            left, at = n - len(got), max(0, start - len(got))
            if left <= 0:
                break
            if which == "plain" and plain and self._need is None:
                # (while a weighted job waits for slots, plain jobs do not take them)
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
        self._need = flowed.need
        if flowed.need is not None:
            self._need_until = time.monotonic() + self.config.poll_interval
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
        budget = self.config.concurrency + self._extra - self.state.busy - len(self.waiting)
        if budget <= 0 or self._need is not None:
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


async def until(event: asyncio.Event, timeout: float) -> None:
    """Wait for ``event`` or ``timeout`` seconds, whichever comes first (no waiter task)."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(timeout):
            await event.wait()
