"""The worker's services take narrow inputs: only the faces that build a worker import it.

Read from the source (ast), so an import under TYPE_CHECKING or inside a function counts too.
A service is built from the worker's configuration, its shared state and the collaborators it
calls, each handed over by name: no constructor takes the ``Worker`` itself.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CORE = ROOT / "core" / "forklift"
CONSOLE = ROOT / "console" / "forklift_console"

#: The modules that may import the Worker: the worker package's face and its process runner,
#: and the faces above the worker layer that construct one.
ALLOWED = {
    "forklift/__init__.py",
    "forklift/_worker/__init__.py",
    "forklift/_worker/run.py",
    "forklift_console/demo.py",
    "forklift_console/demo_worker.py",  # the process each of the demo's workers runs
}
ALLOWED_PACKAGES = ("forklift/testing/", "forklift/django/", "forklift/cli/")

#: Where the worker's services live: the worker package and the features that serve it.
SERVICES = [CORE / "_worker", CORE / "_features" / "flow", CORE / "_features" / "durable"]


def _module(package: list[str], node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = ".".join(package[: len(package) - node.level + 1])
    return f"{base}.{node.module}" if node.module else base


def imports_worker(source: str, package: list[str]) -> bool:
    """Whether ``source`` imports the Worker class or the module that defines it."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            if any(a.name == "forklift._worker.worker" for a in node.names):
                return True
        elif isinstance(node, ast.ImportFrom):
            module = _module(package, node)
            if module == "forklift._worker.worker":
                return True
            if module == "forklift._worker" and any(a.name == "worker" for a in node.names):
                return True
            if module in ("forklift", "forklift._worker") and any(
                    a.name == "Worker" for a in node.names):
                return True
    return False


def _sources() -> list[tuple[str, Path, list[str]]]:
    out = []
    for top in (CORE, CONSOLE):
        for f in sorted(top.rglob("*.py")):
            rel = f.relative_to(top.parent).as_posix()
            package = [top.name, *f.relative_to(top).parent.parts]
            out.append((rel, f, package))
    return out


def test_only_the_faces_above_the_worker_import_it() -> None:
    sources = _sources()
    assert len(sources) > 100
    offenders = [rel for rel, f, package in sources
                 if imports_worker(f.read_text("utf-8"), package)
                 and rel not in ALLOWED and not rel.startswith(ALLOWED_PACKAGES)]
    assert offenders == []


def test_the_import_check_sees_every_spelling() -> None:
    worker_pkg = ["forklift", "_worker"]
    for source in (
        "from forklift._worker.worker import Worker",
        "import forklift._worker.worker",
        "from forklift._worker import Worker",
        "from forklift import Worker",
        "from forklift._worker import worker",
        "if TYPE_CHECKING:\n    from forklift._worker.worker import Worker",
        "def f():\n    from forklift import Worker",
    ):
        assert imports_worker(source, ["forklift"]), source
    assert imports_worker("from .worker import Worker", worker_pkg)
    assert imports_worker("from . import worker", worker_pkg)
    for source in (
        "from forklift._worker.config import WorkerConfig",
        "from forklift._worker.state import WorkerState",
        "from forklift.ops.workers import WorkerInfo",
        "from forklift import Forklift",
    ):
        assert not imports_worker(source, ["forklift"]), source


def worker_taking_constructors(source: str) -> list[str]:
    """Classes whose ``__init__`` takes the Worker: a parameter annotated ``Worker`` or named
    ``worker``."""
    found = []
    for cls in (n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.ClassDef)):
        for fn in cls.body:
            if not (isinstance(fn, ast.FunctionDef) and fn.name == "__init__"):
                continue
            args = [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]
            for arg in args[1:]:
                names = {n.id for n in ast.walk(arg.annotation) if isinstance(n, ast.Name)} \
                    if arg.annotation is not None else set()
                text = arg.annotation.value if isinstance(arg.annotation, ast.Constant) else ""
                if arg.arg == "worker" or "Worker" in names or text == "Worker":
                    found.append(f"{cls.name}({arg.arg})")
    return found


def test_no_service_constructor_takes_the_worker() -> None:
    files = [f for top in SERVICES for f in sorted(top.rglob("*.py"))]
    assert any(f.name == "producer.py" for f in files)
    offenders = {}
    for f in files:
        found = worker_taking_constructors(f.read_text("utf-8"))
        if found:
            offenders[str(f.relative_to(CORE))] = found
    assert offenders == {}


def test_the_constructor_check_sees_a_worker_parameter() -> None:
    assert worker_taking_constructors(
        "class P:\n    def __init__(self, worker: Worker) -> None: ...") == ["P(worker)"]
    assert worker_taking_constructors(
        "class P:\n    def __init__(self, w: 'Worker') -> None: ...") == ["P(w)"]
    assert worker_taking_constructors(
        "class P:\n    def __init__(self, *, owner: Worker | None) -> None: ...") == ["P(owner)"]
    assert worker_taking_constructors(
        "class P:\n    def __init__(self, config: WorkerConfig, state: WorkerState) -> None: ...") == []
