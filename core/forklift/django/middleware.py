"""Attribution for a Django site: the user a request is served for enqueues its tasks.

Add ``"forklift.django.middleware.EnqueuedByMiddleware"`` to ``MIDDLEWARE`` after
``AuthenticationMiddleware``: while a request for a signed-in user is served, every task it
enqueues into a forklift backend names ``user:<pk>`` as its ``enqueued_by`` (``jobs list
--enqueued-by user:42``, the console's ``enqueued_by:`` filter). Attribution for the people
reading a job, never authority: forklift checks nothing and grants nothing by it. A request
served for nobody (anonymous) names nobody. Subclass it and override :meth:`actor_of` to name
users another way.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack
from typing import Any

from forklift._base.errors import InvalidName
from forklift._base.names import check_name
from forklift.django import ForkliftBackend
from forklift.django._compat import task_backends

__all__ = ["EnqueuedByMiddleware"]


class EnqueuedByMiddleware:
    """Opens an ``acting_as`` scope on every forklift backend's app for the request."""

    sync_capable = True
    async_capable = False  # Django adapts it on an async stack; the scope follows the context

    def __init__(self, get_response: Callable[[Any], Any]) -> None:
        self.get_response = get_response

    def __call__(self, request: Any) -> Any:
        actor = self.actor_of(request)
        if actor is None:
            return self.get_response(request)
        try:
            check_name(actor, "enqueued_by")
        except InvalidName:
            # an actor that cannot be stored must not fail the request it only attributes
            return self.get_response(request)
        with ExitStack() as scopes:
            for backend in task_backends.all():
                if isinstance(backend, ForkliftBackend):
                    scopes.enter_context(backend.app.acting_as(actor))
            return self.get_response(request)

    def actor_of(self, request: Any) -> str | None:
        """``user:<pk>`` for a signed-in user, else None."""
        user = getattr(request, "user", None)
        if user is None or not getattr(user, "is_authenticated", False):
            return None
        pk = getattr(user, "pk", None)
        return None if pk is None else f"user:{pk}"
