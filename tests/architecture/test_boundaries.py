"""``core/`` (the ``forklift`` package) never imports the console or textual.

Checked twice: statically, every import statement under core/; and at run time, importing
every core module in a fresh interpreter leaves no console or textual module loaded.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

CORE = Path(__file__).resolve().parents[2] / "core" / "forklift"
FORBIDDEN = ("forklift_console", "textual")


def _forbidden(module: str) -> bool:
    return any(module == f or module.startswith(f + ".") for f in FORBIDDEN)


def imported_modules(source: str, package: list[str]) -> list[str]:
    """Absolute names of what ``source`` imports, relative imports resolved in ``package``."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1])
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            found.append(module)
            found.extend(f"{module}.{alias.name}" for alias in node.names)
    return found


def test_no_core_file_imports_the_console_or_textual() -> None:
    files = sorted(CORE.rglob("*.py"))
    assert len(files) > 10
    offenders = {}
    for f in files:
        package = ["forklift", *f.relative_to(CORE).parent.parts]
        bad = [m for m in imported_modules(f.read_text("utf-8"), package) if _forbidden(m)]
        if bad:
            offenders[str(f.relative_to(CORE))] = bad
    assert offenders == {}


def test_the_checker_sees_every_way_of_writing_the_import() -> None:
    # If the static check missed a spelling, the test above would prove nothing.
    for source in (
        "import textual",
        "import textual.widgets as w",
        "from textual.app import App",
        "import forklift_console",
        "from forklift_console.app import ConsoleApp",
        "from forklift_console import cli",
        "def f():\n    import textual\n",
    ):
        assert any(_forbidden(m) for m in imported_modules(source, ["forklift", "ops"])), source
    for source in ("import textualize", "import forklift_consoles", "from . import console"):
        assert not any(_forbidden(m) for m in imported_modules(source, ["forklift", "ops"])), source


def test_importing_all_of_core_loads_no_console_or_textual() -> None:
    script = """
import importlib, json, pkgutil, sys
import forklift
for info in pkgutil.walk_packages(forklift.__path__, "forklift."):
    if not info.name.endswith(".__main__"):
        importlib.import_module(info.name)
print(json.dumps(sorted(sys.modules)))
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    loaded = json.loads(done.stdout)
    assert "forklift._worker" in loaded and "forklift.ops" in loaded
    assert [m for m in loaded if _forbidden(m)] == []


FEATURES = ("_features/batches", "_jobs/batch", "_features/cron", "_base/calendar",
            "_features/backfill/backfill", "_features/backfill/run")


def _imports_of(name: str, *, top_level_only: bool = False) -> list[str]:
    source = (CORE / f"{name}.py").read_text("utf-8")
    if not top_level_only:
        return imported_modules(source, ["forklift"])
    tree = ast.parse(source)
    top = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    return imported_modules("\n".join(ast.unparse(n) for n in top), ["forklift"])


def test_feature_modules_depend_on_a_protocol_not_on_the_app() -> None:
    # Batches, cron and backfills see a Host (forklift._features.host), never Forklift or JobKind, so
    # neither side imports the other (not even for type checking).
    for feature in FEATURES:
        bad = [m for m in _imports_of(feature)
               if m.startswith(("forklift._app.app", "forklift._app.kind"))]
        assert bad == [], feature


def test_the_app_loads_features_only_when_they_are_used() -> None:
    top = _imports_of("_app/app", top_level_only=True)
    dotted = tuple("forklift." + f.replace("/", ".") for f in FEATURES)
    assert [m for m in top if m.startswith(dotted)] == []


def test_shared_sql_facts_are_defined_once() -> None:
    # The live states and the held-batch sentinel are spelt out only in forklift._jobs.job.
    layers = ("_base", "_db", "_jobs", "_features", "_features/backfill", "_app")
    for path in sorted(p for layer in layers for p in (CORE / layer).glob("*.py")):
        if path.relative_to(CORE).as_posix() == "_jobs/job.py":
            continue
        text = path.read_text("utf-8")
        assert "'scheduled', 'available', 'running', 'retryable'" not in text, path.name
        assert "datetime(9999" not in text, path.name
