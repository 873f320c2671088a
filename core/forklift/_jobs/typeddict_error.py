"""The refusal of a ``typing.TypedDict`` payload type where pydantic cannot validate one."""

from __future__ import annotations

from forklift._base.errors import ConfigError

__all__ = ["TypedDictNeedsTypingExtensions"]


class TypedDictNeedsTypingExtensions(ConfigError):
    """A payload or result type is (or holds) a ``typing.TypedDict`` on Python < 3.12, where
    pydantic reads TypedDicts only from ``typing_extensions``; the code names the fix."""

    code = "use_typing_extensions_typeddict"
