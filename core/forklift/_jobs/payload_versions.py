"""A kind's payload versions: the version its producers write and the upcasters that bring an
older stored payload up to it, one version at a time.

Rolling deploys run old and new code side by side: a job enqueued by one release may be run by
another. A kind that changes its payload's shape declares the new shape's ``version`` and an
upcaster from each older version it still reads (``{1: v1_to_v2, 2: v2_to_v3}``); its jobs
carry the producer's version (the ``payload_version`` column, written only for such a kind), and
a worker upcasts an older job's payload step by step before validating it. A job newer than the
worker reads is left for a worker that reads it (:data:`AHEAD_CODE`). A kind that declares no
version is version 1, and its jobs carry no version at all.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from forklift._base.errors import ConfigError

__all__ = ["AHEAD_CODE", "AHEAD_WAIT", "UPCAST_CODE", "PayloadVersions", "UpcastFailed",
           "Upcaster", "ahead_message", "version_of"]

#: Takes a payload of version N as a dict of JSON values and returns it as version N + 1.
Upcaster = Callable[[dict[str, Any]], dict[str, Any]]

#: The failure code of an attempt whose payload could not be upcast (an upcaster raised, or
#: returned something other than a dict, or no upcaster reads the job's version).
UPCAST_CODE: Final = "upcast_failed"
#: The code of the note a worker leaves on a job newer than it reads, when it puts it back.
AHEAD_CODE: Final = "payload_version_ahead"
#: Seconds a job newer than its worker reads waits before it is claimable again: long enough
#: that an old worker does not claim it over and over, short enough for a rolling deploy.
AHEAD_WAIT: Final = 30.0
#: Versions are stored in an ``integer`` column.
_MAX_VERSION: Final = 2**31 - 1


def version_of(stored: int | None) -> int:
    """The payload version of a job as stored (None: written by a kind without versions, 1)."""
    return 1 if stored is None else stored


def ahead_message(stored: int, reads: int) -> str:
    """The note on a job newer than its worker reads."""
    return (f"payload version {stored} is newer than this worker reads (up to version"
            f" {reads}): left for a worker that reads version {stored}, no attempt spent")


class UpcastFailed(Exception):
    """An upcast that could not finish; ``message`` names the versions (it becomes the
    attempt's ``upcast_failed`` entry, ``cause`` the upcaster's exception, if any)."""

    def __init__(self, message: str, cause: BaseException | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.cause = cause


@dataclass(frozen=True)
class PayloadVersions:
    """The payload versions a kind reads: ``oldest`` up to ``current``, through ``upcasters``
    (``upcasters[n]`` turns version ``n`` into ``n + 1``)."""

    kind: str
    current: int
    upcasters: Mapping[int, Upcaster]

    @property
    def oldest(self) -> int:
        """The oldest version a job may carry and still be read."""
        return min(self.upcasters, default=self.current)

    @classmethod
    def declare(cls, kind: str, version: object, upcasters: object) -> PayloadVersions | None:
        """The versions a declaration names, checked, or None for a kind without versions.

        Refused (ConfigError naming the field): a version that is not a whole number from 1,
        upcasters without a version, an upcaster from a version not below the kind's, one
        that is not callable, and upcasters that leave a gap between the oldest of them and
        the kind's version (a job of the version in the gap could never be read).
        """
        if version is None:
            if upcasters:
                raise ConfigError(f"upcasters= of {kind} need version= (the version they lead"
                                  " to)", field="upcasters", kind=kind)
            return None
        if isinstance(version, bool) or not isinstance(version, int) \
                or not 1 <= version <= _MAX_VERSION:
            raise ConfigError(f"version= of {kind} must be a whole number from 1, not"
                              f" {version!r}", field="version", kind=kind)
        if upcasters is None:
            upcasters = {}
        if not isinstance(upcasters, Mapping):
            raise ConfigError(f"upcasters= of {kind} must map each older version to the function"
                              f" that makes the next one of it, not {upcasters!r}",
                              field="upcasters", kind=kind)
        steps: dict[int, Upcaster] = {}
        for older, fn in upcasters.items():
            if isinstance(older, bool) or not isinstance(older, int) \
                    or not 1 <= older < version:
                raise ConfigError(f"upcasters= of {kind} has a key {older!r}: each key is an"
                                  f" older version, a whole number from 1 below version={version}",
                                  field="upcasters", kind=kind)
            if not callable(fn):
                raise ConfigError(f"the upcaster of {kind} from version {older} is not callable:"
                                  f" {fn!r}", field="upcasters", kind=kind)
            steps[older] = fn
        if steps:
            missing = [v for v in range(min(steps), version) if v not in steps]
            if missing:
                raise ConfigError(
                    f"upcasters= of {kind} leave no path from version {min(steps)} to version"
                    f" {version}: no upcaster from version {missing[0]} to {missing[0] + 1}",
                    field="upcasters", kind=kind, missing=missing)
        return cls(kind, version, dict(sorted(steps.items())))

    def upcast(self, payload: Any, stored: int) -> Any:
        """``payload`` of version ``stored`` as this kind's current version, step by step."""
        if stored < self.oldest:
            raise UpcastFailed(f"{self.kind} payload version {stored} cannot be read: this"
                               f" worker reads versions {self.oldest} to {self.current} (no"
                               f" upcaster from version {stored})")
        for version in range(stored, self.current):
            if not isinstance(payload, dict):
                raise UpcastFailed(f"the {self.kind} payload of version {version} is a"
                                   f" {type(payload).__name__}, not an object: no upcaster"
                                   " can read it")
            try:
                payload = self.upcasters[version](payload)
            except Exception as exc:
                raise UpcastFailed(f"upcasting the {self.kind} payload from version {version}"
                                   f" to {version + 1} raised {type(exc).__name__}: {exc}",
                                   exc) from exc
            if not isinstance(payload, dict):
                raise UpcastFailed(f"the {self.kind} upcaster from version {version} to"
                                   f" {version + 1} returned a {type(payload).__name__}, not"
                                   " a dict")
        return payload
