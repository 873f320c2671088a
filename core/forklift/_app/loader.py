"""Finding the user's app object from ``module:attribute``."""

from __future__ import annotations

import importlib
import os
import sys

from forklift._app.app import Forklift
from forklift._base.errors import ConfigError


def load_app(spec: str | None) -> Forklift:
    """Import ``module:attr`` (default attr ``app``); ``None`` reads ``FORKLIFT_APP``."""
    spec = spec or os.environ.get("FORKLIFT_APP")
    if not spec:
        raise ConfigError("no app given: pass --app module:attr or set FORKLIFT_APP")
    module_name, _, attr = spec.partition(":")
    attr = attr or "app"
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # like `python -m`: the current directory is importable
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"cannot import app module {module_name!r}: {exc}") from None
    target = getattr(module, attr, None)
    if not isinstance(target, Forklift):
        raise ConfigError(f"{spec!r} is not a forklift.Forklift app (got {type(target).__name__})")
    return target
