"""A stand-in ``Task`` for a recorded task whose module path no longer imports.

Django's ``TaskResult`` holds its ``Task``; a job enqueued before its task was renamed or
removed still has a result to read (FAILED, with ``task_not_found``). The stand-in carries the
recorded module path, so ``result.task.module_path`` says which task it was, and calling it
raises ``ImportError``.
"""

from __future__ import annotations

from typing import Any

from forklift.django._compat import BaseTaskBackend, Task


def missing_task(backend: BaseTaskBackend, path: str, queue: str, priority: int) -> Task[Any, Any]:
    """A ``Task`` of ``backend`` named ``path``, on ``queue`` when the backend still lists it."""
    module, _, name = path.rpartition(".")

    def missing(*args: Any, **kwargs: Any) -> Any:
        raise ImportError(f"no Django task at {path!r}")

    missing.__module__ = module or "__main__"
    missing.__name__ = missing.__qualname__ = name or path
    if backend.queues and queue not in backend.queues:
        queue = sorted(backend.queues)[0]
    task: Task[Any, Any] = backend.task_class(
        func=missing, priority=max(-100, min(100, priority)), queue_name=queue,
        backend=backend.alias, takes_context=False,
    )
    return task
