"""What every feature client of the Operator holds: the session its calls run on."""

from __future__ import annotations

from forklift.ops._operator_session import OperatorSession

__all__ = ["FeatureClient"]


class FeatureClient:
    """A group of operator calls on one :class:`OperatorSession` (connection, context, lock).
    Clients share their Operator's session, so a call through any of them sees the same
    connection, the same :meth:`~forklift.ops.operator.Operator.snapshot` and the same
    :meth:`~forklift.ops.operator.Operator.dry_run` rehearsal. A call that only reads goes
    through ``session.read`` (a streaming replica when one is given and fit), every other
    through ``session.run`` (the primary)."""

    __slots__ = ("_session",)

    def __init__(self, session: OperatorSession) -> None:
        self._session = session
