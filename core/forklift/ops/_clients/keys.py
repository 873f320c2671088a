"""``op.keys``: flow-control keys (concurrency limit, rate, fair share); show one, set its
limit or rate, reset it."""

from __future__ import annotations

from forklift.ops import keys as _keys
from forklift.ops import rates as _rates
from forklift.ops._clients.client import FeatureClient

__all__ = ["KeysClient"]


class KeysClient(FeatureClient):
    __slots__ = ()

    def __call__(self) -> list[_keys.KeyInfo]:
        """Deprecated: use ``op.keys.list()``."""
        return self.list()

    def show(self, name: str, *, limit: int = 200) -> _keys.KeyDetail:
        return self._session.read(_keys.show_key, name, limit=limit)

    def set_limit(self, name: str, limit: int | None, *, reason: str | None = None
                  ) -> _keys.KeyInfo:
        return self._session.run(_keys.set_limit, name, limit, reason=reason)

    def set_rate(self, name: str, rate: str | None, *, burst: int | None = None,
                 reason: str | None = None) -> _keys.KeyInfo:
        """``rate``: ``100/s``, ``10/5s``... or None to lift it."""
        parsed = _rates.parse_rate(rate, burst) if rate is not None else None
        return self._session.run(_keys.set_rate, name, parsed, reason=reason)

    def reset(self, name: str, *, reason: str | None = None) -> _keys.KeyInfo:
        return self._session.run(_keys.reset, name, reason=reason)

    # Last: below this definition, ``list`` in an annotation would name the method.
    def list(self) -> list[_keys.KeyInfo]:
        return self._session.read(_keys.list_keys)
