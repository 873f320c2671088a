"""The console's refresh loop: the tick that asks the screen in front for a new snapshot, the
connection status every header shows, and the keys that freeze it or change its rate. A mixin
of :class:`forklift_console.app.ConsoleApp`, as :mod:`forklift_console.app_actions` is."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from textual.screen import ModalScreen
from textual.timer import Timer

from forklift_console.app_actions import AppMixin, describe_error
from forklift_console.backend import CONNECTION_ERRORS
from forklift_console.screens.base import ConsoleScreen
from forklift_console.widgets.header import Status

if TYPE_CHECKING:
    from datetime import datetime

log = logging.getLogger("forklift_console")

#: Refresh intervals ``+`` and ``-`` step through, in seconds.
RATES: tuple[float, ...] = (0.5, 1.0, 2.0, 5.0, 10.0, 30.0)


class ConsoleRefresh(AppMixin):
    if TYPE_CHECKING:
        status: Status
        _tick: Timer | None

        def now(self) -> datetime: ...

    # -- the tick and the status line -----------------------------------------------------------
    def _set_status(self, **changes: Any) -> None:
        self.status = self.status.but(**changes)
        self._repaint()

    def _repaint(self) -> None:
        for screen in self._live_screens():
            screen.paint_chrome()

    def _live_screens(self) -> Iterable[ConsoleScreen[Any]]:
        for stack in self._screen_stacks.values():
            for screen in stack:
                if isinstance(screen, ConsoleScreen) and screen.is_attached:
                    yield screen

    def _refresh_tick(self) -> None:
        if not self.is_running:
            return  # shutting down: Textual closes the screens before it stops the timers
        screen = self.screen
        if self.status.frozen or isinstance(screen, ModalScreen):
            return  # a dialog is open or the operator froze the picture: hold still
        if isinstance(screen, ConsoleScreen):
            screen.tick()

    def fetch_ok(self) -> None:
        self._set_status(
            connection="connected", updated_at=self.now(), failing_since=None, error=None
        )

    def fetch_failed(self, exc: BaseException) -> None:
        log.warning("refresh failed: %s", exc, exc_info=not isinstance(exc, CONNECTION_ERRORS))
        offline = isinstance(exc, CONNECTION_ERRORS)
        self._set_status(
            connection="offline" if offline else self.status.connection,
            failing_since=self.status.failing_since or self.now(),
            error=describe_error(exc),
        )

    def action_freeze(self) -> None:
        frozen = not self.status.frozen
        self._set_status(frozen=frozen)
        self.notify("refresh frozen: press f to resume" if frozen else "refresh resumed")
        if not frozen:
            self._refresh_tick()

    def _set_rate(self, step: int) -> None:
        current = self.status.interval
        index = min(range(len(RATES)), key=lambda i: abs(RATES[i] - current))
        rate = RATES[max(0, min(len(RATES) - 1, index + step))]
        if self._tick is not None:
            self._tick.stop()
        self._tick = self.set_interval(rate, self._refresh_tick)
        self._set_status(interval=rate)

    def action_faster(self) -> None:
        self._set_rate(-1)

    def action_slower(self) -> None:
        self._set_rate(+1)
