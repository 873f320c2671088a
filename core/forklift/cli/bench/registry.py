"""Where scenarios register: one decorator, found by importing every module of ``scenarios/``.

A scenario module (flow control's fair share, workflows' parked-job resume, ...) is a new file
in ``forklift/cli/bench/scenarios/``::

    from forklift.cli.bench.registry import scenario
    from forklift.cli.bench.report import Figure, Target

    @scenario("fair_share", figures=("fair_share",), order=75)
    def fair_share(bench: Bench) -> list[Figure]:
        with bench.database("fair") as (dsn, conn):
            ...
        return [Figure("fair_share", "...", "jobs/s", mine, theirs, "plain loop",
                       rule=Target("ratio>=", 0.9))]

``--only fair_share`` then runs it, a full run includes it, and its figures follow the main
table in the report (in ``order``, then name). Nothing else needs editing.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from forklift.cli.bench.measure import Bench
    from forklift.cli.bench.report import Figure

Run = Callable[["Bench"], "list[Figure]"]


@dataclass(frozen=True)
class Scenario:
    name: str
    figures: tuple[str, ...]
    order: int
    run: Run
    #: Part of a run that names no scenarios; an opt-in one runs only when named (--only).
    default: bool = True


_REGISTERED: dict[str, Scenario] = {}
_loaded = False


def scenario(name: str, *, figures: tuple[str, ...], order: int = 100,
             default: bool = True) -> Callable[[Run], Run]:
    """Register ``run`` as the scenario ``name``, reporting ``figures`` (their keys);
    ``default=False``: only when named (a long measurement a full run leaves out)."""

    def register(run: Run) -> Run:
        if name in _REGISTERED and _REGISTERED[name].run is not run:
            raise ValueError(f"bench scenario {name!r} is registered twice")
        _REGISTERED[name] = Scenario(name, figures, order, run, default)
        return run

    return register


def scenarios() -> list[Scenario]:
    """Every registered scenario, in run order (importing ``scenarios/`` the first time)."""
    global _loaded
    if not _loaded:
        package = importlib.import_module("forklift.cli.bench.scenarios")
        for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
            if not info.name.startswith("_"):
                importlib.import_module(f"{package.__name__}.{info.name}")
        _loaded = True
    return sorted(_REGISTERED.values(), key=lambda s: (s.order, s.name))


def figure_keys() -> tuple[str, ...]:
    """Every figure key the scenarios of a full run report, in run order."""
    return tuple(k for s in scenarios() if s.default for k in s.figures)
