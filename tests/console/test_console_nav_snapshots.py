"""Snapshots of what navigation and the keys changed, at 80x24 and at a wide size with
NO_COLOR: the help (every screen named, the keys of the focused list), the tab bar on a screen
without a number key, the ``:`` prompt with keys typed ahead, Flow control and Workflows. Same
seeded database and frozen clock as test_console_snapshots."""

from __future__ import annotations

from typing import Any

import pytest
from console_seed import Scene, Seeded
from test_console_snapshots import frozen, take

WIDE = (160, 40)

NAV_SCENES: tuple[Scene, ...] = (
    Scene("help-80x24", "queues", (80, 24), keys=("question_mark",)),
    Scene("help-wide-no-color", "queues", WIDE, keys=("question_mark",), no_color=True),
    Scene("goto-typed-80x24", "overview", (80, 24), keys=("colon", "w", "o", "r")),
    Scene("flow-80x24", "flow", (80, 24)),
    Scene("flow-wide-no-color", "flow", WIDE, no_color=True),
    Scene("workflows-80x24", "workflows", (80, 24)),
    Scene("audit-wide-no-color", "audit", WIDE, no_color=True),
    Scene("jobs-wide-no-color", "jobs", WIDE, no_color=True),
)

__all__ = ["frozen"]  # the fixture, shared with test_console_snapshots


@pytest.mark.parametrize("scene", NAV_SCENES, ids=[s.name for s in NAV_SCENES])
def test_nav_scene(
    snap_compare: Any, frozen: tuple[str, Seeded], scene: Scene, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert take(snap_compare, *frozen, scene, monkeypatch)
