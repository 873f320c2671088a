"""What a screen needs of the app that hosts it, and no more.

Screens and widgets are written against :class:`ConsoleHost`, never against the app class: the
app imports every screen, so a screen that imported the app would close a circle. The app is a
``ConsoleHost`` by shape (the protocol is structural); ``forklift_console.app`` has mypy check
that it stays one.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, Protocol

from forklift.ops import JobFilter
from forklift_console.backend import Backend
from forklift_console.plan import Plan
from forklift_console.widgets.header import Status


class DemoControls(Protocol):
    """What ``forklift demo`` lets the console do beyond the operator API: drain one of its
    workers (a SIGTERM to its process), and hold a transaction open that pins the xmin
    horizon (press again to let it go), so the on-call tasks can be rehearsed."""

    def drain(self, worker_id: str) -> str: ...

    def owns(self, worker_id: str) -> bool: ...

    def pin_horizon(self) -> str: ...


class ConsoleHost(Protocol):
    """The app as its screens see it: the database, the clock, the shared status, actions
    confirmed and run on the screens' behalf, and navigation."""

    # -- the database and the picture of it ------------------------------------------------------
    @property
    def backend(self) -> Backend: ...

    @property
    def status(self) -> Status: ...

    @property
    def read_only(self) -> bool: ...

    @property
    def last_command(self) -> str | None: ...

    @property
    def demo(self) -> DemoControls | None: ...

    def now(self) -> datetime: ...

    def fetch_ok(self) -> None:
        """A screen's load arrived: the header says connected and fresh."""

    def fetch_failed(self, exc: BaseException) -> None:
        """A screen's load failed: the header says so and the old data stays up."""

    # -- actions --------------------------------------------------------------------------------
    def propose(self, plan: Plan, after: Callable[[], None] | None = None) -> None:
        """Confirm a plan with the operator, then run it and report."""

    def propose_bulk(
        self, action: str, flt: JobFilter, described: str, after: Callable[[], None] | None = None
    ) -> None:
        """An action on every job matching a filter: a dry run first, then a typed count."""

    def propose_checked(
        self,
        verb: str,
        check: Callable[[Any], Any],
        plan_of: Callable[[Any], Plan | str],
        after: Callable[[], None] | None = None,
    ) -> None:
        """Ask the operator API first, then confirm the plan built from its answer."""

    # -- navigation ------------------------------------------------------------------------------
    def action_go(self, mode: str) -> None:
        """Show the screen of this mode."""

    def show_jobs(self, text: str, *, came_from: str | None = None) -> None:
        """The jobs screen filtered by ``text``; esc there comes back to ``came_from``."""

    def show_queue(self, name: str) -> None:
        """The Queues screen with the cursor on queue ``name``."""
