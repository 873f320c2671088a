"""Runners: the tasks attempts run in, kept while their attempts finish without suspending.

An asyncio task per attempt cost about 8 µs of the worker's CPU per job (creating and
registering the task, scheduling its first step and its done callback, one more turn of the
event loop), more than a no-op job costs everything else. A runner is a task that takes
started attempts from a queue one after another; an attempt runs inside it as it would in a
task of its own:

* the runner is the attempt's current task (``asyncio.current_task()``, ``asyncio.timeout``,
  cancellation and ``uncancel`` all see a real task);
* every step of the handler's coroutine runs in the attempt's own ``contextvars.Context``
  (:class:`InContext`), a fresh copy per attempt (or the one a start hook made), so what one
  job sets is never seen by the next.

A runner is reused only after an attempt that never suspended (a no-op handler, or one that
computes and returns): nothing can have been waiting on it, cancelled it, or kept it as "the
job's task" past the attempt. After an attempt that suspended even once (any real await, any
sync handler, whose thread is awaited), the runner retires, so a late ``task.cancel()`` aimed
at that attempt finds a finished task. Such a handler pays for a task as before.
"""

from __future__ import annotations

import contextvars
from collections.abc import Coroutine, Generator
from typing import Any, TypeVar

T = TypeVar("T")

#: Attempts the runners run back to back, all of them together, before they let the event loop
#: turn (claims, flushes, heartbeats and the listener must not wait for a long run of instant
#: jobs).
BURST = 64


class InContext:
    """Await a coroutine with every step of it run in ``context``, in the current task.

    What ``asyncio.Task(coro, context=context)`` does for its coroutine, without a task: the
    futures the coroutine waits on are passed up to the current task unchanged, and what that
    task is sent or thrown (a result, a cancellation) is passed down. ``suspended`` says
    whether the coroutine ever gave control back to the event loop.
    """

    __slots__ = ("context", "coro", "suspended")

    def __init__(self, coro: Coroutine[Any, Any, T], context: contextvars.Context) -> None:
        self.coro = coro
        self.context = context
        self.suspended = False

    def __await__(self) -> Generator[Any, None, Any]:
        coro, run = self.coro, self.context.run
        exc: BaseException | None = None
        while True:
            try:
                yielded = run(coro.send, None) if exc is None else run(coro.throw, exc)
            except StopIteration as stop:
                return stop.value
            self.suspended = True
            try:
                yield yielded
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as thrown:  # a cancellation, mostly: the coroutine decides
                exc = thrown
            else:
                exc = None
