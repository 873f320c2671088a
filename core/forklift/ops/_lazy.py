"""Modules of :mod:`forklift.ops` loaded on first use: the Operator names each module it calls
through one of these, so importing it (what `forklift stats --json` does) loads none of them."""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["LazyModule", "lazy_modules"]


class LazyModule:
    def __init__(self, name: str) -> None:
        self._name = f"forklift.ops.{name}"

    def __getattr__(self, attr: str) -> Any:
        return getattr(importlib.import_module(self._name), attr)


def lazy_modules(*names: str) -> tuple[LazyModule, ...]:
    return tuple(LazyModule(n) for n in names)
