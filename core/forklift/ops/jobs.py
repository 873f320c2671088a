"""Reading jobs for operators: one job in full, and filtered, keyset-paginated lists."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import psycopg
from psycopg.rows import dict_row

from forklift._base.errors import JobNotFound
from forklift._jobs.job import JOB_COLUMNS, Job
from forklift.ops import history
from forklift.ops import job_logs as _job_logs
from forklift.ops import steps as _steps
from forklift.ops.context import OpsContext
from forklift.ops.errors import InvalidFilter
from forklift.ops.filters import Cursor, JobFilter, Sort
from forklift.ops.job_logs import JobLog
from forklift.ops.shape import Shape, jsonable
from forklift.ops.steps import Dependency, Parked, StepInfo

__all__ = [
    "COUNT_CAP",
    "LIST_COLUMNS",
    "MAX_PAGE",
    "PREVIEW",
    "Event",
    "JobDetail",
    "JobPage",
    "JobSummary",
    "capped_count",
    "count_by_state",
    "get_job",
    "list_jobs",
    "show",
    "timeline",
]

GET_SQL = "SELECT " + JOB_COLUMNS + " FROM {s}.jobs WHERE id = %s"

#: Counts stop here: "10,000+" is an answer an operator can act on, and it stays cheap.
COUNT_CAP = 10_000
PREVIEW = 200
MAX_PAGE = 500

LIST_COLUMNS = (
    "t.id, t.queue, t.kind, t.state, t.priority, t.attempt, t.max_attempts, t.run_at,"
    " t.created_at, t.attempted_at, t.finished_at, t.worker_id, t.batch_id, t.tags,"
    " t.tenant, t.enqueued_by, coalesce(t.payload_version, 1) AS payload_version,"
    " coalesce(t.weight, 1) AS weight,"
    f" left(t.args::text, {PREVIEW}) AS args_preview,"
    " t.errors -> -1 ->> 'code' AS last_error_code,"
    f" left(t.errors -> -1 ->> 'message', {PREVIEW}) AS last_error_message, "
    + _steps.PARKED_COLUMN  # why a scheduled job waits (sleeping, an event, other jobs)
)


def get_job(conn: psycopg.Connection[Any], schema: str, job_id: int) -> Job:
    row = conn.execute(history.render_read(GET_SQL, conn, schema), (job_id,)).fetchone()
    if row is None:
        raise JobNotFound(f"no job with id {job_id}: check the id with `forklift jobs list`", job_id=job_id)
    return Job.from_row(row)


def count_by_state(
    conn: psycopg.Connection[Any], schema: str, ids: list[int] | None = None
) -> dict[str, int]:
    """Jobs per state, over the whole table or the given ids (small tables and demos only)."""
    if ids is None:
        rows = conn.execute(history.render_read(
            "SELECT state, count(*) FROM {s}.jobs GROUP BY state", conn, schema))
    else:
        rows = conn.execute(
            history.render_read(
                "SELECT state, count(*) FROM {s}.jobs WHERE id = ANY(%s) GROUP BY state", conn,
                schema),
            (ids,),
        )
    return {str(s): int(n) for s, n in rows}


# -- lists ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class JobSummary(Shape):
    id: int
    queue: str
    kind: str
    state: str
    priority: int
    attempt: int
    max_attempts: int
    run_at: datetime
    created_at: datetime
    attempted_at: datetime | None
    finished_at: datetime | None
    worker_id: str | None
    batch_id: int | None
    tags: list[str]
    args_preview: str
    last_error_code: str | None
    last_error_message: str | None
    #: the job's tenant and who enqueued it (forklift.Job), None when the enqueue named neither
    tenant: str | None = None
    enqueued_by: str | None = None
    #: why a scheduled job waits (its state stays scheduled); None otherwise
    parked: Parked | None = None
    #: the payload version its producer declared (1: a kind without versions)
    payload_version: int = 1
    #: the slots it takes (``weight=``; 1 for a job that names none)
    weight: int = 1


@dataclass(frozen=True)
class JobPage(Shape):
    jobs: list[JobSummary]
    #: Pass back as ``cursor`` for the next page; None on the last page.
    next_cursor: str | None
    #: Jobs matching the filter, counted up to COUNT_CAP.
    count: int
    #: True when more than ``count`` jobs match ("10,000+").
    count_capped: bool
    sort: str
    filter: dict[str, Any] = field(default_factory=dict)

    @property
    def count_text(self) -> str:
        return f"{self.count:,}+" if self.count_capped else f"{self.count:,}"


def capped_count(
    conn: psycopg.Connection[Any], schema: str, flt: JobFilter, cap: int = COUNT_CAP
) -> tuple[int, bool]:
    where, params = flt.where()
    row = conn.execute(
        history.render_read(
            f"SELECT count(*) FROM (SELECT 1 FROM {{s}}.jobs t WHERE {where} LIMIT %s) x", conn,
            schema),
        [*params, cap + 1],
    ).fetchone()
    n = int(row[0]) if row else 0
    return min(n, cap), n > cap


def list_jobs(
    conn: psycopg.Connection[Any],
    ctx: OpsContext,
    flt: JobFilter | None = None,
    *,
    sort: Sort | str | None = None,
    limit: int = 50,
    cursor: str | None = None,
    count: bool = True,
) -> JobPage:
    """One page of jobs matching ``flt``, in ``sort`` order, after ``cursor``."""
    flt = (flt or JobFilter()).validate()
    order = sort if isinstance(sort, Sort) else Sort.parse(sort)
    if not 1 <= limit <= MAX_PAGE:
        raise InvalidFilter(f"limit must be between 1 and {MAX_PAGE}", field="limit")
    where, params = flt.where()
    if cursor:
        keyset, kparams = order.after(Cursor.decode(cursor, order))
        where, params = f"{where} AND {keyset}", params + kparams
    sql = (
        f"SELECT {LIST_COLUMNS} FROM {{s}}.jobs t WHERE {where}"
        f" ORDER BY {order.order_by()} LIMIT %s"
    )
    # The page and its count read one snapshot, so they agree (never "jobs 1-11 of 2").
    own = count and conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    with conn.transaction() if own else contextlib.nullcontext():
        if own:
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        with conn.cursor(row_factory=dict_row) as cur:
            rows = cur.execute(history.render_read(sql, conn, ctx.schema),
                               [*params, limit + 1]).fetchall()
        total, capped = capped_count(conn, ctx.schema, flt) if count else (0, False)
    more = len(rows) > limit
    rows = rows[:limit]
    next_cursor = None
    if more and rows:
        last = rows[-1]
        next_cursor = Cursor(order.key, order.descending, order.value_of(last), last["id"]).encode()
    if not count:
        total, capped = len(rows), more
    return JobPage(
        jobs=[JobSummary(**_steps.with_parked(r)) for r in rows],
        next_cursor=next_cursor,
        count=total,
        count_capped=capped,
        sort=("-" if order.descending else "") + order.key,
        filter=flt.to_json(),
    )


# -- one job in full --------------------------------------------------------------------------
@dataclass(frozen=True)
class Event(Shape):
    at: datetime | str | None
    event: str
    detail: str | None = None


@dataclass(frozen=True)
class JobDetail:
    """A job with its timeline: enqueued, each failed attempt, the current attempt, the end;
    its durable side (forklift.ops.steps): steps, the jobs it waits for, why it is parked; and
    its attempts' logs (forklift.ops.job_logs)."""

    job: Job
    timeline: list[Event]
    steps: list[StepInfo] = field(default_factory=list)
    waits_for: list[Dependency] = field(default_factory=list)
    parked: str | None = None
    #: each attempt's log, oldest first (forklift.ops.job_logs)
    logs: list[JobLog] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        out = self.job.to_json()
        out.pop("reused", None)
        out["timeline"] = jsonable(self.timeline)
        out["steps"] = jsonable(self.steps)
        out["waits_for"] = jsonable(self.waits_for)
        out["parked"] = self.parked
        out["logs"] = jsonable(self.logs)
        return out


def timeline(job: Job) -> list[Event]:
    events = [Event(job.created_at, "enqueued", f"queue {job.queue}, priority {job.priority}")]
    if job.run_at > job.created_at and job.attempt == 0 and not job.errors:
        events.append(Event(job.run_at, "scheduled", "due to run"))
    for e in job.errors:
        code = e.get("code") or "error"
        message = e.get("message") or e.get("type") or ""
        worker = f" on {e['worker']}" if e.get("worker") else ""
        events.append(
            Event(e.get("at"), f"attempt {e.get('attempt', '?')} {code}", f"{message}{worker}".strip())
        )
    if job.cancel_requested_at is not None:
        events.append(Event(job.cancel_requested_at, "cancel requested", None))
    if job.state == "running" and job.attempted_at is not None:
        events.append(
            Event(job.attempted_at, f"attempt {job.attempt} started", f"on {job.worker_id}")
        )
    elif job.state in ("retryable", "scheduled") and job.attempt > 0:
        events.append(Event(job.run_at, "next attempt due", None))
    if job.finished_at is not None:
        events.append(Event(job.finished_at, job.state, None))
    return sorted(events, key=lambda ev: _sort_key(ev.at))


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _sort_key(at: datetime | str | None) -> datetime:
    """Error entries carry their time as text; order everything as UTC instants."""
    if isinstance(at, str):
        try:
            at = datetime.fromisoformat(at)
        except ValueError:
            return _EPOCH
    if at is None:
        return _EPOCH
    return at if at.tzinfo else at.replace(tzinfo=UTC)


def show(conn: psycopg.Connection[Any], ctx: OpsContext, job_id: int) -> JobDetail:
    job = get_job(conn, ctx.schema, job_id)
    steps, deps = _steps.read(conn, ctx.schema, job_id)
    return JobDetail(job, timeline(job), steps, deps, _steps.parked(job, steps, deps),
                     _job_logs.read(conn, ctx.schema, job_id))
