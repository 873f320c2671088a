"""An action the operator is about to take, described before it runs: what a screen proposes
and the app confirms, runs and reports."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from forklift.ops import Operator
from forklift_console.widgets.text import plural

Operation = Callable[[Operator], Any]


@dataclass(frozen=True)
class Plan:
    """An action the operator is about to take, described before it runs.

    ``ids`` are the jobs (or queue names) named in the confirmation; ``scope`` describes a
    filter when the action covers "all N matching", in which case the operator types ``count``.
    """

    verb: str  # "Requeue", "Cancel", "Delete", "Pause"
    noun: str  # "job", "queue", "dead-letter group"
    count: int
    cli: str
    run: Operation
    ids: tuple[int | str, ...] = ()
    scope: str | None = None
    destructive: bool = True
    #: Turns the API's result into the sentence shown when the action is done.
    report: Callable[[Any], str] | None = None
    #: The CLI command that does what was done, when only the result tells (a relative change).
    cli_of: Callable[[Any], str] | None = None

    #: With a ``scope``: whether the count must be typed (an action on "all N matching");
    #: False for a scope that only explains (a batch's cancel).
    typed_count: bool = True

    @property
    def typed(self) -> bool:
        return self.scope is not None and self.typed_count

    @property
    def title(self) -> str:
        return f"{self.verb} {plural(self.count, self.noun)}?"
