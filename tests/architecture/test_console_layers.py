"""The console's structure, read from its source (every import statement at any depth, under
TYPE_CHECKING and inside functions too).

The app imports every screen, so a screen or widget that imported the app would close a
circle: screens see the app as a :class:`forklift_console.host.ConsoleHost`. The console and
the CLI are siblings: the console imports no ``forklift.cli`` module. And no console module
reaches itself again by following its own ``forklift_console`` imports.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "console" / "forklift_console"

#: Modules that make the app; no screen or widget may import them.
APP_MODULES = ("forklift_console.app", "forklift_console.actions", "forklift_console.refresher")


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path, package: str = "") -> set[str]:
    """Every module ``path`` imports (``from a import b`` counts as ``a`` and ``a.b``); a
    relative import is read from ``package``, the one ``path`` is in."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            found.add(module)
            found.update(f"{module}.{a.name}" for a in node.names)
    return found


def sources() -> dict[str, set[str]]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        name = module_name(path)
        out[name] = imports(path, name if path.name == "__init__.py" else name.rpartition(".")[0])
    return out


def reaches(module: str, graph: dict[str, set[str]]) -> bool:
    """Whether following ``module``'s console imports leads back to it."""
    seen: set[str] = set()
    todo = [m for m in graph[module] if m in graph]
    while todo:
        current = todo.pop()
        if current == module:
            return True
        if current in seen:
            continue
        seen.add(current)
        todo.extend(m for m in graph[current] if m in graph)
    return False


def cycles(graph: dict[str, set[str]]) -> list[str]:
    return sorted(m for m in graph if reaches(m, graph))


def test_no_screen_or_widget_imports_the_app() -> None:
    bad = {
        name: sorted(m for m in found if m.startswith(APP_MODULES))
        for name, found in sources().items()
        if name.startswith(("forklift_console.screens", "forklift_console.widgets"))
    }
    assert {k: v for k, v in bad.items() if v} == {}


def test_the_console_imports_no_cli_module() -> None:
    bad = {
        name: sorted(m for m in found if m == "forklift.cli" or m.startswith("forklift.cli."))
        for name, found in sources().items()
    }
    assert {k: v for k, v in bad.items() if v} == {}


def test_no_console_module_imports_itself_in_a_circle() -> None:
    assert cycles(sources()) == []


def test_the_circle_check_sees_a_circle() -> None:
    graph = {"a": {"b"}, "b": {"c", "os"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == ["a", "b", "c"]


def test_the_scan_sees_every_form_of_import(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "from typing import TYPE_CHECKING\n"
        "import forklift.cli.kit\n"
        "if TYPE_CHECKING:\n    from forklift_console.app import ConsoleApp\n"
        "def f():\n    from forklift_console.widgets import table\n"
    )
    found = imports(sample)
    assert {"forklift.cli.kit", "forklift_console.app", "forklift_console.app.ConsoleApp",
            "forklift_console.widgets.table"} <= found
