"""Command-line values without Pydantic: typer (0.2x) coerces every parameter through a Pydantic
``TypeAdapter``, and importing Pydantic and building the adapters is the largest part of a
command's start-up (``forklift stats --json`` would pay ~100 ms for eight plain options).

:func:`install` puts a cheaper builder in front of typer's: a ``str``, ``bool``, ``int`` or
``float`` parameter without a custom parser takes a well-formed value (``"25"``, ``"0.5"``, a
default) as Pydantic would, to the same value and type, within its ``min``/``max``. Anything
else (a malformed number, one out of range, a clamp, a choice, a path, a list) goes to typer's
own builder, so every error message and every edge case stays typer's. With a typer whose
internals differ, :func:`install` leaves typer as it is (correct, only slower).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

_INT = re.compile(r"[+-]?[0-9]{1,18}", re.ASCII)
_FLOAT = re.compile(r"[+-]?(?:[0-9]{1,18}\.?[0-9]{0,18}|\.[0-9]{1,18})(?:[eE][+-]?[0-9]{1,3})?",
                    re.ASCII)
PLAIN = (str, bool, int, float)
#: Returned by :func:`plain_value` for a value it leaves to typer.
UNSURE = object()


def plain_value(annotation: type, lo: float | None, hi: float | None, value: Any) -> Any:
    """``value`` as typer would coerce it to ``annotation``, or :data:`UNSURE`."""
    if annotation is str or annotation is bool:
        return value if isinstance(value, annotation) else UNSURE
    if annotation not in (int, float) or type(value) not in (int, float, str):
        return UNSURE
    if isinstance(value, str):
        if not (_INT if annotation is int else _FLOAT).fullmatch(value):
            return UNSURE
    elif annotation is int and type(value) is float:
        return UNSURE
    got = annotation(value)
    if (lo is not None and got < lo) or (hi is not None and got > hi):
        return UNSURE
    return got


def install() -> bool:
    """Route plain parameters around Pydantic (once); False if this typer is not the expected
    shape, and typer is left alone."""
    try:
        import typer.core as core
        from typer._coercion import RuntimeParam, TypeDescriptor
    except ImportError:
        return False
    found = getattr(core, "build_runtime_param", None)
    if found is None or getattr(found, "forklift_light", False):
        return found is not None
    original: Callable[[TypeDescriptor], Any] = found

    from dataclasses import dataclass, field

    @dataclass(frozen=True)
    class Plain(RuntimeParam):
        descriptor: Any = None
        fallback: list[Any] = field(default_factory=list)  # typer's own, built if needed

        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            info = self.parameter_info
            got = plain_value(self.annotation, info.min, info.max, value)
            if got is not UNSURE:
                return got
            if not self.fallback:
                self.fallback.append(original(self.descriptor))
            return self.fallback[0]._coerce_value(value, param=param, ctx=ctx)

    def build(descriptor: TypeDescriptor) -> Any:
        info = descriptor.parameter_info
        if (descriptor.annotation in PLAIN and descriptor.file_annotation is None
                and getattr(info, "parser", None) is None and not getattr(info, "clamp", False)):
            return Plain(parameter_info=info, annotation=descriptor.annotation,
                         descriptor=descriptor)
        return original(descriptor)

    build.forklift_light = True  # type: ignore[attr-defined]
    core.build_runtime_param = build  # type: ignore[attr-defined]
    return True
