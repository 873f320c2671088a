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
import os
import secrets
import socket
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from forklift._app.app import Forklift
from forklift._db import pooler
from forklift._db.migrate import ensure_current
from forklift._db.session import Session
from forklift._features.flow.declare import KeyDeclarations
from forklift._features.flow.worker_locks import WorkerLocks
from forklift._worker import maintenance, registry
from forklift._worker.attempts import Attempts
from forklift._worker.completer import Completer
from forklift._worker.drain import DrainCoordinator
from forklift._worker.heartbeater import Heartbeater, LeaseWatchdog
from forklift._worker.listener import Listener
from forklift._worker.maintenance.rescuer import LEASE_EXPIRIES
from forklift._worker.producer import (
    CLAIM_GRACE,
    FLUSH_MAX,
    PREFETCH_HORIZON,
    PREFETCH_MAX,
    Producer,
)
from forklift._worker.supervisor import SERVICES, Service, Supervisor

__all__ = ["CLAIM_GRACE", "FLUSH_MAX", "VERSION", "Worker", "WorkerStats", "cancel_message"]

log = logging.getLogger("forklift.worker")

VERSION = "0.1.0"
OP_TIMEOUT = 15.0  # above every server-side statement timeout of the worker's sessions
KEYS_WAIT = 5.0  # most a starting worker waits for its kinds' keys to be recorded



@dataclass
class WorkerStats:
    claimed: int = 0
    completed: int = 0
    failed: int = 0
    stale_writes: int = 0
    lease_lost: int = 0
    rescued: int = 0
    staged: int = 0


class Worker:
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
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if lease < 1:
            raise ValueError("lease must be at least 1 second")
        self.app = app
        self.schema = app.schema
        self.queues = sorted(set(queues or {k.queue for k in app.kinds.values()} or {"default"}))
        #: The kinds this worker claims: those it has handlers for (registered on its row).
        self.kinds = sorted(app.kinds)
        self._reregister = False  # kinds changed since the row was written
        self._exited = False  # the drain recorded the exit on the row
        self.concurrency = concurrency
        self.lease = lease
        self.poll_interval = poll_interval
        self.drain_timeout = drain_timeout
        self.drain_grace = drain_grace
        self.final_timeout = final_timeout
        self.release_hold = release_hold
        self.leader_interval = leader_interval
        self.flush_interval = flush_interval
        self.progress_interval = progress_interval
        self.listen_health = listen_health
        # Behind a transaction pooler LISTEN needs a direct connection (forklift._db.pooler).
        self.listen_dsn = listen_dsn
        self.prefetch_max = max(0, prefetch_max)
        self.prefetch_horizon = prefetch_horizon
        # None: the database's windows (forklift retention); a dict overrides them per state.
        self.retention = retention
        self.lead = lead
        self.host = socket.gethostname()
        self.pid = os.getpid()
        self.id = worker_id or f"{self.host}:{self.pid}:{secrets.token_hex(2)}"
        self.stats = WorkerStats()
        self.is_leader = False

        self._held: dict[int, int] = {}  # fence -> job id: every lease we still need
        self._done = 0  # attempts finished, for the completion rate
        self._executor = ThreadPoolExecutor(concurrency, thread_name_prefix="forklift-job")
        self._loop: asyncio.AbstractEventLoop | None = None
        self._idle = asyncio.Event()
        self._idle.set()
        self._stop_claiming = asyncio.Event()
        self._skip_wait = asyncio.Event()
        self._drain_requests = 0
        self._closing = False
        self._started = asyncio.Event()
        self._dsn = ""
        self._sessions: list[Session] = []
        self._extra_services: list[Service] = []

        self.supervisor = Supervisor()
        self.attempts = Attempts(self)
        self.producer = Producer(self)
        self.completer = Completer(self)
        self.drainer = DrainCoordinator(self)
        self.locks = WorkerLocks(self)
        self.elector: maintenance.Elector | None = None
        self.chores: list[maintenance.Chore] = []

    # -- signals from outside -----------------------------------------------------------------
    def drain(self) -> None:
        """Begin a graceful drain; a second call skips the wait for in-flight jobs."""
        self._drain_requests += 1
        if self._drain_requests == 1:
            log.info("drain requested: no more claims")
        else:
            log.info("drain requested again: not waiting for in-flight jobs")
            self._skip_wait.set()
        self._stop_claiming.set()
        self.producer.stop()

    @property
    def in_flight(self) -> int:
        return len(self.attempts.running)

    def add_service(self, service: Service) -> None:
        """Run one more service under this worker's supervisor (call before :meth:`run`)."""
        self._extra_services.append(service)

    def session(self, purpose: str, timeout: float = OP_TIMEOUT, *, inline: bool = False
                ) -> Session:
        """A purpose-named session the worker closes at exit (opened on first use);
        ``inline``: see :class:`forklift._db.session.Session`."""
        s = Session(self._dsn, purpose, self.id, timeout=timeout, inline=inline)
        self._sessions.append(s)
        return s

    # -- main ---------------------------------------------------------------------------------
    async def run(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._dsn = self.app.dsn
        await asyncio.to_thread(self._check_schema)
        from forklift._app import integrations as _integrations

        _integrations.attach(self)  # logs, hooks, tracing, metrics: only what is in use
        beat_timeout = max(1.0, min(5.0, self.lease / 3))
        # The hot path's sessions run their statements inline: claims, outcome writes and
        # heartbeats are stopped by aborting or closing their session, never by a cancel.
        self._claim_db = self.session("claim", inline=True)
        self._settle_db = self.session("complete", inline=True)
        self._beat_db = self.session("heartbeat", beat_timeout, inline=True)
        await self._beat_db.run(self.register, timeout=OP_TIMEOUT)
        self.listener = Listener(
            pooler.listen_dsn(self._dsn, self.listen_dsn), self.schema, self.id,
            on_wake=self.producer.on_wake, on_control=self._on_control,
            on_reconnect=self.producer.wake.set,
            health_every=self.listen_health, health_timeout=max(1.0, self.listen_health / 2),
        )
        sup = self.supervisor
        completer = sup.start(self.completer)
        keys = KeyDeclarations(self)
        services: list[Service] = [self.listener, Heartbeater(self), LeaseWatchdog(self),
                                   self.locks, keys]
        if self.lead:
            self.elector = maintenance.Elector(self)
            self.chores = maintenance.chores(self)
            services += [self.elector, *self.chores]
        services += [factory(self) for factory in SERVICES] + self._extra_services
        loops = [sup.start(s) for s in services]
        await keys.first(KEYS_WAIT)  # bounded: a database that fails it fails the claim too
        log.info("worker %s started: queues=%s concurrency=%d lease=%.1fs", self.id,
                 self.queues, self.concurrency, self.lease)
        self._started.set()
        try:
            await self.producer.run()
            await self.drainer.run(completer)
        finally:
            await self._teardown([*loops, completer])
        log.info("worker %s stopped", self.id)

    async def _teardown(self, loops: list[asyncio.Task[Any]]) -> None:
        """Stop every loop without cancelling anything in the middle of a query: sessions are
        closed first (in-flight calls fail at once), then the now idle loops are cancelled.
        Bounded (within drain.TEARDOWN_BOUND): a handler that ignores its cancellation is not waited for."""
        self._closing = True
        self.listener.stop()
        await asyncio.gather(*(s.close() for s in self._sessions))
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
        self._executor.shutdown(wait=False, cancel_futures=True)

    def _check_schema(self) -> None:
        from forklift._db.connections import connection

        with connection(self._dsn, "migrate") as conn:
            ensure_current(conn, self.schema)

    async def register(self, conn: Any) -> None:
        await registry.register(
            conn, self.schema, worker_id=self.id, host=self.host, pid=self.pid,
            queues=self.queues, slots=self.concurrency, version=VERSION,
            kinds={name: {"retry": k.retry.to_json(),
                          "lease_expiries": getattr(k, "lease_expiries", LEASE_EXPIRIES)}
                   for name, k in self.app.kinds.items()},
        )

    def _on_control(self, message: dict[str, Any]) -> None:
        if message.get("op") == "cancel":
            job_id = message.get("job")
            if isinstance(job_id, int):
                self.attempts.cancel_job(job_id)
                self.producer.cancel_job(job_id)

    async def wait_any(self, *events: asyncio.Event, timeout: float | None) -> None:
        waiters = [asyncio.ensure_future(e.wait()) for e in events]
        try:
            await asyncio.wait(waiters, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waiters:
                w.cancel()


def cancel_message(job_id: int) -> str:
    return json.dumps({"op": "cancel", "job": job_id})
