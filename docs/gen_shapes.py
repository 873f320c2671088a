"""The JSON shapes of the operator API, rendered from the result dataclasses of ``forklift.ops``.

Every result that ``--json`` prints is a dataclass whose ``to_json()`` gives its fields (times
as ISO 8601 strings with their offset, durations as seconds). Walking the public modules of
``forklift.ops`` for those dataclasses documents a new field the moment it is added.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import pkgutil
import typing
from typing import Any

__all__ = ["render", "shapes"]

# Results whose to_json() reshapes their fields; each says how, in words.
_RESHAPED = {
    "JobDetail": "`to_json()` gives the job's own fields (the `Job` row, below) with `timeline`, "
    "`steps`, `waits_for`, `parked` and `logs` added beside them.",
    "DeadGroupFilter": "`to_json()` gives `dead_group`, `states`, and `kind`, `code`, "
    "`fingerprint` when set.",
}


def _public_modules() -> list[Any]:
    import forklift.ops

    names = sorted(
        m.name for m in pkgutil.iter_modules(forklift.ops.__path__) if not m.name.startswith("_")
    )
    return [importlib.import_module(f"forklift.ops.{n}") for n in names]


def shapes() -> list[tuple[str, type[Any]]]:
    """(module, class) of every result dataclass with a JSON shape, once each, by module."""
    from forklift.ops.shape import Shape

    seen: set[type[Any]] = set()
    out: list[tuple[str, type[Any]]] = []
    for module in _public_modules():
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if cls in seen or not dataclasses.is_dataclass(cls):
                continue
            if not (issubclass(cls, Shape) or "to_json" in vars(cls)):
                continue
            if not cls.__module__.startswith("forklift.ops"):
                continue
            seen.add(cls)
            out.append((module.__name__, cls))
    # the job row that several shapes embed
    from forklift import Job

    out.append(("forklift", Job))
    return out


def _type(hint: Any) -> str:
    text = str(hint) if not isinstance(hint, type) else hint.__name__
    for noise in ("typing.", "datetime.", "forklift.ops.", "collections.abc."):
        text = text.replace(noise, "")
    if "forklift." in text:
        text = ".".join(p for p in text.split(".") if not p.startswith("_"))
    return text.replace("NoneType", "None").replace("|", "\\|")


def _fields(cls: type[Any]) -> list[tuple[str, str, str]]:
    try:
        hints = typing.get_type_hints(cls)
    except Exception:
        hints = {}
    rows = []
    for f in dataclasses.fields(cls):
        if not f.init and f.name.startswith("_"):
            continue
        hint = hints.get(f.name, f.type)
        if f.default is not dataclasses.MISSING:
            default = f"`{f.default!r}`"
        elif f.default_factory is not dataclasses.MISSING:
            default = f"`{f.default_factory()!r}`"
        else:
            default = ""
        rows.append((f.name, _type(hint), default))
    return rows


def _doc(cls: type[Any]) -> str:
    doc = inspect.getdoc(cls) or ""
    if doc.startswith(cls.__name__ + "("):  # dataclass's generated signature, not a docstring
        return ""
    return " ".join(doc.split("\n\n")[0].split())


def render() -> str:
    out = [
        "# JSON shapes",
        "",
        "Generated from the result dataclasses of `forklift.ops` when this site is built. "
        "`--json` on the CLI prints these shapes, and each result's `to_json()` returns them: "
        "times are ISO 8601 strings with their UTC offset, durations are seconds (numbers), "
        "nested results are objects of their own shape. Fields are only ever added, never "
        "renamed or removed.",
        "",
        "Which command prints which shape: `stats` a `Stats`; `jobs list` a `JobPage`; "
        "`jobs show` a `JobDetail`; `jobs explain` and `queues explain` an `Explanation`; "
        "`jobs retry|cancel|delete|run-now` with ids a list of `ActionResult` under `results` "
        "(with `errors`), with a filter a `BulkReport`; `dead groups` a `DeadGroups`; "
        "`queues list` a list of `QueueInfo`; `workers list` a list of `WorkerInfo`; "
        "`audit` a list of `AuditEntry`; `prune` a `PruneReport`; `health` a `Health`; "
        "`keys list` a list of `KeyInfo`; `locks list` a list of `LockInfo`. Any action's "
        "`--dry-run --json` prints what the action would, plus `\"dry_run\": true`.",
        "",
    ]
    module_of: dict[str, list[type[Any]]] = {}
    for module, cls in shapes():
        module_of.setdefault(module, []).append(cls)
    for module, classes in module_of.items():
        out += [f"## `{module}`", ""]
        for cls in classes:
            out += [f"### `{cls.__name__}` {{#{cls.__name__.lower()}}}", ""]
            doc = _doc(cls)
            if doc:
                out += [doc, ""]
            if cls.__name__ in _RESHAPED:
                out += [_RESHAPED[cls.__name__], ""]
            out += ["| field | type | default |", "| --- | --- | --- |"]
            out += [f"| `{n}` | {t} | {d} |" for n, t, d in _fields(cls)]
            out.append("")
    return "\n".join(out)
