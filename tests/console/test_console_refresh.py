"""How a screen's loads are started and accounted for, with the worker thread's timing forced.

Under CPU load the thread that fetched a snapshot can be descheduled after the UI thread has
shown it and before the thread itself has finished. These tests hold the thread exactly there
(an event, not a sleep) and check that a reload asked for in that window still happens, so
neither the operator (a reload after an action) nor a test waiting on fresh data is left with
the old picture.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import psycopg
import pytest
from console_seed import Seeded, drive, loaded, make_app, seed, settled
from helpers import wait_until_async
from textual.pilot import Pilot

from forklift_console.app import ConsoleApp
from forklift_console.screens.base import ConsoleScreen


@pytest.fixture
def seeded(conn: psycopg.Connection[Any]) -> Seeded:
    return seed(conn)


class HeldAfterShow:
    """Wraps ``app.call_from_thread``: the first load thread to hand a snapshot to the UI is
    held after the UI has shown it, until :meth:`release`."""

    def __init__(self, app: ConsoleApp) -> None:
        self.app = app
        self.original = app.call_from_thread
        self.shown = threading.Event()
        self.go = threading.Event()
        self.held = False
        app.call_from_thread = self  # type: ignore[method-assign]

    def __call__(self, callback: Any, *args: Any, **kwargs: Any) -> Any:
        result = self.original(callback, *args, **kwargs)
        if not self.held and isinstance(getattr(callback, "__self__", None), ConsoleScreen):
            self.held = True
            self.shown.set()
            self.go.wait(timeout=30)
        return result

    def release(self) -> None:
        self.go.set()


def test_a_reload_asked_for_while_the_last_load_is_finishing_still_loads(
    dsn: str, seeded: Seeded
) -> None:
    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        screen = await settled(app)
        hold = HeldAfterShow(app)
        screen.reload()
        await wait_until_async(hold.shown.is_set, timeout=20)
        # The snapshot is on screen; its thread has not finished yet. Ask for fresh data now.
        waiting = asyncio.ensure_future(loaded(app, screen))
        await pilot.pause()
        hold.release()
        await waiting  # the old code dropped this reload: "did not load (waited 20s)"

    drive(make_app(dsn), scenario)


def test_a_reload_during_a_load_runs_once_more_after_it(dsn: str, seeded: Seeded) -> None:
    """An action's reload while a tick's load is reading: the screen must fetch again after
    that load, or it shows what was read before the action."""

    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        screen = await settled(app)
        reading, go = threading.Event(), threading.Event()
        fetch = screen.fetch

        def held_fetch(op: Any) -> Any:
            if not reading.is_set():
                reading.set()
                go.wait(timeout=30)
            return fetch(op)

        screen.fetch = held_fetch  # type: ignore[method-assign]
        before = screen.loads
        screen.reload()
        await wait_until_async(reading.is_set, timeout=20)
        screen.reload()
        screen.reload()  # asked twice while busy: one more load, not two
        go.set()
        await wait_until_async(
            lambda: screen.loads >= before + 2 and not screen._loading, timeout=20
        )
        await pilot.pause()
        assert screen.loads == before + 2

    drive(make_app(dsn), scenario)
