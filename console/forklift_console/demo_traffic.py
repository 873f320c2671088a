"""The demo's traffic: the streams a scenario switches on, played in rounds of a quarter second.

Everything goes through the public API a real app uses (enqueue, batches, events, the operator
API for the vendor queue's rate and the backfill's start). A stream seeds what it needs at
once, so a person sees its picture within seconds of ``forklift demo`` starting, then keeps
it alive at a pace the demo's workers can follow (nothing grows without bound).
"""

from __future__ import annotations

import contextlib
import random
import threading
import time
from collections.abc import Callable

from forklift import Forklift
from forklift_console import demo_app as d
from forklift_console.demo_pin import HorizonPin

#: Seconds a round lasts.
ROUND = 0.25
#: An even order is paid this many seconds after it was placed (an odd one never is: it waits
#: until its deadline, for a person to publish the event by hand).
PAY_AFTER = 20.0
#: Vendor jobs waiting beyond what the queue's rate lets through: kept about this many.
VENDOR_BACKLOG = 120


class DemoTraffic:
    def __init__(self, app: Forklift, streams: tuple[str, ...], pin: HorizonPin,
                 *, seed: int | None = None) -> None:
        self.app = app
        self.streams = streams
        self.pin = pin
        self.rng = random.Random(seed)
        self.n = 0
        self.rounds = 0
        self.began = time.monotonic()
        self.vendor_sent = 0
        #: Orders to pay: (monotonic time due, order number).
        self.unpaid: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        #: The last error a stream met (a database blip; it tries again next round).
        self.last_error: str | None = None

    # -- life -----------------------------------------------------------------------------------
    def start(self) -> None:
        """Seed and play in a thread of its own: the console opens without waiting for it."""
        self._thread = threading.Thread(target=self._run, name="demo-traffic", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)

    def _run(self) -> None:
        for stream in self.streams:
            self._try(getattr(self, f"_seed_{stream}", None))
        while not self._stop.wait(ROUND):
            self.rounds += 1
            for stream in self.streams:
                self._try(getattr(self, f"_round_{stream}", None))

    def _try(self, step: Callable[[], None] | None) -> None:
        if step is None:
            return
        try:
            step()
        except Exception as exc:  # a database blip or a refusal (caller busy): next round
            self.last_error = f"{type(exc).__name__}: {exc}"

    def _next(self) -> int:
        self.n += 1
        return self.n

    # -- mix: the quick stream (fast, flaky, slow, failing, reports) ----------------------------
    def _round_mix(self) -> None:
        rows = [self.app.kind(d.pick(self.rng)).row({"n": self._next()}) for _ in range(5)]
        self.app.enqueue_rows(rows)

    # -- long: exports a drain catches in flight ---------------------------------------------------
    def _seed_long(self) -> None:
        export = self.app.kind(d.EXPORT)
        self.app.enqueue_rows([export.row({"n": self._next()}) for _ in range(4)])

    def _round_long(self) -> None:
        if self.rounds % 40 == 0:  # one every 10 s: about six running at any time
            self.app.kind(d.EXPORT).enqueue({"n": self._next()})

    # -- batches: books of chapters, two at a time ---------------------------------------------
    def _seed_batches(self) -> None:
        self._book(0)

    def _round_batches(self) -> None:
        if self.rounds % 600 == 0:  # every 2.5 minutes, about when the last one ends
            self._book(self.rounds // 600)

    def _book(self, k: int) -> None:
        self.app.batch(d.CHAPTER, [{"n": 1000 * (k + 1) + i} for i in range(d.BOOK_CHAPTERS)],
                       caller="demo", key=f"demo-book-{k}-{int(self.began)}",
                       max_parallel=d.BOOK_PARALLEL)

    # -- flow: a tenant at its key's limit, a queue held to its rate -----------------------------
    def _seed_flow(self) -> None:
        from forklift.ops import Operator

        with Operator(self.app.dsn, schema=self.app.schema, actor="forklift demo") as op:
            op.queues.set_rate(d.VENDOR_QUEUE, d.VENDOR_RATE, create=True,
                               reason="the vendor allows one call a second")
        sync = self.app.kind(d.SYNC)
        rows = [sync.row({"tenant": "acme", "n": self._next()}) for _ in range(30)]
        rows += [sync.row({"tenant": t, "n": self._next()}) for t in ("beta", "gamma")]
        self.app.enqueue_rows(rows)

    def _round_flow(self) -> None:
        if self.rounds % 8 == 0:
            self.app.kind(d.SYNC).enqueue({"tenant": "acme", "n": self._next()})
        if self.rounds % 24 == 0:
            self.app.kind(d.SYNC).enqueue(
                {"tenant": self.rng.choice(("beta", "gamma", "delta")), "n": self._next()})
        # Keep about VENDOR_BACKLOG waiting beyond what one a second lets through.
        allowed = (time.monotonic() - self.began) * 1.0 + VENDOR_BACKLOG
        if self.vendor_sent < allowed:
            vendor = self.app.kind(d.VENDOR)
            self.app.enqueue_rows([vendor.row({"n": self._next()}) for _ in range(4)])
            self.vendor_sent += 4

    # -- workflows: orders that wait for payment and sleep; a chain of dependencies -------------
    def _seed_workflows(self) -> None:
        for _ in range(6):
            self._order()
        self._chain()

    def _round_workflows(self) -> None:
        if self.rounds % 40 == 0:
            self._order()
        if self.rounds % 240 == 0:
            self._chain()
        now = time.monotonic()
        due = [o for t, o in self.unpaid if t <= now]
        self.unpaid = [(t, o) for t, o in self.unpaid if t > now]
        for order in due:
            self.app.publish_event(d.PAID, {"order": order, "amount": 1299})

    def _order(self) -> None:
        n = self._next()
        self.app.kind(d.FULFIL).enqueue({"n": n})
        if n % 2 == 0:
            self.unpaid.append((time.monotonic() + PAY_AFTER, n))

    def _chain(self) -> None:
        n = self._next()
        extract = self.app.kind(d.EXTRACT).enqueue({"n": n})
        load = self.app.kind(d.LOAD).enqueue({"n": n})
        self.app.kind(d.SUMMARY).enqueue({"n": n}, after=[extract, load])

    # -- backfill: started at once (demo.tidy restarts it when it completes) ---------------------
    def _seed_backfill(self) -> None:
        from forklift.ops import backfills
        from forklift.ops.connect import connection
        from forklift.ops.context import OpsContext

        who = OpsContext(schema=self.app.schema, actor="forklift demo")
        with connection(self.app.dsn, "ops") as conn:
            with contextlib.suppress(backfills.BackfillNotFound):
                if backfills.get_backfill(conn, who, d.reindex.name).state not in (
                        "never_run", "completed"):
                    return
            backfills.start(conn, who, d.reindex.name, force=True, definition=d.reindex)

    # -- horizon: pinned from the start ---------------------------------------------------------
    def _seed_horizon(self) -> None:
        self.pin.hold()
