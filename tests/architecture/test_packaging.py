"""The layout every tool reads without tricks: two source roots, one package each.

``core/`` holds the package ``forklift`` and ``console/`` the package ``forklift_console``; the
wheel carries both whole (hatchling takes every file under each), and an editable install is a
plain path entry per root.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ROOTS = {"core": "forklift", "console": "forklift_console"}


def test_each_source_root_holds_one_package_of_its_own_name() -> None:
    for top, package in ROOTS.items():
        entries = {p.name for p in (ROOT / top).iterdir() if p.name != "__pycache__"}
        assert entries == {package}, f"{top}/ should hold only {package}/, it has {sorted(entries)}"


def test_the_wheel_lists_both_packages() -> None:
    wheel = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["hatch"]["build"][
        "targets"]["wheel"]
    assert wheel["packages"] == [f"{top}/{package}" for top, package in ROOTS.items()]


def test_every_python_folder_is_a_package() -> None:
    # A folder of modules without __init__.py would be a namespace package: importable from
    # the tree, but easy to lose from type checking and from the wheel's package list.
    for top, package in ROOTS.items():
        for py in (ROOT / top / package).rglob("*.py"):
            if "__pycache__" in py.parts:
                continue
            assert (py.parent / "__init__.py").exists(), f"{py.parent} has no __init__.py"


def test_mypy_reads_the_roots_as_they_are() -> None:
    mypy = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    assert mypy["mypy_path"] == list(ROOTS)
    assert mypy["packages"] == list(ROOTS.values())
