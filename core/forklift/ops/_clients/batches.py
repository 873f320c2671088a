"""``op.batches``: batches with their progress; cancel one, retry its failed targets."""

from __future__ import annotations

from typing import TYPE_CHECKING

from forklift.ops import batches as _batches
from forklift.ops._clients.client import FeatureClient

if TYPE_CHECKING:
    from forklift._features.batches import Batch

__all__ = ["BatchesClient"]


class BatchesClient(FeatureClient):
    __slots__ = ()

    def __call__(
        self,
        *,
        state: str | None = None,
        caller: str | None = None,
        limit: int = 50,
        before_id: int | None = None,
    ) -> list[Batch]:
        """Deprecated: use ``op.batches.list()``."""
        return self.list(state=state, caller=caller, limit=limit, before_id=before_id)

    def show(
        self,
        batch_id: int,
        *,
        states: list[str] | None = None,
        after_index: int = -1,
        limit: int = 100,
    ) -> _batches.BatchDetail:
        """Progress, rate, ETA and a page of targets (with result or error)."""
        return self._session.read(
            _batches.show, batch_id, states=states, after_index=after_index, limit=limit
        )

    def live(self) -> int:
        """How many batches are not finished."""
        return self._session.read(_batches.count_live)

    def cancel(self, batch_id: int, *, reason: str | None = None) -> bool:
        """Waiting targets end at once; in-flight ones finish. False if unknown or finished."""
        return self._session.run(_batches.cancel, batch_id, reason=reason)

    def retry(self, batch_id: int, *, reason: str | None = None) -> int:
        """Requeue the batch's failed targets; returns how many."""
        return self._session.run(_batches.retry_failed, batch_id, reason=reason)

    # Last: below this definition, ``list`` in an annotation would name the method.
    def list(
        self,
        *,
        state: str | None = None,
        caller: str | None = None,
        limit: int = 50,
        before_id: int | None = None,
    ) -> list[Batch]:
        return self._session.read(
            _batches.list_batches, state=state, caller=caller, limit=limit, before_id=before_id
        )
