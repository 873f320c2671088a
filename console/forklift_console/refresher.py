"""The console's refresh loop: the tick that asks the screen in front for a new snapshot, the
connection status every header shows, and the keys that freeze it or change its rate. The app
owns one :class:`Refresher` and starts it on mount."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from textual.app import App
from textual.screen import ModalScreen, Screen
from textual.timer import Timer

from forklift_console.backend import CONNECTION_ERRORS, describe_error
from forklift_console.screens.base import ConsoleScreen
from forklift_console.widgets.header import Status

log = logging.getLogger("forklift_console")

#: Refresh intervals ``+`` and ``-`` step through, in seconds.
RATES: tuple[float, ...] = (0.5, 1.0, 2.0, 5.0, 10.0, 30.0)


class Refresher:
    """Holds the :class:`Status` and the tick. ``screens`` lists every screen of every mode's
    stack (a screen out of sight keeps its header current for when it comes back)."""

    def __init__(
        self,
        app: App[Any],
        status: Status,
        *,
        now: Callable[[], datetime],
        screens: Callable[[], Iterable[Screen[Any]]],
    ) -> None:
        self._app = app
        self.status = status
        self._now = now
        self._screens = screens
        self._tick: Timer | None = None

    def start(self) -> None:
        """The refresh tick at the status's interval and a repaint of the ages every second."""
        self._tick = self._app.set_interval(self.status.interval, self.tick)
        self._app.set_interval(1.0, self.repaint)

    # -- the tick and the status line -----------------------------------------------------------
    def tick(self) -> None:
        app = self._app
        if not app.is_running:
            return  # shutting down: Textual closes the screens before it stops the timers
        screen = app.screen
        if self.status.frozen or isinstance(screen, ModalScreen):
            return  # a dialog is open or the operator froze the picture: hold still
        if isinstance(screen, ConsoleScreen):
            screen.tick()

    def repaint(self) -> None:
        if not self._app.is_running:
            return  # shutting down: its screens are closing
        for screen in self._live_screens():
            screen.paint_chrome()

    def _live_screens(self) -> Iterable[ConsoleScreen[Any]]:
        for screen in self._screens():
            if isinstance(screen, ConsoleScreen) and screen.is_attached:
                yield screen

    def _set_status(self, **changes: Any) -> None:
        self.status = self.status.but(**changes)
        self.repaint()

    def fetch_ok(self) -> None:
        self._set_status(
            connection="connected", updated_at=self._now(), failing_since=None, error=None
        )

    def fetch_failed(self, exc: BaseException) -> None:
        log.warning("refresh failed: %s", exc, exc_info=not isinstance(exc, CONNECTION_ERRORS))
        offline = isinstance(exc, CONNECTION_ERRORS)
        self._set_status(
            connection="offline" if offline else self.status.connection,
            failing_since=self.status.failing_since or self._now(),
            error=describe_error(exc),
        )

    # -- the operator's keys --------------------------------------------------------------------
    def freeze(self) -> None:
        frozen = not self.status.frozen
        self._set_status(frozen=frozen)
        self._app.notify("refresh frozen: press f to resume" if frozen else "refresh resumed")
        if not frozen:
            self.tick()

    def step_rate(self, step: int) -> None:
        """The next rate in :data:`RATES`: ``-1`` faster, ``+1`` slower."""
        current = self.status.interval
        index = min(range(len(RATES)), key=lambda i: abs(RATES[i] - current))
        rate = RATES[max(0, min(len(RATES) - 1, index + step))]
        if self._tick is not None:
            self._tick.stop()
        self._tick = self._app.set_interval(rate, self.tick)
        self._set_status(interval=rate)
