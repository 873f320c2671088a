"""Who is enqueueing, for a scope of code: the ``enqueued_by`` of the jobs enqueued in it.

A web request, a management command or an import script names its caller once
(``with app.acting_as("user:42"): ...``) instead of passing ``enqueued_by=`` to every enqueue
below it, however deep. The scope is a :class:`contextvars.ContextVar`: it holds for the
thread or asyncio task that entered it (and the tasks it starts), never for another request
served beside it. An enqueue's own ``enqueued_by=`` wins over the scope. It is attribution
for the people reading a job, never authority: forklift checks nothing and grants nothing by
it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from forklift._base.names import check_name

__all__ = ["Actor"]


class Actor:
    """One app's actor scopes: :meth:`acting_as` opens one, :meth:`current` reads it.

    A variable of its own per app, so two apps in one process attribute independently; apps
    live as long as their process, which is what a context variable wants.
    """

    __slots__ = ("_var",)

    def __init__(self) -> None:
        self._var: ContextVar[str | None] = ContextVar("forklift_enqueued_by", default=None)

    def current(self) -> str | None:
        """The actor of the innermost open scope, or None."""
        return self._var.get()

    @contextmanager
    def acting_as(self, actor: str | None) -> Iterator[None]:
        """Enqueues inside name ``actor`` as their ``enqueued_by`` (None: they name nobody).

        Checked like every name when the scope opens (InvalidName, field ``enqueued_by``), so a
        bad actor fails where it is set, not at some enqueue below it.
        """
        value = None if actor is None else check_name(actor, "enqueued_by")
        token = self._var.set(value)
        try:
            yield
        finally:
            self._var.reset(token)
