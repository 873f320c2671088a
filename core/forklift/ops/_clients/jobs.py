"""``op.jobs``: list and show jobs, explain one, and act on one or on every job a filter
matches (requeue, cancel, delete, run now). Each action refuses in read-only mode and writes
its audit row."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

from forklift.ops import actions as _actions
from forklift.ops import explain as _explain
from forklift.ops import jobs as _jobs
from forklift.ops import limits
from forklift.ops._clients.client import FeatureClient

if TYPE_CHECKING:
    from forklift.ops.filters import JobFilter, Sort

__all__ = ["JobsClient"]


class JobsClient(FeatureClient):
    __slots__ = ()

    def __call__(
        self,
        flt: JobFilter | None = None,
        *,
        sort: Sort | str | None = None,
        limit: int = 50,
        cursor: str | None = None,
        count: bool = True,
    ) -> _jobs.JobPage:
        """Deprecated: use ``op.jobs.list()``."""
        return self.list(flt, sort=sort, limit=limit, cursor=cursor, count=count)

    def show(self, job_id: int) -> _jobs.JobDetail:
        return self._session.read(_jobs.show, job_id)

    def explain(self, job_id: int) -> _explain.Explanation:
        """Why the job is not moving, in plain words."""
        return self._session.read(_explain.explain_job, job_id)

    def requeue(self, job_id: int, *, reason: str | None = None,
                expires: timedelta | None = None) -> _actions.ActionResult:
        """A finished job runs again: fresh attempts, new fence, error history kept. Without a
        start-by deadline, unless ``expires`` gives it a new one, that long from now."""
        return self._session.run(_actions.act, "requeue", job_id, reason=reason,
                                 expires=expires)

    def cancel(self, job_id: int, *, reason: str | None = None) -> _actions.ActionResult:
        """Waiting jobs end cancelled at once; a running job's worker is told to stop it."""
        return self._session.run(_actions.act, "cancel", job_id, reason=reason)

    def delete(self, job_id: int, *, reason: str | None = None) -> _actions.ActionResult:
        return self._session.run(_actions.act, "delete", job_id, reason=reason)

    def run_now(self, job_id: int, *, reason: str | None = None) -> _actions.ActionResult:
        """A scheduled or retryable job becomes available now (attempts and errors kept)."""
        return self._session.run(_actions.act, "run_now", job_id, reason=reason)

    def bulk(
        self,
        action: str,
        flt: JobFilter,
        *,
        dry_run: bool = False,
        cap: int = limits.DEFAULT_CAP,
        batch_size: int = limits.DEFAULT_BATCH,
        reason: str | None = None,
    ) -> _actions.BulkReport:
        """``action`` is requeue, cancel, delete or run_now; see :func:`forklift.ops.actions.bulk`."""
        return self._session.run(
            _actions.bulk, action, flt, dry_run=dry_run, cap=cap, batch_size=batch_size,
            reason=reason,
        )

    def requeue_many(
        self,
        flt: JobFilter,
        *,
        dry_run: bool = False,
        cap: int = limits.DEFAULT_CAP,
        batch_size: int = limits.DEFAULT_BATCH,
        reason: str | None = None,
    ) -> _actions.BulkReport:
        return self.bulk("requeue", flt, dry_run=dry_run, cap=cap, batch_size=batch_size,
                         reason=reason)

    def cancel_many(
        self,
        flt: JobFilter,
        *,
        dry_run: bool = False,
        cap: int = limits.DEFAULT_CAP,
        batch_size: int = limits.DEFAULT_BATCH,
        reason: str | None = None,
    ) -> _actions.BulkReport:
        return self.bulk("cancel", flt, dry_run=dry_run, cap=cap, batch_size=batch_size,
                         reason=reason)

    def delete_many(
        self,
        flt: JobFilter,
        *,
        dry_run: bool = False,
        cap: int = limits.DEFAULT_CAP,
        batch_size: int = limits.DEFAULT_BATCH,
        reason: str | None = None,
    ) -> _actions.BulkReport:
        return self.bulk("delete", flt, dry_run=dry_run, cap=cap, batch_size=batch_size,
                         reason=reason)

    def run_now_many(
        self,
        flt: JobFilter,
        *,
        dry_run: bool = False,
        cap: int = limits.DEFAULT_CAP,
        batch_size: int = limits.DEFAULT_BATCH,
        reason: str | None = None,
    ) -> _actions.BulkReport:
        return self.bulk("run_now", flt, dry_run=dry_run, cap=cap, batch_size=batch_size,
                         reason=reason)

    # Last: below this definition, ``list`` in an annotation would name the method.
    def list(
        self,
        flt: JobFilter | None = None,
        *,
        sort: Sort | str | None = None,
        limit: int = 50,
        cursor: str | None = None,
        count: bool = True,
    ) -> _jobs.JobPage:
        """A page of jobs matching ``flt``, sorted on the server, with a keyset ``cursor`` to
        the next page and a capped count."""
        return self._session.read(
            _jobs.list_jobs, flt, sort=sort, limit=limit, cursor=cursor, count=count
        )
