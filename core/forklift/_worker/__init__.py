"""The worker, as small services (see :mod:`forklift._worker.worker` and docs/architecture.md)."""

from forklift._worker.run import run_worker
from forklift._worker.worker import VERSION, Worker, WorkerStats, cancel_message

__all__ = ["VERSION", "Worker", "WorkerStats", "cancel_message", "run_worker"]
