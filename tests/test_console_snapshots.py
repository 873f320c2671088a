"""Snapshots of every console screen at 120x36 and 80x24, dialogs, read-only and NO_COLOR.

Deterministic: a fresh database (fixed ids) seeded relative to a frozen instant, the console's
clock frozen at that instant, and the database's ``now()`` frozen there too, so the server's
windows, ages and countdowns agree with it. Refresh ticks are an hour apart; each snapshot is
taken once its screen has loaded. The scenes are the README's screenshots too
(scripts/screenshots.py). After a deliberate change: ``pytest --snapshot-update``, then look at
the SVGs before committing them.
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from console_seed import SCENES, Scene, Seeded, freeze_db_clock, seed


@pytest.fixture
def frozen(dsn: str, conn: psycopg.Connection[Any]) -> tuple[str, Seeded]:
    seeded = seed(conn)
    freeze_db_clock(conn)
    return dsn, seeded


@pytest.mark.parametrize("scene", SCENES, ids=[s.name for s in SCENES])
def test_scene(
    snap_compare: Any, frozen: tuple[str, Seeded], scene: Scene, monkeypatch: pytest.MonkeyPatch
) -> None:
    dsn, seeded = frozen
    if scene.no_color:
        monkeypatch.setenv("NO_COLOR", "1")
    before = scene.before(seeded)

    async def run_before(pilot: Any) -> None:
        from textual.widgets import Input

        await before(pilot)
        # A dialog's text cursor blinks on a timer (the dead-requeue scenes failed now and
        # then under load): the picture must not depend on when it is taken.
        for field in pilot.app.screen.query(Input):
            field.cursor_blink = False
        await pilot.pause()

    assert snap_compare(scene.app(dsn), terminal_size=scene.size, run_before=run_before)
