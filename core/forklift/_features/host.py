"""What the feature modules (batches, cron, backfills) need from an app, as protocols.

They are written against these, not against :class:`forklift.Forklift`, so the app and the
features do not import each other: ``_app`` calls into a feature (lazily, on first use), and a
feature sees only a host with a schema, declared kinds and a payload limit.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from forklift._jobs.insert import Row

__all__ = ["Host", "Kind"]


@runtime_checkable
class Kind(Protocol):
    """A declared job kind, as far as a feature needs one: its name and its rows.

    Runtime-checkable, so a feature can tell a kind from a plain callable (the outbox's sinks
    take either) without importing the app's JobKind."""

    @property
    def name(self) -> str: ...

    def row(self, args: Any, **options: Any) -> Row:
        """Validate and serialise one job of this kind (raises an EnqueueRefused subclass)."""
        ...


class Host(Protocol):
    """An app: where its tables are, what it declares, how large a payload may be."""

    @property
    def schema(self) -> str: ...

    @property
    def payload_limit(self) -> int: ...

    @property
    def kinds(self) -> Mapping[str, Kind]: ...

    def kind(self, name: str) -> Kind:
        """The kind declared under ``name``, or UnknownKind."""
        ...


def kind_of(host: Host, kind: object) -> Kind:
    """A kind given by name or object, which must be declared on ``host``."""
    from forklift._base.errors import InvalidOption

    if isinstance(kind, str):
        return host.kind(kind)
    name = getattr(kind, "name", None)
    if not isinstance(name, str) or host.kinds.get(name) is not kind:
        raise InvalidOption(f"{kind!r} is not a kind declared on this app", field="kind")
    return host.kinds[name]
