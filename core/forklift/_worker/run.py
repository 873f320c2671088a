"""Running a worker as a process: signals, exit code, abandoned threads."""

from __future__ import annotations

import asyncio
import logging
import os

from forklift._base.errors import ForkliftError
from forklift._base.words import plural
from forklift._worker.worker import Worker

log = logging.getLogger("forklift.worker")

#: The exit code of a worker whose drain could not write everything it owed before its final
#: deadline (outcomes, released jobs, its exit on the row): those jobs are rescued when their
#: leases expire, so nothing is lost, but the drain was not clean. 0 is a clean drain, 1 a
#: worker that could not start (unreachable database, outdated schema).
EXIT_UNSETTLED = 3


def run_worker(worker: Worker) -> int:
    """Run a worker until SIGTERM/SIGINT (drain; a second signal skips the wait). Exit code.

    The process leaves within the drain's bound whatever its handlers do: a sync handler that
    ignores its cancellation holds a thread, an async one that swallows it holds a task, and
    Python would wait for either at exit (``asyncio.run`` cancels and awaits every task). Their
    jobs were released held back (``release_hold``) until this process is surely gone, so it
    leaves without them.
    """
    import signal
    import threading

    async def main() -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, worker.drain)
        await worker.run()

    code = 0
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(main())
    except ForkliftError as exc:  # unreachable database, outdated schema: one line, exit 1
        log.error("%s", exc.message)
        code = 1
    if code == 0 and worker.state.unsettled:
        code = EXIT_UNSETTLED
    stuck = [t for t in asyncio.all_tasks(loop) if not t.done()]
    threads = [t for t in threading.enumerate()
               if t.name.startswith("forklift-job") and t.is_alive()]
    if stuck or threads:
        if stuck:
            log.warning("leaving %s that ignored cancellation", plural(len(stuck), "task"),
                        extra={"worker_id": worker.state.id})
        logging.shutdown()
        os._exit(code)
    loop.run_until_complete(loop.shutdown_asyncgens())
    loop.close()
    return code
