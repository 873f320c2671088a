"""The CLI command equivalent to each console action, ready to paste into a runbook.

Spelled as ``forklift`` (console/cli.py) spells it; every value is shell-quoted, so a queue
called ``mail; rm -rf /`` pastes as data.
"""

from __future__ import annotations

import shlex

from forklift.ops.filters import JobFilter


def cli(*args: object) -> str:
    return " ".join(["forklift", *(shlex.quote(str(a)) for a in args)])


def filter_flags(flt: JobFilter) -> list[str]:
    """The ``jobs`` commands' flags selecting the same jobs as ``flt``."""
    out: list[str] = []
    for flag, values in (
        ("--state", flt.states),
        ("--queue", flt.queues),
        ("--kind", flt.kinds),
        ("--tag", flt.tags),
    ):
        if values:
            out += [flag, ",".join(values)]
    if flt.batch_id is not None:
        out += ["--batch", str(flt.batch_id)]
    if flt.text:
        out += ["--search", flt.text]
    if flt.id_min is not None:
        out += ["--id-min", str(flt.id_min)]
    if flt.id_max is not None:
        out += ["--id-max", str(flt.id_max)]
    return out
