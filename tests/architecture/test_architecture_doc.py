"""docs/architecture.md names only files that exist, and every layer folder of the code."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"
BASES = (ROOT, ROOT / "core" / "forklift", ROOT / "console", ROOT / "console" / "forklift_console",
         ROOT / "docs")


def named_files(text: str) -> set[str]:
    """Every `path` in backquotes that ends like a file the repository holds."""
    return {m for m in re.findall(r"`([\w./-]+\.(?:py|sql|md|toml))`", text)
            if not m.startswith(("http", "."))}


def exists(name: str) -> bool:
    if any((base / name).exists() for base in BASES):
        return True
    # A bare name in a table row that names its folder once ("`_worker/attempts.py`,
    # `running.py`"): it must be a file of forklift or the console somewhere.
    return "/" not in name and any(p.name == name for base in BASES[1:4:2]
                                   for p in base.rglob(name))


def test_every_file_the_map_names_exists() -> None:
    names = named_files(DOC.read_text("utf-8"))
    assert len(names) > 30
    assert sorted(n for n in names if not exists(n)) == []


def test_the_check_sees_a_missing_file() -> None:
    assert not exists("_worker/claim_round.py") and not exists("nothere.py")
    assert exists("_worker/producer.py") and exists("running.py")


def test_the_map_names_every_layer_folder() -> None:
    text = DOC.read_text("utf-8")
    layers = [p.name for p in (ROOT / "core" / "forklift").iterdir()
              if p.is_dir() and (p / "__init__.py").exists()]
    assert sorted(name for name in layers if name not in text) == []
