"""The console's keys, rendered from the bindings its screens and widgets declare.

The help screen (``?``) and the command palette read the same ``BINDINGS``; walking the
console package for every class that declares its own gives the whole keyboard, screen by
screen, as the code has it.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from typing import Any

__all__ = ["bindings", "render"]

_KEY_NAMES = {
    "question_mark": "?",
    "right_square_bracket": "]",
    "left_square_bracket": "[",
    "plus": "+",
    "equals_sign": "=",
    "minus": "-",
    "slash": "/",
    "colon": ":",
    "space": "space",
    "escape": "esc",
    "enter": "enter",
    "greater_than_sign": ">",
    "less_than_sign": "<",
}


def _key(binding: Any) -> str:
    shown = getattr(binding, "key_display", None)
    if shown:
        return str(shown)
    keys = str(binding.key if hasattr(binding, "key") else binding[0]).split(",")
    return " / ".join(_KEY_NAMES.get(k, k) for k in keys)


def _parts(binding: Any) -> tuple[str, str, str, bool]:
    if isinstance(binding, tuple):
        key, action, *rest = binding
        return _key((key,)), str(action), str(rest[0]) if rest else "", True
    return _key(binding), str(binding.action), str(binding.description), bool(binding.show)


def bindings() -> list[tuple[str, str, list[tuple[str, str, str, bool]]]]:
    """(module, class, its own bindings) for every console class that declares BINDINGS."""
    import forklift_console

    out = []
    seen: set[type[Any]] = set()
    for info in sorted(
        pkgutil.walk_packages(forklift_console.__path__, "forklift_console."),
        key=lambda i: i.name,
    ):
        if ".bench" in info.name or info.name.endswith(("demo", "demo_app")):
            continue
        try:
            module = importlib.import_module(info.name)
        except Exception:
            continue
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if cls in seen or cls.__module__ != module.__name__:
                continue
            own = cls.__dict__.get("BINDINGS")
            if not own:
                continue
            seen.add(cls)
            out.append((module.__name__, cls.__name__, [_parts(b) for b in own]))
    return out


def _title(module: str, cls: str) -> str:
    obj = getattr(importlib.import_module(module), cls)
    doc = (inspect.cleandoc(obj.__dict__.get("__doc__") or "")).split("\n\n")[0]
    return " ".join(doc.split())


def _heading(cls: str) -> str:
    """``DeadScreen`` -> ``Dead``, ``ConsoleApp`` -> ``Every screen``: what the reader sees."""
    if cls.endswith("App"):
        return "Every screen"
    words = re.findall(r"[A-Z][a-z]*", cls.lstrip("_"))
    words = [w for w in words if w != "Screen"] or words
    return " ".join([words[0], *(w.lower() for w in words[1:])])


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def render() -> str:
    out = [
        "# Console keys",
        "",
        "Generated from the console's own key bindings when this site is built: the same "
        "bindings `?` shows on each screen and `ctrl+p` lists, searchable. A key marked "
        "*shown* appears in the footer. [The operator console](../how-to/console.md) describes "
        "each screen; keys that act on jobs are confirmed, audited and disabled (with the "
        "reason) in read-only mode.",
        "",
    ]
    for module, cls, keys in bindings():
        where = module.removeprefix("forklift_console.")
        out += [f"## {_heading(cls)} (`{where}.{cls}`)", ""]
        title = _title(module, cls)
        if title:
            out += [title, ""]
        out += ["| key | does | action | |", "| --- | --- | --- | --- |"]
        for key, action, description, shown in keys:
            out.append(
                f"| `{_cell(key)}` | {_cell(description)} | `{_cell(action)}` | "
                f"{'shown' if shown else ''} |"
            )
        out.append("")
    return "\n".join(out)
