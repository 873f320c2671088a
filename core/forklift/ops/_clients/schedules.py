"""``op.schedules``: cron schedules as recorded; pause, resume or run one now."""

from __future__ import annotations

from forklift.ops import schedules as _schedules
from forklift.ops._clients.client import FeatureClient

__all__ = ["SchedulesClient"]


class SchedulesClient(FeatureClient):
    __slots__ = ()

    def __call__(self) -> list[_schedules.ScheduleInfo]:
        """Deprecated: use ``op.schedules.list()``."""
        return self.list()

    def show(self, name: str) -> _schedules.ScheduleInfo:
        return self._session.read(_schedules.get_schedule, name)

    def pause(self, name: str, *, reason: str | None = None) -> _schedules.ScheduleInfo:
        return self._session.run(_schedules.pause, name, reason=reason)

    def resume(self, name: str, *, reason: str | None = None) -> _schedules.ScheduleInfo:
        return self._session.run(_schedules.resume, name, reason=reason)

    def run_now(self, name: str, *, reason: str | None = None) -> _schedules.RunNow:
        return self._session.run(_schedules.run_now, name, reason=reason)

    # Last: below this definition, ``list`` in an annotation would name the method.
    def list(self) -> list[_schedules.ScheduleInfo]:
        return self._session.read(_schedules.list_schedules)
