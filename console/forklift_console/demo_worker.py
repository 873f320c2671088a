"""One of ``forklift demo``'s workers, a process of its own:
``python -m forklift_console.demo_worker --dsn DSN --parent PID [--queues a,b] [--concurrency N]``.

It is an ordinary forklift worker on the demo app (SIGTERM drains it, a second skips the wait),
plus one duty: it never outlives the demo. A watchdog thread checks every half second that the
process that started it is still its parent; when the demo is gone (closed, crashed, killed),
the worker drains and exits by itself, so no worker is ever left behind.
"""

from __future__ import annotations

import argparse
import os
import signal
import threading
import time

#: Seconds between the watchdog's looks at its parent.
WATCH_EVERY = 0.5
#: After the first SIGTERM of an orphan, seconds before the second one skips the drain's wait.
ORPHAN_GRACE = 3.0


def watch_parent(parent: int) -> None:
    """Drain this process once ``parent`` is no longer its parent (it exited)."""
    while os.getppid() == parent:
        time.sleep(WATCH_EVERY)
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(ORPHAN_GRACE)
    os.kill(os.getpid(), signal.SIGTERM)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="forklift_console.demo_worker")
    parser.add_argument("--dsn", required=True)
    parser.add_argument("--schema", default=None)
    parser.add_argument("--parent", type=int, required=True)
    parser.add_argument("--queues", default=None)
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--drain-timeout", type=float, default=20.0)
    parser.add_argument("--lease", type=float, default=15.0)
    args = parser.parse_args(argv)
    if os.getppid() != args.parent:
        return 1  # the demo is already gone
    threading.Thread(target=watch_parent, args=(args.parent,), name="demo-parent-watch",
                     daemon=True).start()

    from forklift import Worker, logs, run_worker
    from forklift_console import demo_app

    logs.configure(level="WARNING")
    app = demo_app.app
    if args.schema:
        app.schema = args.schema
    app.use(args.dsn)
    queues = [q for q in (args.queues or "").split(",") if q] or None
    worker = Worker(app, queues=queues, concurrency=args.concurrency, lease=args.lease,
                    drain_timeout=args.drain_timeout)
    return run_worker(worker)


if __name__ == "__main__":
    raise SystemExit(main())
