"""``op.locks``: locks with their fencing tokens, held or expired."""

from __future__ import annotations

from forklift.ops import locks as _locks
from forklift.ops._clients.client import FeatureClient

__all__ = ["LocksClient"]


class LocksClient(FeatureClient):
    __slots__ = ()

    def __call__(self, *, prefix: str | None = None, limit: int = 500) -> list[_locks.LockInfo]:
        """Deprecated: use ``op.locks.list()``."""
        return self.list(prefix=prefix, limit=limit)

    # Last: below this definition, ``list`` in an annotation would name the method.
    def list(self, *, prefix: str | None = None, limit: int = 500) -> list[_locks.LockInfo]:
        """Locks with fencing tokens, held or expired (forklift.ops.locks)."""
        return self._session.read(_locks.list_locks, prefix=prefix, limit=limit)
