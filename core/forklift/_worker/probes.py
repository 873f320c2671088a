"""The worker's probes: ``/healthz`` (liveness) and ``/readyz`` (readiness) over HTTP.

``/healthz`` answers 200 while the process and its event loop are alive and no supervised
service is stuck restarting; ``/readyz`` answers 200 while the worker is connected (a recent
successful round trip of its heartbeat session), its schema is current (checked at start),
it has started and it is not draining. Otherwise 503, with a JSON body giving the reasons.

Both must answer within a kubelet's timeout whatever the worker is doing: handlers hogging the
CPU, a handler blocking the event loop, a database that stopped answering. So the answers are
made on the server's own thread (:mod:`forklift._worker.probe_server`) from state the worker
keeps up to date, never from a query or the loop at request time. The loop's liveness is the
timestamp this service's tiny loop refreshes (``state.loop_seen``): a loop that stops running
it lets that go stale.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from forklift._worker.config import WorkerConfig
    from forklift._worker.probe_server import ProbeServer
    from forklift._worker.state import WorkerState

__all__ = ["LOOP_STALE", "RESTARTS_STUCK", "RESTART_WINDOW", "Probes", "Verdict"]

LOOP_TICK = 0.2  # seconds between refreshes of the loop's timestamp
LOOP_STALE = 5.0  # seconds without a refresh after which the loop counts as blocked
RESTARTS_STUCK = 5  # restarts of one service...
RESTART_WINDOW = 60.0  # ...within this many seconds: it is stuck restarting

_JSON = "application/json"


@dataclass(frozen=True)
class Verdict:
    """One probe's answer: ok, or the reasons it is not."""

    reasons: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.reasons

    def answer(self) -> tuple[int, str, bytes]:
        body = {"status": "ok" if self.ok else "failing", "reasons": self.reasons}
        return (200 if self.ok else 503), _JSON, (json.dumps(body) + "\n").encode()


class Probes:
    """Serves ``/healthz`` and ``/readyz`` on ``server`` while the worker runs; ``restarts``
    is the supervisor's count of restarts by service."""

    name = "probes"

    def __init__(self, config: WorkerConfig, state: WorkerState, *, server: ProbeServer,
                 restarts: dict[str, int], loop_stale: float = LOOP_STALE) -> None:
        self.config = config
        self.state = state
        self.server = server
        self.restarts = restarts
        self.loop_stale = loop_stale
        #: services stuck restarting, as the loop last saw them (read by the server's thread)
        self.stuck: tuple[str, ...] = ()
        self._seen: dict[str, int] = {}
        self._times: dict[str, deque[float]] = {}
        server.route("/healthz", lambda: self.health().answer())
        server.route("/readyz", lambda: self.readiness().answer())

    async def run(self) -> None:
        self.state.loop_seen = time.monotonic()
        self.server.start()
        try:
            while True:
                now = time.monotonic()
                self.state.loop_seen = now
                self._watch_restarts(now)
                await asyncio.sleep(LOOP_TICK)
        except asyncio.CancelledError:
            self.server.stop()  # the worker is exiting: the port goes with it
            raise

    def _watch_restarts(self, now: float) -> None:
        stuck = []
        for name, count in list(self.restarts.items()):
            times = self._times.setdefault(name, deque(maxlen=RESTARTS_STUCK))
            for _ in range(min(RESTARTS_STUCK, count - self._seen.get(name, 0))):
                times.append(now)
            self._seen[name] = count
            if len(times) >= RESTARTS_STUCK and now - times[0] <= RESTART_WINDOW:
                stuck.append(name)
        self.stuck = tuple(sorted(stuck))

    # -- the answers (on the server's thread) --------------------------------------------------
    def _loop_reason(self, now: float) -> str | None:
        age = now - self.state.loop_seen
        if age > self.loop_stale:
            return f"event loop blocked: not run for {age:.1f}s"
        return None

    def health(self) -> Verdict:
        now = time.monotonic()
        reasons = [r for r in (self._loop_reason(now),) if r]
        reasons += [f"service {name} keeps dying: {self.restarts.get(name, 0)} restarts,"
                    f" {RESTARTS_STUCK} within {RESTART_WINDOW:.0f}s" for name in self.stuck]
        return Verdict(reasons)

    def readiness(self) -> Verdict:
        state, now = self.state, time.monotonic()
        reasons = []
        if not state.schema_current:
            reasons.append("schema not checked yet")
        if state.stop_claiming.is_set() or state.closing:
            reasons.append("draining: taking no new jobs")
        elif not state.started.is_set():
            reasons.append("starting")
        if state.db_error is not None:
            reasons.append(f"database: last round trip failed ({state.db_error})")
        elif state.db_seen is None:
            reasons.append("database: no round trip yet")
        elif now - state.db_seen > self.db_stale:
            reasons.append(f"database: no successful round trip for {now - state.db_seen:.1f}s")
        loop = self._loop_reason(now)
        if loop:
            reasons.append(loop)
        return Verdict(reasons)

    @property
    def db_stale(self) -> float:
        """Seconds without a successful heartbeat after which the worker counts as cut off:
        three missed beats (one every third of a lease)."""
        return self.config.lease + 1.0
