"""The public API is exactly ``forklift.__all__``, and every name in it imports."""

from __future__ import annotations

import importlib
import types

import forklift


def public_names(module: types.ModuleType) -> set[str]:
    """Names a user can see: no leading underscore, not a submodule (those come with imports)."""
    return {
        name
        for name, value in vars(module).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }


def test_all_matches_the_public_names() -> None:
    exported = set(forklift.__all__)
    assert len(forklift.__all__) == len(exported), "a name is listed twice in __all__"
    assert exported - {"__version__"} == public_names(forklift)


def test_every_exported_name_imports() -> None:
    fresh = importlib.import_module("forklift")
    for name in forklift.__all__:
        assert getattr(fresh, name) is not None, name
    namespace: dict[str, object] = {}
    exec("from forklift import *", namespace)
    assert set(forklift.__all__) <= set(namespace)


def test_the_version_is_a_string() -> None:
    assert isinstance(forklift.__version__, str) and forklift.__version__.count(".") >= 1


def test_the_api_a_user_needs_is_exported() -> None:
    for name in ("Forklift", "JobKind", "JobContext", "Job", "Worker", "run_worker", "Backoff",
                 "Retry", "Snooze", "Fail", "ForkliftError", "EnqueueRefused", "UniqueConflict",
                 "migrate", "STATES"):
        assert name in forklift.__all__, name
