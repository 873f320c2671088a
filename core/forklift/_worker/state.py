"""What a worker's services share while it runs: its identity, the leases it holds, its counts,
the signals between services, its event loop and thread pool, and the sessions it opened.

One :class:`WorkerState` per worker, handed to each service beside the
:class:`~forklift._worker.config.WorkerConfig`. A service reads and writes only what is here and
what it is handed by name (its sessions, the services it calls): never the worker itself.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import socket
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING

from forklift._db.session import Session

if TYPE_CHECKING:
    from forklift._worker.running import Running

__all__ = ["OP_TIMEOUT", "WorkerState", "WorkerStats"]

OP_TIMEOUT = 15.0  # above every server-side statement timeout of the worker's sessions


@dataclass
class WorkerStats:
    claimed: int = 0
    completed: int = 0
    failed: int = 0
    stale_writes: int = 0
    lease_lost: int = 0
    rescued: int = 0
    staged: int = 0
    #: Jobs ended past their start-by deadline: claimed by this worker, or swept as its leader.
    expired: int = 0
    #: Raises of waiting jobs' priorities by this worker's priority aging as leader.
    aged: int = 0


class WorkerState:
    """The mutable state of one worker (created with it, on the thread that builds it)."""

    def __init__(self, *, kinds: list[str], concurrency: int, worker_id: str | None = None
                 ) -> None:
        self.host = socket.gethostname()
        self.pid = os.getpid()
        self.id = worker_id or f"{self.host}:{self.pid}:{secrets.token_hex(2)}"
        #: The kinds this worker claims: those it has handlers for (registered on its row).
        self.kinds = kinds
        self.reregister = False  # kinds changed since the row was written
        self.exited = False  # the drain recorded the exit on the row
        #: A final write of the drain did not land (outcomes, releases, the exit record): the
        #: process exits with EXIT_UNSETTLED so an orchestrator can tell it from a clean drain.
        self.unsettled = False
        self.stats = WorkerStats()
        self.is_leader = False
        self.held: dict[int, int] = {}  # fence -> job id: every lease we still need
        #: fence -> the attempt running in a slot (forklift._worker.attempts)
        self.running: dict[int, Running] = {}
        #: the slots the running attempts take (a weighted job takes several)
        self.busy = 0
        self.done = 0  # attempts finished, for the completion rate
        self.executor = ThreadPoolExecutor(concurrency, thread_name_prefix="forklift-job")
        self.loop: asyncio.AbstractEventLoop | None = None
        #: set while no attempt runs
        self.idle = asyncio.Event()
        self.idle.set()
        self.stop_claiming = asyncio.Event()
        self.skip_wait = asyncio.Event()  # a second drain request: do not wait for attempts
        self.started = asyncio.Event()  # every service started; claims about to begin
        self.closing = False  # tearing down: sessions closing, loops being cancelled
        self.listening = False  # a listener takes wake-ups (NOTIFY) for this worker
        self.dsn = ""
        self.sessions: list[Session] = []
        # Read by the probes' thread (forklift._worker.probes), so plain values, never awaited.
        self.schema_current = False  # checked at start
        self.loop_seen = 0.0  # monotonic time the event loop last ran the probes' tick
        #: monotonic time of the last successful round trip of the heartbeat session
        self.db_seen: float | None = None
        self.db_error: str | None = None  # why the last heartbeat failed; None after a success

    def session(self, purpose: str, timeout: float = OP_TIMEOUT, *, inline: bool = False
                ) -> Session:
        """A purpose-named session the worker closes at exit (opened on first use, on the
        database the worker runs against: :meth:`connect`); ``inline``: see
        :class:`forklift._db.session.Session`."""
        s = Session(self.dsn, purpose, self.id, timeout=timeout, inline=inline)
        self.sessions.append(s)
        return s

    def connect(self, dsn: str) -> None:
        """The database the worker runs against, for every session it made or makes."""
        self.dsn = dsn
        for s in self.sessions:
            s.dsn = dsn
