"""A claimed job as the claim statements return it, and the SQL the claims share.

The worker's claim (forklift._worker.claim), the flow claim (forklift._features.flow.claim) and
the hand-off (forklift._features.flow.handoff) stamp rows the same way and answer with the same
columns, so a row of any of them becomes the same :class:`Claimed`.
"""

from __future__ import annotations

import json
import json.scanner
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

# Queues with a concurrency limit are serialised by a transaction-scoped advisory lock.
LOCK_LIMITED_SQL = (
    "SELECT pg_advisory_xact_lock(hashtextextended('forklift.queue:' || name, 0))"
    " FROM {s}.queues WHERE name = ANY(%s::text[]) AND concurrency IS NOT NULL ORDER BY name"
)

# A queue is open when it is not paused, or its pause has expired (``qs``: its queues row).
OPEN_SQL = """(qs.name IS NULL OR NOT qs.paused
                   OR (qs.pause_expires_at IS NOT NULL AND qs.pause_expires_at <= now()))"""

# Claimed rows are stamped with a fresh fence and a lease. They are found by id through an
# array (not a join with c), so that a generic plan, which cannot know how few rows c holds,
# still reads them from the primary key. json columns come back as text: the worker decodes
# them row by row, so one row it cannot decode fails that job alone.
TAKE_SQL = """UPDATE {s}.jobs AS t
SET state = 'running', attempt = t.attempt + 1, worker_id = %(w)s,
    attempted_at = CASE WHEN t.id = ANY (ARRAY(SELECT s.id FROM s)) THEN now() END,
    fence = nextval('{s}.fence_seq'), lease_expires_at = now() + make_interval(secs => %(lease)s),
    cancel_requested_at = NULL
WHERE t.id = ANY (ARRAY(SELECT c.id FROM c))
RETURNING t.id, t.queue, t.kind, t.args::text, t.attempt, t.max_attempts, t.fence, t.retry::text,
          t.meta::text, t.batch_id, t.priority, t.run_at, t.attempted_at IS NOT NULL, t.traceparent,
          extract(epoch FROM now() - t.run_at)::float8, t.tenant, t.enqueued_by,
          extract(epoch FROM t.expires_at - now())::float8, t.payload_version, t.weight"""


# The C scanner json.loads ends in, without its two whitespace matches a row: a jsonb column
# read as text is one JSON value with nothing around it (StopIteration: not JSON at all).
_scan: Callable[[str, int], tuple[Any, int]] = json.scanner.make_scanner(
    json.JSONDecoder())  # type: ignore[arg-type]  # typeshed's stub names the wrong type


@dataclass(frozen=True)
class Claimed:
    id: int
    queue: str
    kind: str
    args: Any
    attempt: int
    max_attempts: int
    fence: int
    retry: dict[str, Any] | None
    meta: dict[str, Any]
    batch_id: int | None
    priority: int
    run_at: datetime | None = None
    #: The claim stamped this attempt started (it went straight to a free slot).
    started: bool = True
    #: Why the row's json could not be decoded (the job then fails ``invalid_payload``).
    undecodable: str | None = None
    #: W3C trace context of the enqueue that made the job (migration 0010), if it was traced
    traceparent: str | None = None
    #: seconds from when the job was due (run_at) to this claim, by the server's clock
    lag: float | None = None
    #: The job's tenant and who enqueued it (migration 0023), for traces and log lines
    tenant: str | None = None
    enqueued_by: str | None = None
    #: When the job's start-by deadline passes, on this process's monotonic clock (the seconds
    #: left by the server's clock at the claim, from when the answer was read); None: no
    #: deadline. A job claimed past it never runs its handler (it goes dead, ``expired``).
    expires: float | None = None
    #: The payload version its producer declared (migration 0029); None: version 1.
    payload_version: int | None = None
    #: The slots it takes (migration 0032); None: one.
    weight: int | None = None

    @property
    def expired(self) -> bool:
        """Whether the job's start-by deadline has passed (its handler must not start)."""
        return self.expires is not None and time.monotonic() >= self.expires

    @classmethod
    def from_row(cls, row: tuple[Any, ...]) -> Claimed:
        """A row of the claim, its json decoded here: a row that cannot be decoded (e.g. an
        integer longer than Python's digit limit) is returned with ``undecodable`` set, so it
        fails alone instead of failing the claim of its whole batch."""
        (id_, queue, kind, args, attempt, max_attempts, fence, retry, meta, batch_id, priority,
         run_at, started, traceparent, lag, tenant, enqueued_by, left, version, weight) = row
        broken = None
        try:
            args = _scan(args, 0)[0]
        except StopIteration:
            broken, args = "the stored args cannot be decoded: not JSON", None
        except (ValueError, RecursionError) as exc:
            broken, args = f"the stored args cannot be decoded: {exc}", None
        try:
            retry = json.loads(retry) if retry is not None else None
        except (ValueError, RecursionError):
            retry = None  # the kind's own backoff applies
        try:
            meta = {} if meta == "{}" else json.loads(meta)  # most jobs have none
        except (ValueError, RecursionError) as exc:
            broken, meta = broken or f"the stored meta cannot be decoded: {exc}", {}
        # The frozen dataclass's __init__ sets each field through object.__setattr__ (2 us a
        # job of the worker's CPU); filling the instance's __dict__ at once makes the same
        # object, as frozen afterwards as any other.
        job = object.__new__(cls)
        object.__setattr__(job, "__dict__", {
            "id": id_, "queue": queue, "kind": kind, "args": args, "attempt": attempt,
            "max_attempts": max_attempts, "fence": fence, "retry": retry, "meta": meta,
            "batch_id": batch_id, "priority": priority, "run_at": run_at, "started": started,
            "undecodable": broken, "traceparent": traceparent, "lag": lag,
            "tenant": tenant, "enqueued_by": enqueued_by,
            "expires": None if left is None else time.monotonic() + left,
            "payload_version": version, "weight": weight,
        })
        return job
