"""Command groups imported when named: ``forklift stats --json`` does not import (nor build) the
jobs, queues, batches, backfills, health, ... commands. A group is declared by where it lives,
``{"jobs": "forklift.cli.jobs:jobs_app"}``, and its module loads the first time the
group is looked up: to run one of its commands, for ``--help``, or by a walk over ``commands``
(tests, documentation), which then sees every group exactly as if it had been added eagerly.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, MutableMapping
from typing import Any

import typer
import typer.main
from typer.core import TyperGroup

#: A group's name and where its ``typer.Typer`` lives, as ``module:attribute``.
Table = dict[str, str]


def load(name: str, where: str) -> Any:
    """The click group for the ``typer.Typer`` at ``where``, named ``name`` (as ``add_typer``
    would build it)."""
    module, _, attr = where.partition(":")
    holder = typer.Typer()
    holder.add_typer(getattr(importlib.import_module(module), attr), name=name)
    return typer.main.get_command(holder).commands[name]  # type: ignore[attr-defined]


class Commands(MutableMapping[str, Any]):
    """A group's commands: the ones built, then the declared groups, built on first lookup.
    Listing the names (help, "did you mean") loads nothing."""

    def __init__(self, built: MutableMapping[str, Any], pending: Table) -> None:
        self._built = dict(built)
        self._pending = {k: v for k, v in pending.items() if k not in self._built}

    def __getitem__(self, name: str) -> Any:
        if name not in self._built and name in self._pending:
            self._built[name] = load(name, self._pending.pop(name))
        return self._built[name]

    def __setitem__(self, name: str, command: Any) -> None:
        self._pending.pop(name, None)
        self._built[name] = command

    def __delitem__(self, name: str) -> None:
        if self._pending.pop(name, None) is None:
            del self._built[name]

    def __iter__(self) -> Iterator[str]:
        # Declaration order, which help shows: built commands first, groups as declared.
        return iter([*self._built, *self._pending])

    def __len__(self) -> int:
        return len(self._built) + len(self._pending)

    def __contains__(self, name: object) -> bool:
        return name in self._built or name in self._pending


def loading(base: type[TyperGroup], groups: Table) -> type[TyperGroup]:
    """``base`` (the top-level command's class) with ``groups`` loaded on first lookup."""

    class Loading(base):  # type: ignore[valid-type,misc]
        commands: MutableMapping[str, Any]

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.commands = Commands(self.commands, groups)

        def list_commands(self, ctx: Any) -> list[str]:
            return list(self.commands)  # typer's walks the items, building every group

    Loading.__name__ = Loading.__qualname__ = base.__name__
    return Loading
