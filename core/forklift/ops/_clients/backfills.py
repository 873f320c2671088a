"""``op.backfills``: backfills and their runs; start, pause, resume, cancel one, set or scale
its rate."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from forklift.ops import backfills as _backfills
from forklift.ops._clients.client import FeatureClient

if TYPE_CHECKING:
    from forklift._features.backfill.backfill import Backfill

__all__ = ["BackfillsClient"]


class BackfillsClient(FeatureClient):
    __slots__ = ()

    def __call__(self) -> list[_backfills.BackfillInfo]:
        """Deprecated: use ``op.backfills.list()``."""
        return self.list()

    def show(self, name: str) -> _backfills.BackfillInfo:
        return self._session.read(_backfills.get_backfill, name)

    def runs(self, name: str, limit: int = 10) -> list[_backfills.BackfillInfo]:
        """The backfill's runs, newest first."""
        return self._session.read(_backfills.history, name, limit)

    def start(
        self,
        name: str,
        *,
        from_cursor: Any = None,
        rate: float | None = None,
        force: bool = False,
        definition: Backfill | None = None,
        reason: str | None = None,
    ) -> _backfills.StartResult:
        """See :func:`forklift.ops.backfills.start`."""
        return self._session.run(_backfills.start, name, from_cursor=from_cursor, rate=rate,
                                 force=force, definition=definition, reason=reason)

    def pause(self, name: str, *, reason: str | None = None) -> _backfills.BackfillInfo:
        return self._session.run(_backfills.pause, name, reason=reason)

    def resume(self, name: str, *, reason: str | None = None) -> _backfills.BackfillInfo:
        return self._session.run(_backfills.resume, name, reason=reason)

    def cancel(self, name: str, *, reason: str | None = None) -> _backfills.BackfillInfo:
        return self._session.run(_backfills.cancel, name, reason=reason)

    def set_rate(
        self, name: str, rate: float, *, reason: str | None = None
    ) -> _backfills.BackfillInfo:
        return self._session.run(_backfills.set_rate, name, rate, reason=reason)

    def scale_rate(
        self, name: str, factor: float, *, reason: str | None = None
    ) -> _backfills.BackfillInfo:
        """Multiply the live run's rate by ``factor``, from its value when the change lands."""
        return self._session.run(_backfills.scale_rate, name, factor, reason=reason)

    # Last: below this definition, ``list`` in an annotation would name the method.
    def list(self) -> list[_backfills.BackfillInfo]:
        return self._session.read(_backfills.list_backfills)
