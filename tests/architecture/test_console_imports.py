"""The CLI and the console use only forklift's public API: top-level names and forklift.ops.

Internal modules (``forklift._*``) may change shape at any commit; what the CLI and the console
need is exported from ``forklift`` or offered by a public ``forklift.ops`` module. Read from the
source (every import statement, at any depth of the module), so a late import in a function
counts too.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CONSOLE = ROOT / "console"

#: Console modules still switching to the public API (their owner is on it). Each entry must
#: still offend: the list only shrinks.
PENDING: frozenset[str] = frozenset()


def private_imports(path: Path) -> list[str]:
    """``forklift._x`` modules that ``path`` imports, as ``line: module``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
            if node.module == "forklift":
                names += [f"forklift.{a.name}" for a in node.names]
        for name in names:
            parts = name.split(".")
            if parts[0] == "forklift" and any(p.startswith("_") for p in parts[1:]):
                found.append(f"{node.lineno}: {name}")
    return found


def offenders() -> dict[str, list[str]]:
    out = {}
    for path in sorted(CONSOLE.rglob("*.py")):
        hits = private_imports(path)
        if hits:
            out[path.relative_to(CONSOLE).as_posix()] = hits
    return out


def test_no_console_module_imports_a_private_forklift_module() -> None:
    bad = {k: v for k, v in offenders().items() if k not in PENDING}
    assert bad == {}, f"use forklift's top-level names or forklift.ops instead: {bad}"


def test_the_pending_list_only_names_modules_that_still_offend() -> None:
    stale = sorted(PENDING - set(offenders()))
    assert stale == [], f"these switched to the public API: remove them from PENDING: {stale}"


def test_the_scan_sees_every_form_of_import(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import forklift._db.connections\n"
        "from forklift._base.errors import X\n"
        "from forklift._db import config as c, Worker\n"
        "def f():\n    from forklift.ops._hidden import y\n"
        "from forklift.ops import Operator\n"
        "import forklift\n"
    )
    assert private_imports(sample) == [
        "1: forklift._db.connections", "2: forklift._base.errors", "3: forklift._db", "5: forklift.ops._hidden",
    ]
