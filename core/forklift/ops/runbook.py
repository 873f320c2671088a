"""The CLI command equivalent to each console action, ready to paste into a runbook.

Spelled as ``forklift`` (cli/main.py) spells it, and always naming exactly the object it acts
on: every word is quoted by :func:`forklift.ops.display.shell_quote` (``mail; rm -rf /`` pastes
as data, ``mail\\x1b[0m`` as ``$'mail\\x1b[0m'``, never as ``mail``), and a name that starts
with ``-`` comes after ``--`` so it cannot be read as an option.

:func:`command` takes the command's words, its positional arguments and its options apart;
:func:`cli` takes one flat list and is right only when no positional argument starts with ``-``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from forklift.ops.display import shell_join, shell_quote
from forklift.ops.filters import JobFilter

__all__ = ["cli", "command", "filter_flags"]


def cli(*args: object) -> str:
    """``forklift`` and ``args``, each quoted. Prefer :func:`command` for names."""
    return shell_join(["forklift", *args])


def command(
    *words: str,
    args: Iterable[object] = (),
    options: Mapping[str, object] | Iterable[tuple[str, object]] = (),
) -> str:
    """``forklift <words> [--option value | --flag]... [--] <args>``.

    ``options`` maps option names (``"--reason"``) to a value, ``True`` for a flag, or
    ``None``/``False`` to leave it out; a list of pairs repeats an option.
    """
    items = options.items() if isinstance(options, Mapping) else options
    out = ["forklift", *words]
    for name, value in items:
        if value is None or value is False:
            continue
        out.append(name)
        if value is not True:
            out.append(str(value))
    positional = [str(a) for a in args]
    if any(a.startswith("-") for a in positional):
        out.append("--")
    return " ".join(shell_quote(w) for w in [*out, *positional])


def filter_flags(flt: JobFilter) -> list[str]:
    """The ``jobs`` commands' flags selecting the same jobs as ``flt`` (one flag per value)."""
    out: list[str] = []
    for flag, values in (
        ("--state", flt.states),
        ("--queue", flt.queues),
        ("--kind", flt.kinds),
        ("--tag", flt.tags),
        ("--tenant", flt.tenants),
        ("--enqueued-by", flt.enqueued_by),
    ):
        for v in values:
            out += [flag, v]
    for version in flt.payload_versions:
        out += ["--payload-version", str(version)]
    if flt.batch_id is not None:
        out += ["--batch", str(flt.batch_id)]
    for match in flt.args:
        out += ["--arg", match.to_text()]
    if flt.text:
        out += ["--search", flt.text]
    if flt.id_min is not None:
        out += ["--id-min", str(flt.id_min)]
    if flt.id_max is not None:
        out += ["--id-max", str(flt.id_max)]
    if flt.after is not None:
        out += ["--after", flt.after.isoformat()]
    if flt.before is not None:
        out += ["--before", flt.before.isoformat()]
    if (flt.after is not None or flt.before is not None) and flt.time_field != "created_at":
        out += ["--time-field", flt.time_field]
    return out
