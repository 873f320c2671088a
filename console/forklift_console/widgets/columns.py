"""What a live table is made of: its columns and its rows of cells, keyed."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from rich.text import Text

Cell = Text | str
#: A row: its key and its cells, in column order.
Row = tuple[Hashable, Sequence[Cell]]


@dataclass(frozen=True)
class Column:
    key: str
    label: str
    width: int | None = None
    #: With ``server_sort``: the operator API's sort key for this column (None: not sortable).
    sort: str | None = None
