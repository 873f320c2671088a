"""`forklift jobs list|show|explain|retry|cancel|delete`: thin doors onto forklift.ops."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Annotated, Any

import typer
from rich.table import Table

from forklift import ForkliftError
from forklift.ops import BulkReport, JobFilter, Operator
from forklift.ops.actions import DEFAULT_CAP
from forklift.ops.filters import SORT_KEYS, TIME_FIELDS
from forklift_console.opskit import (
    Actor,
    DryRun,
    Dsn,
    Json,
    ReadOnlyOpt,
    Reason,
    Schema,
    Yes,
    confirm,
    emit_json,
    err,
    handled,
    operator,
    out,
    safe,
    stamp,
    usage,
)
from forklift_console.opskit import state as state_text

# -- filter options (shared by list and the bulk actions) ----------------------------------
States = Annotated[
    list[str] | None,
    typer.Option("--state", "-s", help="State(s): repeat or comma-separate."),
]
Queues = Annotated[list[str] | None, typer.Option("--queue", "-q", help="Queue(s).")]
Kinds = Annotated[list[str] | None, typer.Option("--kind", "-k", help="Kind(s).")]
Tags = Annotated[list[str] | None, typer.Option("--tag", help="Jobs carrying every tag given.")]
Batch = Annotated[int | None, typer.Option("--batch", help="Jobs of this batch id.")]
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
) -> JobFilter:
    return JobFilter.build(
        states=state, queues=queue, kinds=kind, tags=tag, batch_id=batch, text=search,
        id_min=id_min, id_max=id_max, after=after, before=before, time_field=time_field,
        ids=ids,
    )


def register(jobs_app: typer.Typer) -> None:
    jobs_app.command("list")(jobs_list)
    jobs_app.command("show")(jobs_show)
    jobs_app.command("explain")(jobs_explain)
    jobs_app.command("retry")(_action_command("requeue"))
    jobs_app.command("cancel")(_action_command("cancel"))
    jobs_app.command("delete")(_action_command("delete"))


# -- list ----------------------------------------------------------------------------------
def jobs_list(
    state: States = None,
    queue: Queues = None,
    kind: Kinds = None,
    tag: Tags = None,
    batch: Batch = None,
    search: Search = None,
    id_min: IdMin = None,
    id_max: IdMax = None,
    after: After = None,
    before: Before = None,
    time_field: TimeField = "created_at",
    sort: Annotated[
        str,
        typer.Option(help=f"Sort key ({', '.join(SORT_KEYS)}); prefix - for descending."),
    ] = "-id",
    limit: Annotated[int, typer.Option(min=1, max=500, help="Jobs per page.")] = 50,
    cursor: Annotated[
        str | None, typer.Option(help="Continue after this page (next_cursor of the last one).")
    ] = None,
    read_only: ReadOnlyOpt = False,
    dsn: Dsn = None,
    schema: Schema = None,
    as_json: Json = False,
) -> None:
    """List jobs matching a filter, a page at a time (keyset pagination)."""
    with handled(as_json):
        flt = build_filter(state, queue, kind, tag, batch, search, id_min, id_max, after,
                           before, time_field)
        with operator(dsn, schema, None, read_only) as op:
            page = op.jobs(flt, sort=sort, limit=limit, cursor=cursor)
    if as_json:
        emit_json(page.to_json())
        return
    table = Table(box=None, header_style="bold", pad_edge=False)
    for col in ("id", "state", "queue", "kind", "attempt", "created", "run at / finished",
                "last error"):
        table.add_column(col, justify="right" if col == "id" else "left", overflow="fold")
    for j in page.jobs:
        last = ""
        if j.last_error_code:
            last = f"{j.last_error_code}: {(j.last_error_message or '')[:60]}"
        table.add_row(
            str(j.id), state_text(j.state), safe(j.queue), safe(j.kind),
            f"{j.attempt}/{j.max_attempts}", stamp(j.created_at),
            stamp(j.finished_at or j.run_at), safe(last),
        )
    out.print(table)
    line = f"{len(page.jobs)} shown of {page.count_text} matching"
    if page.next_cursor:
        line += f"; next page: --cursor {page.next_cursor}"
    out.print(f"[dim]{line}[/]")


# -- show ----------------------------------------------------------------------------------
def jobs_show(
    job_id: Annotated[int, typer.Argument(help="The job's id.")],
    read_only: ReadOnlyOpt = False,
    dsn: Dsn = None,
    schema: Schema = None,
    as_json: Json = False,
) -> None:
    """Show one job in full: args, meta, tags, errors with tracebacks, result, lease, timeline."""
    with handled(as_json), operator(dsn, schema, None, read_only) as op:
        detail = op.job(job_id)
    if as_json:
        emit_json(detail.to_json())
        return
    job = detail.job
    out.print(f"[bold]job {job.id}[/]  {safe(job.kind)}  {state_text(job.state)}")
    out.print(f"queue {safe(job.queue)}  priority {job.priority}  attempt"
              f" {job.attempt}/{job.max_attempts}")
    if job.tags:
        out.print(f"tags: {safe(', '.join(job.tags))}")
    if job.unique_key:
        out.print(f"unique key: {safe(job.unique_key)}")
    if job.batch_id is not None:
        out.print(f"batch: {job.batch_id}")
    out.print(f"args: {safe(json.dumps(job.args, ensure_ascii=False))}")
    if job.meta:
        out.print(f"meta: {safe(json.dumps(job.meta, ensure_ascii=False))}")
    if job.result is not None:
        out.print(f"result: {safe(json.dumps(job.result, ensure_ascii=False))}")
    if job.partial is not None:
        out.print(f"partial result: {safe(json.dumps(job.partial, ensure_ascii=False))}")
    if job.progress:
        out.print(f"progress: {safe(json.dumps(job.progress, ensure_ascii=False))}")
    if job.worker_id:
        out.print(f"lease: worker {safe(job.worker_id)}, fence {job.fence}, until"
                  f" {stamp(job.lease_expires_at)}")
    if job.errors:
        out.print("[bold]errors[/]")
        for e in job.errors:
            out.print(f"  attempt {safe(e.get('attempt'))} at {stamp(e.get('at'))}:"
                      f" [bold]{safe(e.get('code'))}[/] {safe(e.get('type') or '')}"
                      f" {safe(e.get('message') or '')}")
            for frame in e.get("traceback") or []:
                out.print(f"      {safe(frame.get('file'))}:{safe(frame.get('line'))}"
                          f" in {safe(frame.get('func'))}")
    out.print("[bold]timeline[/]")
    for ev in detail.timeline:
        out.print(f"  {stamp(ev.at)}  {safe(ev.event)}"
                  + (f"  [dim]{safe(ev.detail)}[/]" if ev.detail else ""))


# -- explain -------------------------------------------------------------------------------
def jobs_explain(
    job_id: Annotated[int, typer.Argument(help="The job's id.")],
    read_only: ReadOnlyOpt = False,
    dsn: Dsn = None,
    schema: Schema = None,
    as_json: Json = False,
) -> None:
    """Why isn't this job running? Plain sentences from facts in the database."""
    with handled(as_json), operator(dsn, schema, None, read_only) as op:
        ex = op.explain(job_id)
    if as_json:
        emit_json(ex.to_json())
        return
    out.print(f"[bold]job {ex.job_id}[/] ({state_text(ex.state or '')}, queue {safe(ex.queue)}):")
    for r in ex.reasons:
        out.print(f"  • {safe(r.text)} [dim]({r.code})[/]")


# -- retry / cancel / delete ---------------------------------------------------------------
_VERB = {"requeue": "requeue", "cancel": "cancel", "delete": "delete"}
_HELP = {
    "requeue": "Requeue finished jobs (completed, cancelled, dead): they run again with a fresh"
    " attempt budget; their error history is kept. A live job, or one whose unique key a live"
    " job now holds, is refused (not_requeueable).",
    "cancel": "Cancel live jobs: waiting ones (scheduled, available, retryable) end cancelled at"
    " once; a running one's worker is told to stop it (it ends cancelled, or completed if its"
    " handler had already finished).",
    "delete": "Delete finished jobs (completed, cancelled, dead). Live jobs are refused: cancel"
    " them first.",
}


def _action_command(action: str) -> Any:
    def command(
        job_ids: Annotated[
            list[int] | None, typer.Argument(help="Job ids; or select jobs with the filter options.")
        ] = None,
        state: States = None,
        queue: Queues = None,
        kind: Kinds = None,
        tag: Tags = None,
        batch: Batch = None,
        search: Search = None,
        id_min: IdMin = None,
        id_max: IdMax = None,
        after: After = None,
        before: Before = None,
        time_field: TimeField = "created_at",
        all_jobs: Annotated[
            bool, typer.Option("--all", help="With no filter: every job the action applies to.")
        ] = False,
        dry_run: DryRun = False,
        cap: Annotated[
            int, typer.Option(min=1, max=1_000_000, help="Most jobs acted on per call.")
        ] = DEFAULT_CAP,
        reason: Reason = None,
        yes: Yes = False,
        actor: Actor = None,
        read_only: ReadOnlyOpt = False,
        dsn: Dsn = None,
        schema: Schema = None,
        as_json: Json = False,
    ) -> None:
        with handled(as_json):
            flt = build_filter(state, queue, kind, tag, batch, search, id_min, id_max, after,
                               before, time_field)
            ids = list(dict.fromkeys(job_ids or []))
            if not ids and flt.is_empty() and not all_jobs:
                raise usage(
                    f"name job ids, or select jobs with a filter (e.g. --state dead --queue"
                    f" mail); pass --all to {_VERB[action]} every job it applies to",
                    as_json,
                )
            with operator(dsn, schema, actor, read_only) as op:
                if ids and flt.is_empty() and not dry_run:
                    _one_by_one(op, action, ids, reason, yes, as_json)
                    return
                if ids:
                    flt = replace(flt, ids=tuple(ids))
                _bulk(op, action, flt, dry_run, cap, reason, yes, as_json)

    command.__doc__ = _HELP[action]
    command.__name__ = f"jobs_{action}"
    return command


def _one_by_one(
    op: Operator, action: str, ids: list[int], reason: str | None, yes: bool, as_json: bool
) -> None:
    op.ctx.require_write(action)
    what = f"job {ids[0]}" if len(ids) == 1 else f"{len(ids)} jobs ({', '.join(map(str, ids[:10]))})"
    confirm(f"{_VERB[action].capitalize()} {what}?", yes, as_json)
    results: list[dict[str, Any]] = []
    errors: list[dict[str, Any]] = []
    for job_id in ids:
        try:
            r = getattr(op, action)(job_id, reason=reason)
            results.append(r.to_json())
            if not as_json:
                out.print(f"job {job_id}: {r.outcome} (was {r.previous_state})")
        except ForkliftError as exc:
            errors.append({"job_id": job_id, **exc.to_dict()})
            err.print(f"[bold red]job {job_id}:[/] {safe(exc.message)} [dim]({exc.code})[/]")
    if as_json:
        emit_json({"action": action, "results": results, "errors": errors})
    if errors:
        raise typer.Exit(1)


def _bulk(
    op: Operator, action: str, flt: JobFilter, dry_run: bool, cap: int, reason: str | None,
    yes: bool, as_json: bool,
) -> None:
    if dry_run:
        _print_report(op.bulk(action, flt, dry_run=True, cap=cap), as_json)
        return
    op.ctx.require_write(action)
    if not yes:
        preview = op.bulk(action, flt, dry_run=True, cap=cap)
        if preview.matched == 0:
            _print_report(preview, as_json)
            return
        if not as_json:
            _print_report(preview, False)
        confirm(f"{_VERB[action].capitalize()} these {preview.matched:,} jobs?", yes, as_json)
    report = op.bulk(action, flt, cap=cap, reason=reason)
    _print_report(report, as_json)


def _print_report(r: BulkReport, as_json: bool) -> None:
    if as_json:
        emit_json(r.to_json())
        return
    states = ", ".join(f"{n:,} {s}" for s, n in sorted(r.by_state.items())) or "none"
    more = f" (capped at {r.cap:,}: more match, run again)" if r.more else ""
    sample = ", ".join(map(str, r.sample_ids)) + (" ..." if r.matched > len(r.sample_ids) else "")
    if r.dry_run:
        out.print(f"dry run: {r.action} would act on {r.matched:,} job(s){more}: {states}")
        if r.sample_ids:
            out.print(f"  ids: {sample}")
        return
    how = ", ".join(f"{n:,} {o}" for o, n in sorted(r.outcomes.items())) or "nothing"
    out.print(f"{r.action}: {how} in {r.batches} batch(es){more}")
    if r.skipped:
        out.print(f"  skipped {r.skipped:,} that changed meanwhile:"
                  f" {', '.join(map(str, r.skipped_ids))}")
