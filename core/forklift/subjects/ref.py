"""The payload of a subject's export and erase jobs."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["SubjectRef"]


@dataclass(frozen=True)
class SubjectRef:
    """Which person: the value of the subject's key column."""

    key: int | str
