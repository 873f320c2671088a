"""What an app enqueues and reads through its pools: jobs by kind name, prepared rows, many
kinds at once, batches, and one job or batch by id.

A mixin of :class:`forklift._app.app.Forklift` (its methods take the app as ``self``); batches
load on first use, as the app's other features do.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Literal, TypeVar, cast

from forklift import hooks as _hooks
from forklift._jobs import insert as _enq
from forklift._jobs.job import Job

if TYPE_CHECKING:
    import psycopg

    from forklift._app.app import Forklift
    from forklift._app.kind import JobKind
    from forklift._db.steps import Steps, Tx
    from forklift._jobs.batch import Batch

__all__ = ["EnqueueMethods"]

T = TypeVar("T")


class EnqueueMethods:
    if TYPE_CHECKING:  # what the methods use of the app (forklift._app.app.Forklift)
        schema: str

        def kind(self, name: str) -> JobKind[Any, Any]: ...
        def _run(self, steps: Steps[T], conn: psycopg.Connection[Any] | None = None,
                 tx: Tx = "none") -> T: ...
        async def _run_async(self, steps: Steps[T],
                             conn: psycopg.AsyncConnection[Any] | None = None,
                             tx: Tx = "none") -> T: ...

    # -- enqueueing by name -----------------------------------------------------------------
    def enqueue(self, kind: str, args: Any, **options: Any) -> Job:
        """Enqueue by kind name (validates against the declared kind)."""
        return self.kind(kind).enqueue(args, **options)

    async def enqueue_async(self, kind: str, args: Any, **options: Any) -> Job:
        """:meth:`enqueue` for asyncio."""
        return await self.kind(kind).enqueue_async(args, **options)

    def enqueue_rows(
        self, rows: list[_enq.Row], *, conn: psycopg.Connection[Any] | None = None
    ) -> list[int]:
        """Store prepared rows (``JobKind.row``/``rows``) in one transaction; their ids."""
        if not rows:
            return []
        ids: list[int] = self._run(_enq.many_steps(self.schema, rows), conn, "atomic")
        if _hooks.of(cast("Forklift", self)) is not None:
            _hooks.emit_enqueued_rows(cast("Forklift", self), rows, ids)
        return ids

    async def enqueue_rows_async(
        self, rows: list[_enq.Row], *, conn: psycopg.AsyncConnection[Any] | None = None
    ) -> list[int]:
        """:meth:`enqueue_rows` for asyncio."""
        if not rows:
            return []
        ids: list[int] = await self._run_async(_enq.many_steps(self.schema, rows), conn,
                                               "atomic")
        if _hooks.of(cast("Forklift", self)) is not None:
            _hooks.emit_enqueued_rows(cast("Forklift", self), rows, ids)
        return ids

    def _rows_of(
        self, items: Iterable[tuple[str, Any] | tuple[str, Any, dict[str, Any]]]
    ) -> list[_enq.Row]:
        rows = []
        for item in items:
            opts: dict[str, Any] = item[2] if len(item) == 3 else {}
            rows.append(self.kind(item[0]).row(item[1], **opts))
        return rows

    def enqueue_many(
        self, items: Iterable[tuple[str, Any] | tuple[str, Any, dict[str, Any]]],
        *, conn: psycopg.Connection[Any] | None = None,
    ) -> list[int]:
        """Enqueue jobs of several kinds in one round trip: ``(kind, args[, options])`` each."""
        return self.enqueue_rows(self._rows_of(items), conn=conn)

    async def enqueue_many_async(
        self, items: Iterable[tuple[str, Any] | tuple[str, Any, dict[str, Any]]],
        *, conn: psycopg.AsyncConnection[Any] | None = None,
    ) -> list[int]:
        """:meth:`enqueue_many` for asyncio."""
        return await self.enqueue_rows_async(self._rows_of(items), conn=conn)

    # -- batches (see forklift._features.batches) ----------------------------------------------------
    def _batch_steps(self, kind: str | JobKind[Any, Any], targets: Iterable[Any],
                     options: dict[str, Any]) -> Steps[tuple[Batch, bool]]:
        from forklift._features import batches as _batches

        return _batches.submit_steps(_batches.prepare(cast("Forklift", self), kind, targets, **options))

    def batch(
        self,
        kind: str | JobKind[Any, Any],
        targets: Iterable[Any],
        *,
        caller: str,
        mode: Literal["serial", "parallel"] = "parallel",
        max_parallel: int | None = None,
        key: str | None = None,
        on_complete: Any = None,
        on_success: Any = None,
        meta: dict[str, Any] | None = None,
        conn: psycopg.Connection[Any] | None = None,
    ) -> tuple[Batch, bool]:
        """Submit many targets of one kind as a batch; returns ``(batch, reused)``.

        Idempotent per (caller, key) within the TTL, then capped; raises a BatchRefused
        subclass (``too_many_targets``, ``caller_busy``, ``busy``) or an EnqueueRefused for a bad
        target, storing nothing. With ``conn=`` it joins the caller's transaction.
        """
        steps = self._batch_steps(kind, targets, dict(
            caller=caller, mode=mode, max_parallel=max_parallel, key=key,
            on_complete=on_complete, on_success=on_success, meta=meta))
        return self._run(steps, conn, "savepoint")

    async def batch_async(
        self,
        kind: str | JobKind[Any, Any],
        targets: Iterable[Any],
        *,
        caller: str,
        mode: Literal["serial", "parallel"] = "parallel",
        max_parallel: int | None = None,
        key: str | None = None,
        on_complete: Any = None,
        on_success: Any = None,
        meta: dict[str, Any] | None = None,
        conn: psycopg.AsyncConnection[Any] | None = None,
    ) -> tuple[Batch, bool]:
        """:meth:`batch` for asyncio."""
        steps = self._batch_steps(kind, targets, dict(
            caller=caller, mode=mode, max_parallel=max_parallel, key=key,
            on_complete=on_complete, on_success=on_success, meta=meta))
        return await self._run_async(steps, conn, "savepoint")

    def get_batch(self, batch_id: int) -> Batch | None:
        """One batch by id, or None."""
        from forklift._features import batches as _batches

        return self._run(_batches.get_steps(self.schema, batch_id))

    def get_job(self, job_id: int) -> Job | None:
        """One job by id, or None."""
        return self._run(_enq.get_steps(self.schema, job_id))
