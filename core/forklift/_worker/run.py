"""Running a worker as a process: signals, exit code, abandoned threads."""

from __future__ import annotations

import asyncio
import logging
import os

from forklift._errors import ForkliftError
from forklift._worker.worker import Worker

log = logging.getLogger("forklift.worker")


def run_worker(worker: Worker) -> int:
    """Run a worker until SIGTERM/SIGINT (drain; a second signal skips the wait). Exit code."""
    import signal
    import threading

    async def main() -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, worker.drain)
        await worker.run()

    code = 0
    try:
        asyncio.run(main())
    except ForkliftError as exc:  # unreachable database, outdated schema: one line, exit 1
        log.error("%s", exc.message)
        code = 1
    if any(t.name.startswith("forklift-job") and t.is_alive() for t in threading.enumerate()):
        # A sync handler ignored its cancellation; its job was released. Python would wait for
        # the thread at exit, so leave without it.
        logging.shutdown()
        os._exit(code)
    return code
