"""The public API is exactly ``forklift.__all__``, every name in it imports, and the docs
document it: the how-to guides and the reference pages (those generated from the code
included) name every public name, and what the guides call on an app or a kind exists.

Public: ``forklift`` (its ``__all__``), ``forklift.ops`` (the operator API, its ``__all__``)
and ``forklift.embedded`` (the embedded server). Everything else under ``forklift`` starts
with an underscore and is internal.
"""

from __future__ import annotations

import importlib
import inspect
import re
import subprocess
import sys
from pathlib import Path

import forklift
from forklift import Forklift, JobKind

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
CORE = ROOT / "core" / "forklift"
PUBLIC_MODULES = {"__init__", "embedded", "ops",
                  # the ecosystem integrations (guides: Django tasks, Testing your jobs, ...)
                  "django", "testing", "logs", "hooks", "metrics", "otel",
                  # the `forklift` command (`python -m forklift.cli`)
                  "cli",
                  # kinds built by a factory on the public API
                  "webhooks", "ledger", "subjects", "reindex", "partitions"}


def page(name: str) -> str:
    """One page of the docs, as its reader gets it: a reference page generated from the code
    (``reference/configuration.md``...) is rendered, the others are read."""
    sys.path.insert(0, str(DOCS))
    try:
        import gen_pages

        if name in gen_pages.GENERATED:
            return gen_pages.render(name)
    finally:
        sys.path.remove(str(DOCS))
    return (DOCS / name).read_text("utf-8")


def guides_and_reference() -> list[str]:
    """Every how-to guide and every reference page, generated ones included."""
    names = [str(p.relative_to(DOCS)) for p in sorted((DOCS / "how-to").rglob("*.md"))]
    names += [str(p.relative_to(DOCS)) for p in sorted((DOCS / "reference").rglob("*.md"))]
    sys.path.insert(0, str(DOCS))
    try:
        import gen_pages

        names += [n for n in gen_pages.GENERATED if n not in names]
    finally:
        sys.path.remove(str(DOCS))
    return [page(n) for n in names]


def documented_in(texts: list[str] | tuple[str, ...]) -> set[str]:
    """The names written as code in any of ``texts`` (each page read on its own, so that one
    page's stray backtick cannot pair with the next page's)."""
    return set().union(*(_documented(t) for t in texts))


#: Where the job API is taught: declaring kinds, the app object, enqueueing, and the
#: configuration reference (every keyword of ``Forklift``).
JOB_API = ("how-to/kinds.md", "how-to/enqueueing.md")
CONFIGURATION = "reference/configuration.md"


def test_all_lists_each_name_once_and_each_resolves() -> None:
    assert len(forklift.__all__) == len(set(forklift.__all__)), "a name is listed twice"
    assert set(forklift.__all__) == set(forklift._WHERE) | {"__version__"}
    fresh = importlib.import_module("forklift")
    for name in forklift.__all__:
        assert getattr(fresh, name) is not None, name


def test_star_import_gives_exactly_all() -> None:
    code = ("ns = {}; exec('from forklift import *', ns); "
            "print(sorted(k for k in ns if k != '__builtins__'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120).stdout
    assert out.strip() == str(sorted(forklift.__all__))


def test_the_version_is_a_string() -> None:
    assert isinstance(forklift.__version__, str) and forklift.__version__.count(".") >= 1


def test_every_module_outside_the_public_ones_is_underscored() -> None:
    offenders = []
    for path in CORE.iterdir():
        is_module = path.suffix == ".py" or (path / "__init__.py").is_file()
        name = path.stem if path.suffix == ".py" else path.name
        if not is_module or name in PUBLIC_MODULES:
            continue  # data: migrations, functions, schema.sql, py.typed
        if not name.startswith("_"):
            offenders.append(path.name)
    assert offenders == []


def test_every_core_module_declares_all() -> None:
    # The public modules and the internal ones that others build on say what they export.
    for name in ("forklift", "forklift.ops", "forklift._app.app", "forklift._app.kind",
                 "forklift._jobs.insert", "forklift._jobs.payload", "forklift._base.names", "forklift._db.steps",
                 "forklift._features.host", "forklift._features.batches", "forklift._features.cron", "forklift._features.backfill.backfill",
                 "forklift._jobs.job", "forklift._db.config", "forklift._base.json", "forklift._jobs.unknown",
                 "forklift._db.pools", "forklift._jobs.batch", "forklift._base.calendar",
                 "forklift._features.backfill.run"):
        module = importlib.import_module(name)
        exported = getattr(module, "__all__", None)
        assert isinstance(exported, list) and exported, name
        for item in exported:
            assert hasattr(module, item), f"{name}.{item}"


def _documented(text: str) -> set[str]:
    """Names written as code in ``text``: `Name`, `Name(...)`, `obj.name(...)`, `name=`."""
    found: set[str] = set()
    fences = re.findall(r"```[a-z]*\n(.*?)```", text, re.S)
    prose = re.sub(r"```[a-z]*\n.*?```", "", text, flags=re.S)
    for span in fences + re.findall(r"`([^`]+)`", prose):
        found.update(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", span))
    return found


def test_every_public_name_is_documented_in_the_docs() -> None:
    # The guides and the reference pages (configuration, failure codes, JSON shapes...).
    documented = documented_in(guides_and_reference())
    missing = sorted(n for n in forklift.__all__ if n != "__version__" and n not in documented)
    assert missing == []


def _public_members(cls: type) -> set[str]:
    return {n for n, _ in inspect.getmembers(cls) if not n.startswith("_")}


def test_the_app_and_kind_api_is_documented_where_the_job_api_is() -> None:
    documented = documented_in([page(n) for n in (*JOB_API, CONFIGURATION)])
    params = set(inspect.signature(Forklift.__init__).parameters) - {"self"}
    members = _public_members(Forklift) | _public_members(JobKind) | params
    # Documented with their features (Batches, Cron schedules, Paced backfills).
    elsewhere = {"batch", "batch_async", "get_batch", "batch_limits", "periodic", "schedule",
                 "backfill", "lock", "on", "outbox", "publish_event", "publish_event_async",
                 "consumer"}
    guides = documented_in(guides_and_reference())
    for name in elsewhere:
        assert name in guides, name
    missing = sorted(members - elsewhere - documented)
    assert missing == []


def test_the_documented_api_exists() -> None:
    # The other direction: what the job API guides call on an app or a kind is real.
    text = "\n".join(page(n) for n in JOB_API)
    called = set(re.findall(r"\b(?:app|kind|send_email)\.([a-z_]+)\(", text))
    assert called, "the guides show calls"
    real = _public_members(Forklift) | _public_members(JobKind)
    assert sorted(called - real) == []
    # (Elsewhere `forklift.x` may name a table of the schema.)
    for name in re.findall(r"`forklift\.([A-Za-z_]+)", text + page(CONFIGURATION)):
        assert hasattr(forklift, name) or importlib.util.find_spec(f"forklift.{name}"), name
