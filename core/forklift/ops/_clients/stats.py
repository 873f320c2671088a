"""``op.stats``: per-queue figures and totals, per-kind figures, chart series."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from forklift.ops import stats as _stats
from forklift.ops._clients.client import FeatureClient

if TYPE_CHECKING:
    import psycopg

    from forklift.ops.charts import ChartSeries
    from forklift.ops.context import OpsContext
    from forklift.ops.kinds import KindStats
    from forklift.ops.payload_versions import PayloadVersions

__all__ = ["StatsClient"]


class StatsClient(FeatureClient):
    __slots__ = ()

    def __call__(
        self,
        *,
        window: timedelta = _stats.DEFAULT_WINDOW,
        bucket: timedelta = _stats.DEFAULT_BUCKET,
    ) -> _stats.Stats:
        """Deprecated: use ``op.stats.get()``."""
        return self.get(window=window, bucket=bucket)

    def get(
        self,
        *,
        window: timedelta = _stats.DEFAULT_WINDOW,
        bucket: timedelta = _stats.DEFAULT_BUCKET,
        cached: bool = True,
    ) -> _stats.Stats:
        """Successive calls on one Operator read only the window's newest buckets.

        ``cached=False`` reads a second window beside the one a caller keeps refreshing (a
        console's chart over 24 h beside its half hour) without the session's cache: the two
        shapes would otherwise evict each other on every call. Closed whole minutes still come
        from the stats rollup, so such a read stays cheap however many jobs finished."""
        session = self._session

        def read(conn: psycopg.Connection[Any], ctx: OpsContext) -> _stats.Stats:
            # The replica and the primary each keep their own closed buckets.
            return _stats.stats(conn, ctx, window=window, bucket=bucket,
                                cache=session.window_for(conn) if cached else None)

        return session.read(read)

    def kinds(self, *, window: timedelta = timedelta(hours=1)) -> KindStats:
        """Per queue and kind: completed, dead, run time p50/p95 in ``window``; live now."""
        # Loaded here, not with the stats: `forklift stats` has no use for it.
        from forklift.ops import kinds

        return self._session.read(kinds.kind_stats, window=window)

    def versions(self, *, kinds: Iterable[str] = ()) -> PayloadVersions:
        """Live jobs by queue, kind and payload version (only ``kinds`` when given): when an
        old version's count reaches zero it has drained."""
        from forklift.ops import payload_versions

        return self._session.read(payload_versions.payload_versions, kinds=tuple(kinds))

    def charts(
        self,
        *,
        window: timedelta = timedelta(hours=1),
        bucket: timedelta = timedelta(minutes=1),
        queue: str | None = None,
    ) -> ChartSeries:
        """Per bucket, for ``queue`` or all: completed, failed attempts, died, pickup lag and
        run time p50/p95 (forklift.ops.charts), in one statement."""
        from forklift.ops import charts

        return self._session.read(charts.chart_series, window=window, bucket=bucket, queue=queue)
