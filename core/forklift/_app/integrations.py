"""The optional integrations a worker starts with: logs, hooks, tracing, metrics.

:func:`attach` runs once as the worker starts, before its services, and registers attempt
lifecycle points only for what is in use, so a worker with none of them pays one truthiness
test per point and nothing else.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from forklift._worker.worker import Worker


def attach(worker: Worker) -> None:
    from forklift import hooks, logs, otel

    logs.attach(worker)
    hooks.attach(worker)
    otel.attach(worker)
    metrics = sys.modules.get("forklift.metrics")  # enabled means imported: never import it here
    if metrics is not None and metrics.enabled():
        metrics.attach(worker)
