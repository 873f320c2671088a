"""The drain coordinator: what the worker does between "stop claiming" and exit.

Drain (SIGTERM, or :meth:`Worker.drain`)
    Claiming stops at once (a claim already sent completes and its jobs run like the others)
    and the worker row turns ``draining`` with its deadline. In-flight jobs get
    ``drain_timeout`` seconds to finish; a second signal skips that wait. Then the rest are told
    to stop (reason ``interrupted``; async handlers cancelled) and given ``drain_grace``
    seconds. Each is released: ``retryable``, run again at once, error entry ``interrupted``,
    and the attempt refunded (a drain is not the job's fault). A sync handler still running
    after the grace is abandoned with the process; its job is released the same way but held
    back for ``release_hold`` seconds, so no other worker starts it while the abandoned thread
    could still be alive. A handler that returns normally after being told to stop has
    completed. The final writes (outcomes, deregistering, resigning leadership) share a deadline
    of ``final_timeout`` seconds: if the database does not answer, the worker exits anyway and
    the jobs it could not release are rescued when their leases expire.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

from forklift._base.words import plural
from forklift._db.session import Session
from forklift._jobs.lifecycle import Lifecycle, job_fields
from forklift._worker import claim as claims
from forklift._worker import registry
from forklift._worker.execute import stopped, with_log
from forklift._worker.util import bounded, wait_any

#: Most seconds from the final writes' deadline to the end of Worker.run(): recording the exit
#: and resigning (at least 0.5 s each), closing sessions (1 s), cancelling loops (1.5 s).
TEARDOWN_BOUND = 4.0

if TYPE_CHECKING:
    from forklift._worker.attempts import Attempts
    from forklift._worker.completer import Completer
    from forklift._worker.config import WorkerConfig
    from forklift._worker.maintenance.elector import Elector
    from forklift._worker.producer import Producer
    from forklift._worker.state import WorkerState

log = logging.getLogger("forklift.worker")


class DrainCoordinator:
    def __init__(self, config: WorkerConfig, state: WorkerState, *, attempts: Attempts,
                 producer: Producer, completer: Completer, claim_db: Session, beat_db: Session,
                 elector: Elector | None, lifecycle: Lifecycle) -> None:
        self.config = config
        self.state = state
        self.attempts = attempts
        self.producer = producer
        self.completer = completer
        self.claim_db = claim_db
        self.beat_db = beat_db
        self.elector = elector  # resigns at the end, when this worker may lead
        self.lifecycle = lifecycle

    def _landed(self, ok: bool) -> None:
        if not ok:
            self.state.unsettled = True

    async def release_waiting(self) -> None:
        """Give back every buffered job at once, so other workers can take it."""
        waiting = self.producer.take_waiting()
        if not waiting:
            return
        self._landed(await bounded(
            f"releasing {plural(len(waiting), 'claimed job')} that had not started", self.claim_db,
            lambda c: claims.release(c, self.config.schema, waiting), min(2.0, self.config.final_timeout),
        ))

    async def run(self, completer_task: asyncio.Task[None]) -> None:
        running = self.attempts.running
        if self.lifecycle.on_drain:
            self.lifecycle.draining()
        await self.release_waiting()
        log.info("draining: %s in flight, cutoff in %.1fs", plural(len(running), "job"),
                 self.config.drain_timeout)
        await bounded(
            "marking the worker draining", self.beat_db,
            lambda c: registry.draining(c, self.config.schema, self.state.id, self.config.drain_timeout),
            min(2.0, self.config.final_timeout),
        )
        if running and not self.state.skip_wait.is_set():
            await wait_any(self.state.idle, self.state.skip_wait, timeout=self.config.drain_timeout)
        if running:
            log.info("drain cutoff: interrupting %s", plural(len(running), "job"))
            for rec in list(running.values()):
                self.attempts.interrupt(rec, "interrupted")
            if running:
                await wait_any(self.state.idle, timeout=self.config.drain_grace)
        for rec in list(running.values()):
            # A sync handler that ignored the signal still holds a thread, which dies with the
            # process: release its job, held back until that thread is surely gone.
            if rec.lost:
                continue
            outcome = stopped(rec.job, rec.ctx, rec.kind, abandoned=True)
            rec.released = True
            if outcome is not None:
                log.warning("job %s: handler ignored the drain; abandoning it", rec.job.id,
                            extra=job_fields(rec.job))
                if outcome.next in ("retryable", "scheduled"):
                    # Nobody may start it while this process (and the handler) may be alive:
                    # at most final_timeout + TEARDOWN_BOUND from here (run_worker exits then).
                    outcome.delay = max(outcome.delay, self.config.release_hold,
                                        self.config.final_timeout + TEARDOWN_BOUND + 1.0)
                outcome.job = rec.job
                with_log(outcome, rec.ctx, rec.job)
                self.completer.outcomes.append(outcome)
        deadline = time.monotonic() + self.config.final_timeout
        await self.completer.stop(completer_task, deadline)
        self._landed(await self.completer.flush(deadline=deadline))
        # Even past the deadline each of these gets a moment: on a healthy server it is plenty.
        how = "lease_lost" if self.state.stats.lease_lost else "drained"
        self.state.exited = True  # the heartbeater stops touching the row
        self._landed(await bounded(
            "recording the exit", self.beat_db,
            lambda c: registry.exited(c, self.config.schema, self.state.id, how),
            max(0.5, deadline - time.monotonic()),
        ))
        if self.elector is not None:
            await self.elector.resign(max(0.5, deadline - time.monotonic()))
