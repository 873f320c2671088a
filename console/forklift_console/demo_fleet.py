"""The demo's workers as real processes, kept running the way a deployment would.

Each slot is one worker process (:mod:`forklift_console.demo_worker`) on a set of queues. The
console lists them by pid like any worker; draining one is a SIGTERM to its process, exactly
what an orchestrator sends, and the console watches it stop claiming, finish or release its
jobs, and exit; a replacement starts a few seconds later (a rolling restart). :meth:`stop`
drains them all, skips the wait, and kills what is still there after a deadline, so closing
the demo leaves no process behind (and each worker also leaves by itself if the demo dies).
Their output goes to a log file in a directory of their own, removed on stop.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO


@dataclass(frozen=True)
class SlotSpec:
    #: None: every queue of the demo's kinds.
    queues: tuple[str, ...] | None
    concurrency: int


@dataclass
class Slot:
    spec: SlotSpec
    process: subprocess.Popen[bytes] | None = None
    #: When the last process exited (monotonic), for the restart delay.
    exited_at: float | None = None
    #: Every pid this slot has run, oldest first.
    history: list[int] = field(default_factory=list)


def worker_pid(worker_id: str) -> int | None:
    """The pid in a worker id (``host:pid:suffix``)."""
    parts = worker_id.rsplit(":", 2)
    if len(parts) != 3:
        return None
    try:
        return int(parts[1])
    except ValueError:
        return None


class DemoFleet:
    #: Seconds between the supervisor's looks at its processes.
    WATCH_EVERY = 0.2

    def __init__(
        self,
        dsn: str,
        slots: list[SlotSpec],
        *,
        schema: str | None = None,
        drain_timeout: float = 20.0,
        restart_after: float = 5.0,
    ) -> None:
        self.dsn = dsn
        self.schema = schema
        self.drain_timeout = drain_timeout
        self.restart_after = restart_after
        self.slots = [Slot(spec) for spec in slots]
        #: The workers' log directory, made by :meth:`start` and removed by :meth:`stop`.
        self.logs: Path | None = None
        self._log: IO[bytes] | None = None
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    # -- what the console asks ------------------------------------------------------------------
    @property
    def pids(self) -> list[int]:
        """The live worker processes' pids."""
        with self._lock:
            return [s.process.pid for s in self.slots
                    if s.process is not None and s.process.poll() is None]

    def owns(self, worker_id: str) -> bool:
        return worker_pid(worker_id) in self.pids

    def drain(self, worker_id: str) -> bool:
        """SIGTERM the worker's process (it drains); False when it is not one of ours."""
        pid = worker_pid(worker_id)
        if pid is None or pid not in self.pids:
            return False
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        return True

    # -- life -----------------------------------------------------------------------------------
    def start(self) -> None:
        self.logs = Path(tempfile.mkdtemp(prefix="forklift-demo-"))
        self._log = open(self.logs / "workers.log", "ab")  # noqa: SIM115 - closed by stop()
        with self._lock:
            for slot in self.slots:
                self._spawn(slot)
        self._thread = threading.Thread(target=self._supervise, name="demo-fleet", daemon=True)
        self._thread.start()

    def _spawn(self, slot: Slot) -> None:
        command = [sys.executable, "-m", "forklift_console.demo_worker", "--dsn", self.dsn,
                   "--parent", str(os.getpid()), "--concurrency", str(slot.spec.concurrency),
                   "--drain-timeout", str(self.drain_timeout)]
        if slot.spec.queues:
            command += ["--queues", ",".join(slot.spec.queues)]
        if self.schema:
            command += ["--schema", self.schema]
        slot.process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=self._log, stderr=self._log,
            # Its own process group: a ctrl+c meant for the console reaches the console only,
            # which then stops its workers in order.
            start_new_session=True,
        )
        slot.exited_at = None
        slot.history.append(slot.process.pid)

    def _supervise(self) -> None:
        """Start a replacement for a worker that exited, after ``restart_after`` seconds."""
        while not self._stopping.wait(self.WATCH_EVERY):
            with self._lock:
                for slot in self.slots:
                    if self._stopping.is_set():
                        return
                    p = slot.process
                    if p is None or p.poll() is None:
                        continue
                    now = time.monotonic()
                    if slot.exited_at is None:
                        slot.exited_at = now
                    elif now - slot.exited_at >= self.restart_after:
                        self._spawn(slot)

    def stop(self, deadline: float = 15.0) -> None:
        """Drain every worker, skip the wait, and kill whatever is left at ``deadline``."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(5)
        with self._lock:
            live = [s.process for s in self.slots
                    if s.process is not None and s.process.poll() is None]
        for sig_round in range(2):  # the second SIGTERM skips the drain's wait
            for p in live:
                with contextlib.suppress(ProcessLookupError):
                    p.send_signal(signal.SIGTERM)
            if sig_round == 0:
                _wait_all(live, 1.0)
        _wait_all(live, deadline)
        for p in live:
            if p.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    p.kill()
                p.wait(5)
        if self._log is not None:
            self._log.close()
        if self.logs is not None:
            shutil.rmtree(self.logs, ignore_errors=True)


def _wait_all(processes: list[subprocess.Popen[bytes]], seconds: float) -> None:
    end = time.monotonic() + seconds
    for p in processes:
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.wait(max(0.0, end - time.monotonic()))
