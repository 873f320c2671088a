"""`forklift jobs list|show|explain|retry|cancel|delete|run-now`: thin doors onto forklift.ops."""

from __future__ import annotations

import inspect
import json
from dataclasses import replace
from datetime import timedelta
from typing import TYPE_CHECKING, Annotated, Any

import typer

from forklift.cli.format import plural, stamp
from forklift.cli.format import state as state_text
from forklift.cli.kit import Call, command, ident, out, safe, say_error
from forklift.ops.job_logs import line_text
from forklift.ops.limits import DEFAULT_CAP

if TYPE_CHECKING:
    from forklift.ops import BulkReport, Explanation, JobFilter, Operator

#: Shown in --help without importing the filters (a test keeps them equal to ops.filters').
SORT_KEYS = ("id", "created_at", "run_at", "attempted_at", "finished_at", "priority",
             "state", "queue", "kind", "attempt", "changed_at")
TIME_FIELDS = ("created_at", "run_at", "attempted_at", "finished_at")

jobs_app = typer.Typer(help="Inspect and act on jobs.", no_args_is_help=True)

# -- filter options (shared by list and the bulk actions) ----------------------------------
States = Annotated[
    list[str] | None,
    typer.Option("--state", "-s", help="State(s): repeat or comma-separate."),
]
Queues = Annotated[list[str] | None, typer.Option("--queue", "-q", help="Queue(s).")]
Kinds = Annotated[list[str] | None, typer.Option("--kind", "-k", help="Kind(s).")]
Tags = Annotated[list[str] | None, typer.Option("--tag", help="Jobs carrying every tag given.")]
Batch = Annotated[int | None, typer.Option("--batch", help="Jobs of this batch id.")]
Tenants = Annotated[list[str] | None, typer.Option("--tenant", help="Jobs of these tenant(s).")]
EnqueuedBy = Annotated[
    list[str] | None,
    typer.Option("--enqueued-by", help="Jobs enqueued by these (as their enqueue named them)."),
]
Search = Annotated[
    str | None,
    typer.Option("--search", help="Text in the args or the error history (case-insensitive)."),
]
IdMin = Annotated[int | None, typer.Option("--id-min", help="Ids from this one (inclusive).")]
IdMax = Annotated[int | None, typer.Option("--id-max", help="Ids up to this one (inclusive).")]
After = Annotated[
    str | None,
    typer.Option("--after", help="From this time: ISO 8601 (UTC if no offset) or a duration ago (2h)."),
]
Before = Annotated[str | None, typer.Option("--before", help="Before this time (same forms).")]
Args = Annotated[
    list[str] | None,
    typer.Option("--arg", help="A payload field, as in the console's filter: args.customer.id:42"
                 " (a number also matches its text; repeat for more, all must match)."),
]
PayloadVersion = Annotated[
    list[int] | None,
    typer.Option("--payload-version", min=1,
                 help="Jobs of these payload version(s) (1: a kind without versions)."),
]
TimeField = Annotated[
    str,
    typer.Option("--time-field", help=f"Column --after/--before apply to: {', '.join(TIME_FIELDS)}."),
]


def build_filter(
    state: list[str] | None,
    queue: list[str] | None,
    kind: list[str] | None,
    tag: list[str] | None,
    batch: int | None,
    search: str | None,
    id_min: int | None,
    id_max: int | None,
    after: str | None,
    before: str | None,
    time_field: str,
    ids: list[int] | None = None,
    args: list[str] | None = None,
    *,
    tenant: list[str] | None = None,
    enqueued_by: list[str] | None = None,
    payload_version: list[int] | None = None,
) -> JobFilter:
    from forklift.ops import JobFilter

    return JobFilter.build(
        states=state, queues=queue, kinds=kind, tags=tag, batch_id=batch, text=search,
        id_min=id_min, id_max=id_max, after=after, before=before, time_field=time_field,
        ids=ids, args=args, tenants=tenant, enqueued_by=enqueued_by,
        payload_versions=payload_version,
    )


# -- list ----------------------------------------------------------------------------------
@jobs_app.command("list")
@command()
def jobs_list(
    cx: Call,
    state: States = None,
    queue: Queues = None,
    kind: Kinds = None,
    tag: Tags = None,
    tenant: Tenants = None,
    enqueued_by: EnqueuedBy = None,
    batch: Batch = None,
    search: Search = None,
    id_min: IdMin = None,
    id_max: IdMax = None,
    after: After = None,
    before: Before = None,
    time_field: TimeField = "created_at",
    arg: Args = None,
    payload_version: PayloadVersion = None,
    sort: Annotated[
        str,
        typer.Option(help=f"Sort key ({', '.join(SORT_KEYS)}); prefix - for descending."),
    ] = "-id",
    limit: Annotated[int, typer.Option(min=1, max=500, help="Jobs per page.")] = 50,
    cursor: Annotated[
        str | None, typer.Option(help="Continue after this page (next_cursor of the last one).")
    ] = None,
) -> None:
    """List jobs matching a filter, a page at a time (keyset pagination)."""
    flt = build_filter(state, queue, kind, tag, batch, search, id_min, id_max, after, before,
                       time_field, args=arg, tenant=tenant, enqueued_by=enqueued_by,
                       payload_version=payload_version)
    page = cx.op.jobs(flt, sort=sort, limit=limit, cursor=cursor)
    if cx.as_json:
        cx.show(page)
        return
    from rich.table import Table

    table = Table(box=None, header_style="bold", pad_edge=False)
    # The tenant column only when a job on the page has one: untenanted installations see the
    # table they always saw.
    tenanted = any(j.tenant is not None for j in page.jobs)
    # The payload version column likewise, only when a job on the page is not version 1.
    versioned = any(j.payload_version != 1 for j in page.jobs)
    # The weight column likewise, only when a job on the page takes more than one slot.
    weighted = any(j.weight != 1 for j in page.jobs)
    for col in ("id", "state", "queue", "kind", *(("version",) if versioned else ()),
                *(("weight",) if weighted else ()),
                *(("tenant",) if tenanted else ()), "attempt",
                "created", "run at / finished", "last error (code: message)"):
        table.add_column(col, justify="right" if col == "id" else "left", overflow="fold")
    for j in page.jobs:
        last = ""
        if j.last_error_code:
            last = f"{ident(j.last_error_code)}: {safe((j.last_error_message or '')[:60])}"
        table.add_row(
            str(j.id),
            state_text(j.state) if j.parked is None else safe(j.parked.describe(stamp)),
            ident(j.queue), ident(j.kind),
            *((f"v{j.payload_version}",) if versioned else ()),
            *((str(j.weight),) if weighted else ()),
            *((ident(j.tenant) if j.tenant is not None else "",) if tenanted else ()),
            f"{j.attempt}/{j.max_attempts}", stamp(j.created_at),
            stamp(j.finished_at or j.run_at), last,
        )
    out.print(table)
    line = f"{len(page.jobs)} shown of {page.count_text} matching"
    if page.next_cursor:
        line += f"; next page: --cursor {page.next_cursor}"
    out.print(f"[dim]{line}[/]")


# -- show ----------------------------------------------------------------------------------
JobId = Annotated[int, typer.Argument(help="The job's id.")]


def _json_text(value: Any) -> str:
    return safe(json.dumps(value, ensure_ascii=False))


@jobs_app.command("show")
@command()
def jobs_show(cx: Call, job_id: JobId) -> None:
    """Show one job in full: args, meta, tags, errors with tracebacks, result, lease, timeline."""
    detail = cx.op.job(job_id)
    if cx.as_json:
        cx.show(detail)
        return
    job = detail.job
    out.print(f"[bold]job {job.id}[/]  {ident(job.kind)}  {state_text(job.state)}")
    aged = f" (given {job.priority_base}, raised by aging)" if job.priority_base is not None else ""
    out.print(f"queue {ident(job.queue)}  priority {job.priority}{aged}  attempt"
              f" {job.attempt}/{job.max_attempts}")
    if job.payload_version is not None:
        out.print(f"payload version: {job.payload_version}")
    if job.weight is not None:
        out.print(f"weight: {job.weight} slots")
    if job.tags:
        out.print(f"tags: {', '.join(ident(t) for t in job.tags)}")
    if job.tenant is not None:
        out.print(f"tenant: {ident(job.tenant)}")
    if job.enqueued_by is not None:
        out.print(f"enqueued by: {ident(job.enqueued_by)}")
    if job.unique_key:
        out.print(f"unique key: {ident(job.unique_key)}")
    if job.batch_id is not None:
        out.print(f"batch: {job.batch_id}")
    if job.expires_at is not None:
        out.print(f"start by: {stamp(job.expires_at)}")
    if job.debounce_key is not None:
        out.print(f"debounce key: {ident(job.debounce_key)}")
    out.print(f"args: {_json_text(job.args)}")
    if job.meta:
        out.print(f"meta: {_json_text(job.meta)}")
    if job.result is not None:
        out.print(f"result: {_json_text(job.result)}")
    if job.partial is not None:
        out.print(f"partial result: {_json_text(job.partial)}")
    if job.progress:
        out.print(f"progress: {_json_text(job.progress)}")
    if job.worker_id and job.state == "running":
        out.print(f"lease: worker {ident(job.worker_id)}, fence {job.fence}, until"
                  f" {stamp(job.lease_expires_at)}")
    if job.errors:
        out.print("[bold]errors[/]")
        for e in job.errors:
            batch = f" (in a batch of {safe(e['batch'])})" if e.get("batch") else ""
            out.print(f"  attempt {safe(e.get('attempt'))} at {stamp(e.get('at'))}{batch}:"
                      f" [bold]{ident(e.get('code'))}[/] {safe(e.get('type') or '')}"
                      f" {safe(e.get('message') or '')}")
            for frame in e.get("traceback") or []:
                out.print(f"      {safe(frame.get('file'))}:{safe(frame.get('line'))}"
                          f" in {safe(frame.get('func'))}")
    if detail.parked:
        out.print(f"parked: {safe(detail.parked)}")
    if detail.waits_for:
        out.print("waits for: " + ", ".join(f"job {d.job_id} ({d.state})" for d in detail.waits_for)
                  + f"; if one fails: {detail.waits_for[0].policy}")
    if detail.steps:
        out.print("[bold]steps[/]")
        for st in detail.steps:
            took = f" {st.seconds:.3f}s" if st.seconds is not None else ""
            out.print(f"  {safe(st.name)}  {safe(st.state)}  attempt {st.attempt}"
                      f"  {stamp(st.started_at)}{took}  {safe(st.summary or '')}")
    if detail.logs:
        out.print("[bold]logs[/]")
        for entry in detail.logs:
            out.print(f"  attempt {entry.attempt} [dim]({stamp(entry.written_at)})[/]")
            for line in entry.lines:
                out.print(f"    {safe(line_text(line))}")
    out.print("[bold]timeline[/]")
    for ev in detail.timeline:
        out.print(f"  {stamp(ev.at)}  {safe(ev.event)}"
                  + (f"  [dim]{safe(ev.detail)}[/]" if ev.detail else ""))


# -- explain -------------------------------------------------------------------------------
@jobs_app.command("explain")
@command()
def jobs_explain(cx: Call, job_id: JobId) -> None:
    """Why isn't this job running? Plain sentences from facts in the database."""
    ex = cx.op.explain(job_id)
    cx.show(ex, lambda e: print_explanation(
        f"[bold]job {e.job_id}[/] ({state_text(e.state or '')}, queue {ident(e.queue)}):", e))


def print_explanation(header: str, ex: Explanation) -> None:
    out.print(header)
    for r in ex.reasons:
        out.print(f"  • {safe(r.text)} [dim]({r.code})[/]")


# -- retry / cancel / delete ---------------------------------------------------------------
_HELP = {
    "requeue": "Requeue finished jobs (completed, cancelled, dead): they run again with a fresh"
    " attempt budget; their error history is kept. A live job, or one whose unique key a live"
    " job now holds, is refused (not_requeueable).",
    "cancel": "Cancel live jobs: waiting ones (scheduled, available, retryable) end cancelled at"
    " once; a running one's worker is told to stop it (it ends cancelled, or completed if its"
    " handler had already finished).",
    "delete": "Delete finished jobs (completed, cancelled, dead). Live jobs are refused: cancel"
    " them first.",
    "run_now": "Run scheduled or retryable jobs now: they become available at once (a retry"
    " keeps its attempt count and error history) and a worker is woken. Other states are"
    " refused (not_runnable).",
}
#: How an action reads in a question ("Run now job 5?").
_VERB = {"requeue": "Requeue", "cancel": "Cancel", "delete": "Delete", "run_now": "Run now"}


def _action_command(action: str) -> Any:
    def body(
        cx: Call,
        job_ids: Annotated[
            list[int] | None, typer.Argument(help="Job ids; or select jobs with the filter options.")
        ] = None,
        state: States = None,
        queue: Queues = None,
        kind: Kinds = None,
        tag: Tags = None,
        tenant: Tenants = None,
        enqueued_by: EnqueuedBy = None,
        batch: Batch = None,
        search: Search = None,
        id_min: IdMin = None,
        id_max: IdMax = None,
        after: After = None,
        before: Before = None,
        time_field: TimeField = "created_at",
        arg: Args = None,
        payload_version: PayloadVersion = None,
        all_jobs: Annotated[
            bool, typer.Option("--all", help="With no filter: every job the action applies to.")
        ] = False,
        cap: Annotated[
            int, typer.Option(min=1, max=1_000_000, help="Most jobs acted on per call.")
        ] = DEFAULT_CAP,
        expires: Annotated[str | None, typer.Option(
            "--expires", metavar="DURATION|off",
            help="Requeue by id only: the job may start at most this long from now (30m, 2h,"
                 " 1d); off: no start-by deadline (the default).")] = None,
    ) -> None:
        flt = build_filter(state, queue, kind, tag, batch, search, id_min, id_max, after,
                           before, time_field, args=arg, tenant=tenant,
                           enqueued_by=enqueued_by, payload_version=payload_version)
        ids = list(dict.fromkeys(job_ids or []))
        if not ids and flt.is_empty() and not all_jobs:
            raise cx.usage(
                f"name job ids, or select jobs with a filter (e.g. --state dead --queue mail);"
                f" pass --all to {action} every job it applies to"
            )
        deadline = _expires(cx, expires, ids, flt)
        if ids and flt.is_empty() and (not cx.dry_run or expires is not None):
            _one_by_one(cx, action, ids, expires=deadline)
            return
        if ids:
            flt = replace(flt, ids=tuple(ids))
        bulk(cx, action, lambda op, **kw: op.bulk(action, flt, **kw), cap)

    body.__doc__ = _HELP[action]
    body.__name__ = f"jobs_{action}"
    if action != "requeue":  # --expires is a requeue's alone
        sig = inspect.signature(body, eval_str=True)
        body.__signature__ = sig.replace(  # type: ignore[attr-defined]
            parameters=[p for p in sig.parameters.values() if p.name != "expires"])
    return command(acts=True, confirms=True)(body)


def _expires(cx: Call, value: str | None, ids: list[int], flt: Any) -> timedelta | None:
    """``--expires``: a duration, or off (None: no start-by deadline, as without the flag)."""
    if value is None or value.strip().lower() in ("off", "none"):
        return None
    if not ids or not flt.is_empty():
        raise cx.usage("--expires applies to jobs named by id (forklift jobs retry 12 --expires"
                       " 1h), not to a filter")
    from forklift.ops._parse import duration

    return duration(value, "expires")  # a bad one: a usage error naming --expires


def _one_by_one(cx: Call, action: str, ids: list[int], *,
                expires: timedelta | None = None) -> None:
    from forklift import ForkliftError

    op = cx.op
    if cx.dry_run:  # a rehearsal of each, rolled back
        rehearse = op.dry_run
    else:
        op.ctx.require_write(action)
        what = (f"job {ids[0]}" if len(ids) == 1
                else f"{len(ids)} jobs ({', '.join(map(str, ids[:10]))})")
        cx.confirm(f"{_VERB.get(action, action.capitalize())} {what}?")
    results: list[dict[str, Any]] = []
    errors: list[dict[str, Any]] = []
    extra = {"expires": expires} if expires is not None else {}
    for job_id in ids:
        try:
            if cx.dry_run:
                def one(o: Operator, j: int = job_id) -> Any:
                    return getattr(o.jobs, action)(j, reason=cx.reason, **extra)

                r = rehearse(one)
            else:
                r = getattr(op.jobs, action)(job_id, reason=cx.reason, **extra)
            results.append(r.to_json())
            if not cx.as_json:
                out.print(f"job {job_id}: {r.outcome} (was {r.previous_state})")
        except ForkliftError as exc:
            errors.append({"job_id": job_id, **exc.to_dict()})
            say_error(f"job {job_id}: {exc.message}", exc.code, as_json=False)
    if cx.as_json:
        cx.show({"action": action, "results": results, "errors": errors})
    if errors:
        raise typer.Exit(1)


def bulk(cx: Call, action: str, run: Any, cap: int) -> None:
    """A bulk action: ``run(op, dry_run=, cap=, reason=)`` gives its BulkReport. Without --yes
    the dry run is shown first and confirmed (and nothing is asked when nothing matches)."""
    op: Operator = cx.op
    if cx.dry_run:
        print_report(run(op, dry_run=True, cap=cap), cx.as_json)
        return
    op.ctx.require_write(action)
    if not cx.yes:
        preview = run(op, dry_run=True, cap=cap)
        if preview.matched == 0:
            print_report(preview, cx.as_json)
            return
        if not cx.as_json:
            print_report(preview, False)
        cx.confirm(f"{_VERB.get(action, action.capitalize())} these {preview.matched:,} jobs?")
    print_report(run(op, cap=cap, reason=cx.reason), cx.as_json)


def print_report(r: BulkReport, as_json: bool) -> None:
    if as_json:
        from forklift.cli.kit import emit_json

        emit_json(r.to_json())
        return
    states = ", ".join(f"{n:,} {s}" for s, n in sorted(r.by_state.items())) or "none"
    more = f" (capped at {r.cap:,}: more match, run again)" if r.more else ""
    sample = ", ".join(map(str, r.sample_ids)) + (" ..." if r.matched > len(r.sample_ids) else "")
    if r.dry_run:
        out.print(f"dry run: {r.action} would act on {plural(r.matched, 'job')}{more}: {states}")
        if r.sample_ids:
            out.print(f"  ids: {sample}")
        return
    how = ", ".join(f"{n:,} {o}" for o, n in sorted(r.outcomes.items())) or "nothing"
    out.print(f"{r.action}: {how} in {plural(r.batches, 'batch', 'batches')}{more}")
    if r.skipped:
        out.print(f"  skipped {r.skipped:,} that changed meanwhile:"
                  f" {', '.join(map(str, r.skipped_ids))}")


jobs_app.command("retry")(_action_command("requeue"))
jobs_app.command("cancel")(_action_command("cancel"))
jobs_app.command("delete")(_action_command("delete"))
jobs_app.command("run-now")(_action_command("run_now"))
