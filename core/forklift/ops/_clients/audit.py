"""``op.audit``: the audit log of every operator action, newest first."""

from __future__ import annotations

from datetime import datetime

from forklift.ops import audit as _audit
from forklift.ops._clients.client import FeatureClient

__all__ = ["AuditClient"]


class AuditClient(FeatureClient):
    __slots__ = ()

    def __call__(
        self,
        *,
        limit: int = 50,
        actor: str | None = None,
        action: str | None = None,
        since: str | datetime | None = None,
        before_id: int | None = None,
    ) -> list[_audit.AuditEntry]:
        """Deprecated: use ``op.audit.list()``."""
        return self.list(limit=limit, actor=actor, action=action, since=since,
                         before_id=before_id)

    # Last: below this definition, ``list`` in an annotation would name the method.
    def list(
        self,
        *,
        limit: int = 50,
        actor: str | None = None,
        action: str | None = None,
        since: str | datetime | None = None,
        before_id: int | None = None,
    ) -> list[_audit.AuditEntry]:
        return self._session.read(
            _audit.entries, limit=limit, actor=actor, action=action, since=since,
            before_id=before_id,
        )
