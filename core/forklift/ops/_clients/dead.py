"""``op.dead``: dead jobs grouped by kind, error code and message shape; requeue or delete a
whole group (dry run and cap as for bulk actions)."""

from __future__ import annotations

from forklift.ops import dead as _dead
from forklift.ops import limits
from forklift.ops._clients.client import FeatureClient
from forklift.ops.actions import BulkReport

__all__ = ["DeadClient"]


class DeadClient(FeatureClient):
    __slots__ = ()

    def groups(
        self, *, queue: str | None = None, kind: str | None = None, limit: int = 100
    ) -> _dead.DeadGroups:
        """Every dead job grouped by kind, error code and message shape (all of them)."""
        return self._session.read(_dead.groups, queue=queue, kind=kind, limit=limit)

    def group(self, group: str) -> _dead.DeadGroup:
        return self._session.read(_dead.get_group, group)

    def requeue_group(
        self,
        group: str,
        *,
        dry_run: bool = False,
        cap: int = limits.DEFAULT_CAP,
        batch_size: int = limits.DEFAULT_BATCH,
        reason: str | None = None,
    ) -> BulkReport:
        return self._session.run(_dead.act_on_group, "requeue", group, dry_run=dry_run,
                                 cap=cap, batch_size=batch_size, reason=reason)

    def delete_group(
        self,
        group: str,
        *,
        dry_run: bool = False,
        cap: int = limits.DEFAULT_CAP,
        batch_size: int = limits.DEFAULT_BATCH,
        reason: str | None = None,
    ) -> BulkReport:
        return self._session.run(_dead.act_on_group, "delete", group, dry_run=dry_run,
                                 cap=cap, batch_size=batch_size, reason=reason)
