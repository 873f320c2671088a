"""The wheel must carry every package: the package-dir mapping lists them by hand."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_every_python_folder_is_a_listed_package() -> None:
    setup = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(setup["packages"])
    mapping = {"core": "forklift", "console": "forklift.console"}
    found = set()
    for top, name in mapping.items():
        for init in (ROOT / top).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / top).parts
            found.add(".".join((name, *rel)))
    assert found == listed, f"pyproject lists {sorted(listed)}, the tree has {sorted(found)}"
    assert setup["package-dir"] == {v: k for k, v in mapping.items()}
