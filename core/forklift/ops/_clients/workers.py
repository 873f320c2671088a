"""``op.workers``: workers as they registered themselves, exited ones included."""

from __future__ import annotations

from forklift.ops import workers as _workers
from forklift.ops._clients.client import FeatureClient

__all__ = ["WorkersClient"]


class WorkersClient(FeatureClient):
    __slots__ = ()

    def __call__(self) -> list[_workers.WorkerInfo]:
        """Deprecated: use ``op.workers.list()``."""
        return self.list()

    # Last: below this definition, ``list`` in an annotation would name the method.
    def list(self) -> list[_workers.WorkerInfo]:
        return self._session.read(_workers.list_workers)
