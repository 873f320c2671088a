"""Snapshots of every console screen at 120x36 and 80x24, dialogs, read-only and NO_COLOR.

Screens 7 to 9 (batches, schedules, backfills) have scenes of their own over a database that
also holds :func:`console_seed.seed_long_runs`' batches, schedules and backfills.

Deterministic: a fresh database (fixed ids) seeded relative to a frozen instant, the console's
clock frozen at that instant, and the database's ``now()`` frozen there too, so the server's
windows, ages and countdowns agree with it. Refresh ticks are an hour apart; each snapshot is
taken once its screen has loaded. (The docs' screenshots are of the live demo instead:
scripts/screenshots.py.) After a deliberate change: ``pytest --snapshot-update``, then look at
the SVGs before committing them.
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from console_seed import SCENES, Scene, Seeded, freeze_db_clock, seed, seed_long_runs


@pytest.fixture
def frozen(dsn: str, conn: psycopg.Connection[Any]) -> tuple[str, Seeded]:
    seeded = seed(conn)
    freeze_db_clock(conn)
    return dsn, seeded


@pytest.fixture
def frozen_long_runs(dsn: str, conn: psycopg.Connection[Any]) -> tuple[str, Seeded]:
    seeded = seed(conn)
    seeded.ids.update(seed_long_runs(conn).ids)
    freeze_db_clock(conn)
    return dsn, seeded


def take(snap_compare: Any, dsn: str, seeded: Seeded, scene: Scene,
         monkeypatch: pytest.MonkeyPatch) -> bool:
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

    return bool(snap_compare(scene.app(dsn), terminal_size=scene.size, run_before=run_before))


@pytest.mark.parametrize("scene", SCENES, ids=[s.name for s in SCENES])
def test_scene(
    snap_compare: Any, frozen: tuple[str, Seeded], scene: Scene, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert take(snap_compare, *frozen, scene, monkeypatch)


LONG_RUN_SCENES: tuple[Scene, ...] = (
    Scene("batches", "batches", alt="Batches: each batch's progress bar of completed, failed"
          " and remaining targets, its rate over the last minute and the ETA; below, the"
          " highlighted batch's targets that need a look"),
    Scene("batches-80x24", "batches", (80, 24)),
    Scene("batches-no-color", "batches", no_color=True),
    Scene("batches-cancel", "batches", keys=("C",), alt="Cancelling a batch (C): the dialog"
          " says how many waiting targets end now and how many running ones finish, with the"
          " CLI command"),
    Scene("schedules", "schedules", highlight="sync.crm", alt="Schedules: each cron schedule"
          " with its zone, next and last run and how that run ended; a paused one with who"
          " paused it and why"),
    Scene("schedules-80x24", "schedules", (80, 24), highlight="sync.crm"),
    Scene("schedules-no-color", "schedules", no_color=True),
    Scene("backfills", "backfills", highlight="reindex_orders", alt="Backfills: progress"
          " against the estimate, the rate a run is held to, its pace with a sparkline of the"
          " last minute, and the ETA at that pace"),
    Scene("backfills-80x24", "backfills", (80, 24), highlight="reindex_orders"),
    Scene("backfills-no-color", "backfills", highlight="reindex_orders", no_color=True),
)


@pytest.mark.parametrize("scene", LONG_RUN_SCENES, ids=[s.name for s in LONG_RUN_SCENES])
def test_long_run_scene(
    snap_compare: Any, frozen_long_runs: tuple[str, Seeded], scene: Scene,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert take(snap_compare, *frozen_long_runs, scene, monkeypatch)
