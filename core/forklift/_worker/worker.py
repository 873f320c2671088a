"""The worker: N slots over a set of queues, everything batched, run as small services.

``Worker`` is the public face: it holds the configuration and the state the services share
(the leases it holds, the attempts in its slots), and :meth:`Worker.run` starts the services
under a :class:`~forklift._worker.supervisor.Supervisor`:

    producer        claims for free slots plus a short local buffer (producer.py, claim.py)
    completer       writes outcomes in batches (completer.py, settle.py)
    heartbeat       renews leases, writes progress, refreshes the worker row (heartbeater.py)
    lease-watchdog  stops attempts whose lease ran out unrenewed (heartbeater.py)
    listener        LISTEN for wake-ups and operator signals (listener.py)
    elector         leadership (maintenance/elector.py), and, while leading, one service per
                    chore: stage, rescue, cron, retention, prune-workers (maintenance/)

The drain coordinator (drain.py) runs when the producer stops. No transaction is held open
across a handler, and every database call has a client-side deadline
(:mod:`forklift._db.session`), so a server that stops answering stalls nothing for long.

Timeouts
    A kind's ``timeout`` sets ``ctx.cancelled`` (reason ``timeout``) and cancels an async
    handler; the attempt fails with code ``timeout``. A sync handler runs in a thread, and
    Python cannot stop a thread from outside: it is only *told*, through ``ctx``. Its slot stays
    taken, and its lease renewed, until the thread returns, so a sync handler that ignores its
    context keeps a slot busy for as long as it runs. Write long sync handlers to check
    ``ctx.is_cancelled()`` between units of work.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Iterable
from typing import Any

from forklift._app.app import Forklift
from forklift._base.version import VERSION
from forklift._db import pooler
from forklift._db.migrate import ensure_current, required_version
from forklift._db.session import Session
from forklift._jobs import lifecycle, log_capture
from forklift._worker import maintenance, registry
from forklift._worker.attempts import Attempts
from forklift._worker.completer import Completer
from forklift._worker.config import PREFETCH_HORIZON, PREFETCH_MAX, WorkerConfig
from forklift._worker.drain import DrainCoordinator
from forklift._worker.heartbeater import Heartbeater, LeaseWatchdog
from forklift._worker.keys import KeyDeclarations
from forklift._worker.listener import Listener
from forklift._worker.locks import WorkerLocks
from forklift._worker.maintenance.rescuer import LEASE_EXPIRIES
from forklift._worker.producer import CLAIM_GRACE, FLUSH_MAX, Producer
from forklift._worker.state import OP_TIMEOUT, WorkerState, WorkerStats
from forklift._worker.supervisor import SERVICES, Service, Supervisor
from forklift._worker.util import wait_any

__all__ = ["CLAIM_GRACE", "FLUSH_MAX", "VERSION", "Worker", "WorkerStats", "cancel_message"]

log = logging.getLogger("forklift.worker")

KEYS_WAIT = 5.0  # most a starting worker waits for its kinds' keys to be recorded


class Worker:
    """The public face: builds the configuration, the shared state and the services from
    ``Worker(app, ...)``'s arguments, and runs them (:meth:`run`)."""

    def __init__(
        self,
        app: Forklift,
        *,
        queues: Iterable[str] | None = None,
        concurrency: int = 10,
        lease: float = 30.0,
        poll_interval: float = 1.0,
        drain_timeout: float = 30.0,
        drain_grace: float = 5.0,
        final_timeout: float = 5.0,
        release_hold: float = 10.0,
        leader_interval: float = 1.0,
        flush_interval: float = 0.005,
        progress_interval: float = 0.25,
        listen_health: float = 5.0,
        listen_dsn: str | None = None,
        prefetch_max: int = PREFETCH_MAX,
        prefetch_horizon: float = PREFETCH_HORIZON,
        retention: dict[str, float] | None = None,
        worker_id: str | None = None,
        lead: bool = True,
    ) -> None:
        self.app = app
        self.config = config = WorkerConfig.of(
            app.schema, (k.queue for k in app.kinds.values()), queues=queues,
            concurrency=concurrency, lease=lease, poll_interval=poll_interval,
            drain_timeout=drain_timeout, drain_grace=drain_grace, final_timeout=final_timeout,
            release_hold=release_hold, leader_interval=leader_interval,
            flush_interval=flush_interval, progress_interval=progress_interval,
            listen_health=listen_health, listen_dsn=listen_dsn, prefetch_max=prefetch_max,
            prefetch_horizon=prefetch_horizon, retention=retention, worker_id=worker_id,
            lead=lead,
        )
        self.state = state = WorkerState(kinds=sorted(app.kinds), concurrency=concurrency,
                                         worker_id=worker_id)
        self._drain_requests = 0
        self._extra_services: list[Service] = []
        self.supervisor = Supervisor()
        self.lifecycle = lifecycle.Lifecycle(lifecycle.WorkerFacts(
            id=state.id, app=app, schema=config.schema, concurrency=config.concurrency,
            prefetch_max=config.prefetch_max, lead=config.lead, stats=state.stats,
            running=state.running,
        ))
        # The hot path's sessions run their statements inline: claims, outcome writes and
        # heartbeats are stopped by aborting or closing their session, never by a cancel.
        self._claim_db = state.session("claim", inline=True)
        self._beat_db = state.session("heartbeat", config.beat_timeout, inline=True)
        self.attempts = Attempts(config, state, app=app, lifecycle=self.lifecycle)
        self.producer = Producer(config, state, app=app, attempts=self.attempts,
                                 lifecycle=self.lifecycle, claim_db=self._claim_db)
        self.completer = Completer(config, state, app=app, producer=self.producer,
                                   attempts=self.attempts, lifecycle=self.lifecycle,
                                   settle_db=state.session("complete", inline=True))
        self.locks = WorkerLocks(config, state, attempts=self.attempts)
        self.attempts.connect(producer=self.producer, completer=self.completer, locks=self.locks)
        self.producer.connect(completer=self.completer)
        self.elector: maintenance.Elector | None = None
        self.chores: list[maintenance.Chore] = []
        self.listener: Listener | None = None

    # -- what the worker is ---------------------------------------------------------------------
    @property
    def id(self) -> str:
        return self.state.id

    @property
    def host(self) -> str:
        return self.state.host

    @property
    def pid(self) -> int:
        return self.state.pid

    @property
    def schema(self) -> str:
        return self.config.schema

    @property
    def queues(self) -> list[str]:
        return list(self.config.queues)

    @property
    def kinds(self) -> list[str]:
        """The kinds this worker claims: those it has handlers for (registered on its row)."""
        return self.state.kinds

    @property
    def concurrency(self) -> int:
        return self.config.concurrency

    @property
    def lease(self) -> float:
        return self.config.lease

    @property
    def lead(self) -> bool:
        return self.config.lead

    @property
    def stats(self) -> WorkerStats:
        return self.state.stats

    @property
    def is_leader(self) -> bool:
        return self.state.is_leader

    @property
    def in_flight(self) -> int:
        return len(self.attempts.running)

    # The state tests and tools reach for by its former names.
    @property
    def _loop(self) -> asyncio.AbstractEventLoop | None:
        return self.state.loop

    @property
    def _started(self) -> asyncio.Event:
        return self.state.started

    @property
    def _held(self) -> dict[int, int]:
        return self.state.held

    @_held.setter
    def _held(self, held: dict[int, int]) -> None:
        self.state.held = held

    @property
    def _settle_db(self) -> Session:
        return self.completer.settle_db

    @_settle_db.setter
    def _settle_db(self, session: Session) -> None:
        """Outcomes written on ``session`` from now on (tests hand the completer their own)."""
        self.completer.settle_db = session

    # -- signals from outside -----------------------------------------------------------------
    def drain(self) -> None:
        """Begin a graceful drain; a second call skips the wait for in-flight jobs."""
        self._drain_requests += 1
        # A signal handler runs outside the worker's tasks: name the worker on the record.
        who = {"worker_id": self.state.id}
        if self._drain_requests == 1:
            log.info("drain requested: no more claims", extra=who)
        else:
            log.info("drain requested again: not waiting for in-flight jobs", extra=who)
            self.state.skip_wait.set()
        self.state.stop_claiming.set()
        self.producer.stop()

    def add_service(self, service: Service) -> None:
        """Run one more service under this worker's supervisor (call before :meth:`run`)."""
        self._extra_services.append(service)

    def session(self, purpose: str, timeout: float = OP_TIMEOUT, *, inline: bool = False
                ) -> Session:
        """A purpose-named session the worker closes at exit (opened on first use);
        ``inline``: see :class:`forklift._db.session.Session`."""
        return self.state.session(purpose, timeout, inline=inline)

    # -- main ---------------------------------------------------------------------------------
    async def run(self) -> None:
        config, state, app = self.config, self.state, self.app
        state.loop = asyncio.get_running_loop()
        state.connect(app.dsn)
        await asyncio.to_thread(self._check_schema)
        state.schema_current = True
        lifecycle.attach(self.lifecycle)  # logs, hooks, tracing, metrics: only what is in use
        if any(k.capture_logs for k in app.kinds.values()):
            log_capture.install()  # once per process (forklift._jobs.log_capture)
        await self._beat_db.run(self.register, timeout=OP_TIMEOUT)
        state.db_seen = time.monotonic()
        listen_dsn = pooler.listen_dsn(state.dsn, config.listen_dsn)
        state.listening = listen_dsn is not None
        self.listener = listener = Listener(
            listen_dsn, config.schema, state.id,
            on_wake=self.producer.on_wake, on_control=self._on_control,
            on_reconnect=self.producer.wake.set,
            health_every=config.listen_health, health_timeout=max(1.0, config.listen_health / 2),
        )
        sup = self.supervisor
        completer = sup.start(self.completer)
        keys = KeyDeclarations(config, state, app=app, wake=self.producer.wake)
        services: list[Service] = [
            listener,
            Heartbeater(config, state, attempts=self.attempts, producer=self.producer,
                        beat_db=self._beat_db, register=self.register, restarts=sup.restarts),
            LeaseWatchdog(config, state, attempts=self.attempts),
            self.locks, keys,
        ]
        if config.lead:
            self.elector = maintenance.Elector(config, state, db=state.session("leader"))
            self.chores = maintenance.chores(config, state, leading=self.elector.leading,
                                             app=app, lifecycle=self.lifecycle)
            services += [self.elector, *self.chores]
        services += [factory(config, state, app) for factory in SERVICES] + self._extra_services
        drainer = DrainCoordinator(config, state, attempts=self.attempts, producer=self.producer,
                                   completer=self.completer, claim_db=self._claim_db,
                                   beat_db=self._beat_db, elector=self.elector,
                                   lifecycle=self.lifecycle)
        loops = [sup.start(s) for s in services]
        await keys.first(KEYS_WAIT)  # bounded: a database that fails it fails the claim too
        log.info("worker %s started: queues=%s concurrency=%d lease=%.1fs", state.id,
                 self.queues, config.concurrency, config.lease)
        state.started.set()
        try:
            await self.producer.run()
            await drainer.run(completer)
        finally:
            await self._teardown([*loops, completer])
        log.info("worker %s stopped", state.id)

    async def _teardown(self, loops: list[asyncio.Task[Any]]) -> None:
        """Stop every loop without cancelling anything in the middle of a query: sessions are
        closed first (in-flight calls fail at once), then the now idle loops are cancelled.
        Bounded (within drain.TEARDOWN_BOUND): a handler that ignores its cancellation is not waited for."""
        self.state.closing = True
        if self.listener is not None:
            self.listener.stop()
        await asyncio.gather(*(s.close() for s in self.state.sessions))
        jobs = list(self.attempts.runners)  # inside an attempt, or parked for want of one
        for task in jobs:
            task.cancel()
        for _ in range(3):  # a task may swallow one cancellation (asyncio.wait_for in 3.11)
            pending = [t for t in loops if not t.done()]
            if not pending:
                break
            for task in pending:
                task.cancel()
            await asyncio.wait(pending, timeout=0.5)
        if jobs:
            await asyncio.wait(jobs, timeout=0.5)
        stuck = [t.get_name() for t in [*loops, *jobs] if not t.done()]
        if stuck:
            log.warning("tasks still running at exit: %s", ", ".join(stuck))
        self.state.executor.shutdown(wait=False, cancel_futures=True)

    def _check_schema(self) -> None:
        from forklift._db.connections import connection

        with connection(self.state.dsn, "migrate") as conn:
            ensure_current(conn, self.config.schema)

    async def register(self, conn: Any) -> None:
        await registry.register(
            conn, self.config.schema, worker_id=self.state.id, host=self.state.host,
            pid=self.state.pid, queues=self.queues, slots=self.config.concurrency,
            version=VERSION,
            kinds={name: {"retry": k.retry.to_json(),
                          "lease_expiries": getattr(k, "lease_expiries", LEASE_EXPIRIES),
                          # a batch kind's most jobs a call, read by the Kinds listing
                          **({"batch": k.batch_max} if getattr(k, "batch_max", None) else {})}
                   for name, k in self.app.kinds.items()},
            # It refuses any schema older than the one it was built for (_check_schema).
            schema_built=required_version(), schema_min=required_version(),
        )

    def _on_control(self, message: dict[str, Any]) -> None:
        if message.get("op") == "cancel":
            job_id = message.get("job")
            if isinstance(job_id, int):
                self.attempts.cancel_job(job_id)
                self.producer.cancel_job(job_id)

    async def wait_any(self, *events: asyncio.Event, timeout: float | None) -> None:
        await wait_any(*events, timeout=timeout)


def cancel_message(job_id: int) -> str:
    return json.dumps({"op": "cancel", "job": job_id})
