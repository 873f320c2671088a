"""`forklift schedules list|pause|resume|run-now` and `forklift backfills
list|show|start|pause|resume|cancel|rate`: thin doors onto the operator API.

Registered by console/cli.py; shares options, errors and confirmations with the other operator
commands (console/opskit.py): exit 0 done, 1 refused or failed, 2 usage error.
"""

from __future__ import annotations

import json
import os
from typing import Annotated, Any

import typer
from rich.table import Table

from forklift.ops import Operator
from forklift_console.opskit import (
    Actor,
    Dsn,
    Json,
    ReadOnlyOpt,
    Reason,
    Schema,
    Yes,
    confirm,
    emit_json,
    handled,
    operator,
    out,
    safe,
)

schedules_app = typer.Typer(help="Cron schedules: list, pause, resume, run now.",
                            no_args_is_help=True)
backfills_app = typer.Typer(help="Paced backfills: start, watch, pause, resume, cancel, pace.",
                            no_args_is_help=True)

AppOpt = Annotated[str | None, typer.Option(
    "--app", help="Your app as module:attr: record its current definitions first (default: FORKLIFT_APP).")]
Name = Annotated[str, typer.Argument(help="The name it was declared with.")]


def _record_app(op: Operator, app_spec: str | None) -> Any:
    """Load the app (when one is given) and record its schedules and backfills; the app."""
    if not (app_spec or os.environ.get("FORKLIFT_APP")):
        return None
    from forklift.ops.apps import load_app, sync_definitions

    target = load_app(app_spec)
    if not op.read_only:
        sync_definitions(op.conn, target, op.schema)
    return target


def _when(value: Any) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S %Z") if value is not None else "—"


def _table(*columns: str) -> Table:
    table = Table(box=None, header_style="bold", pad_edge=False)
    for col in columns:
        table.add_column(col)
    return table


# -- schedules ----------------------------------------------------------------------------------
@schedules_app.command("list")
def schedules_list(
    app_spec: AppOpt = None, dsn: Dsn = None, schema: Schema = None, as_json: Json = False
) -> None:
    """Every schedule: cron and zone, next run, last run and its outcome, paused or not."""
    with handled(as_json), operator(dsn, schema) as op:
        _record_app(op, app_spec)
        rows = op.schedules()
    if as_json:
        emit_json([r.to_json() for r in rows])
        return
    if not rows:
        out.print("no schedules recorded (a worker of your app records them when it leads,"
                  " or pass --app)")
        return
    table = _table("name", "kind", "cron", "tz", "policy", "next", "last run", "outcome", "state")
    for r in rows:
        table.add_row(
            safe(r.name), safe(r.kind), safe(r.cron), safe(r.tz), r.policy, _when(r.next_at),
            _when(r.last_run_at) + (" (manual)" if r.last_manual else ""),
            safe(r.last_outcome or "—"),
            f"[yellow]paused[/] by {safe(r.paused_by)}" if r.paused else "active",
        )
    out.print(table)


def _schedule_line(info: Any) -> str:
    state = "[yellow]paused[/]" if info.paused else f"active, next run {_when(info.next_at)}"
    return f"schedule {safe(info.name)}: {state}"


@schedules_app.command("pause")
def schedules_pause(
    name: Name, reason: Reason = None, actor: Actor = None, read_only: ReadOnlyOpt = False,
    dsn: Dsn = None, schema: Schema = None, as_json: Json = False,
) -> None:
    """Stop a schedule firing until it is resumed (audited)."""
    with handled(as_json), operator(dsn, schema, actor, read_only) as op:
        info = op.pause_schedule(name, reason=reason)
    emit_json(info.to_json()) if as_json else out.print(_schedule_line(info))


@schedules_app.command("resume")
def schedules_resume(
    name: Name, reason: Reason = None, actor: Actor = None, read_only: ReadOnlyOpt = False,
    dsn: Dsn = None, schema: Schema = None, as_json: Json = False,
) -> None:
    """Let a paused schedule fire again from its next tick (ticks missed meanwhile are not run)."""
    with handled(as_json), operator(dsn, schema, actor, read_only) as op:
        info = op.resume_schedule(name, reason=reason)
    emit_json(info.to_json()) if as_json else out.print(_schedule_line(info))


@schedules_app.command("run-now")
def schedules_run_now(
    name: Name, reason: Reason = None, actor: Actor = None, read_only: ReadOnlyOpt = False,
    dsn: Dsn = None, schema: Schema = None, as_json: Json = False,
) -> None:
    """Enqueue the schedule's job once, now (audited); its cron ticks are unaffected."""
    with handled(as_json), operator(dsn, schema, actor, read_only) as op:
        ran = op.run_schedule_now(name, reason=reason)
    if as_json:
        emit_json(ran.to_json())
    else:
        out.print(f"schedule {safe(ran.schedule)}: job {ran.job_id} enqueued on queue"
                  f" {safe(ran.queue)}")


# -- backfills ----------------------------------------------------------------------------------
def _rate(value: float | None) -> str:
    return "—" if value is None else f"{value:g}/s"


def _progress(b: Any) -> str:
    total = f"/{b.total:,}" if b.total is not None else ""
    pct = f" ({b.fraction:.0%})" if b.fraction is not None else ""
    return f"{b.items_done:,}{total}{pct}"


def _backfill_line(b: Any) -> str:
    return (f"backfill {safe(b.name)}: {b.state}, rate {_rate(b.rate)}, {_progress(b)} items,"
            f" ETA {b.eta}")


@backfills_app.command("list")
def backfills_list(dsn: Dsn = None, schema: Schema = None, as_json: Json = False) -> None:
    """Every backfill: state, progress, rate, pace, ETA, and whether its code changed."""
    with handled(as_json), operator(dsn, schema) as op:
        rows = op.backfills()
    if as_json:
        emit_json([r.to_json() for r in rows])
        return
    if not rows:
        out.print("no backfills recorded (a worker of your app records them when it leads)")
        return
    table = _table("name", "state", "items", "pages", "rate", "items/s", "eta", "changed")
    for b in rows:
        table.add_row(safe(b.name), b.state, _progress(b), f"{b.pages_done:,}", _rate(b.rate),
                      f"{b.items_per_s:,.1f}", b.eta, "yes" if b.changed else "")
    out.print(table)


@backfills_app.command("show")
def backfills_show(
    name: Name, dsn: Dsn = None, schema: Schema = None, as_json: Json = False
) -> None:
    """One backfill in full: progress, pace, ETA, cursor, last error, and its earlier runs."""
    with handled(as_json), operator(dsn, schema) as op:
        b = op.backfill(name)
        runs = op.backfill_runs(name)
    if as_json:
        emit_json({**b.to_json(), "runs": [r.to_json() for r in runs]})
        return
    out.print(f"[bold]backfill {safe(b.name)}[/]  state: [bold]{b.state}[/]"
              + (f"  run {b.run_id}" if b.run_id is not None else ""))
    if b.run_id is None:
        out.print("never run" + (" (declared)" if b.declared else ""))
        return
    out.print(f"items {_progress(b)}  pages {b.pages_done:,}  page size {b.page_size}")
    out.print(f"rate {_rate(b.rate)}  pace {b.items_per_s:,.1f} items/s,"
              f" {b.pages_per_s:,.2f} pages/s  ETA {b.eta}")
    out.print(f"cursor {safe(json.dumps(b.cursor))}  (started from"
              f" {safe(json.dumps(b.start_cursor))})")
    out.print(f"started {_when(b.created_at)} by {safe(b.started_by or '—')}  job {b.job_id}"
              f" ({b.job_state or '—'})")
    if b.paused_by:
        out.print(f"paused by {safe(b.paused_by)} at {_when(b.paused_at)}")
    if b.changed:
        out.print("[yellow]its code changed since the last completed run[/]")
    if b.last_error:
        e = b.last_error
        out.print(f"last error ({b.error_count} in all): [bold]{safe(e.get('type') or e.get('code'))}"
                  f"[/] {safe(e.get('message') or '')}  attempt {e.get('attempt')}"
                  f"  at {safe(e.get('at'))}")
    for r in runs:
        if r.run_id != b.run_id:
            out.print(f"  run {r.run_id}: {r.state}, {r.items_done:,} items,"
                      f" finished {_when(r.finished_at)}")


def _cursor(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text  # a bare string cursor needs no quotes on the command line


@backfills_app.command("start")
def backfills_start(
    name: Name,
    from_cursor: Annotated[str | None, typer.Option(
        "--from", help="Cursor to start from (JSON, or a plain string; default: the beginning).")] = None,
    rate: Annotated[float | None, typer.Option(
        "--rate", help="Pages per second (default: as declared).")] = None,
    force: Annotated[bool, typer.Option(
        "--force", help="Run again a backfill that completed (or replace a failed run).")] = False,
    app_spec: AppOpt = None, reason: Reason = None, actor: Actor = None,
    read_only: ReadOnlyOpt = False, dsn: Dsn = None, schema: Schema = None, as_json: Json = False,
) -> None:
    """Start a run; idempotent by name: a live run is reported, never doubled. Exits 1 when the
    backfill completed before and --force was not given."""
    with handled(as_json), operator(dsn, schema, actor, read_only) as op:
        op.ctx.require_write("backfill.start")
        target = _record_app(op, app_spec)
        definition = target.backfills.get(name) if target is not None else None
        result = op.start_backfill(name, from_cursor=_cursor(from_cursor), rate=rate,
                                   force=force, definition=definition, reason=reason)
    if as_json:
        emit_json(result.to_json())
    else:
        note = " [yellow](its code changed since the last completed run)[/]" if result.changed else ""
        out.print(f"backfill {safe(name)}: {safe(result.message)}{note}")
    if result.outcome == "completed":
        raise typer.Exit(1)


def _act(verb: str, name: str, reason: str | None, actor: str | None, read_only: bool,
         dsn: str | None, schema: str | None, as_json: bool, rate: float | None = None) -> None:
    with handled(as_json), operator(dsn, schema, actor, read_only) as op:
        if verb == "rate":
            assert rate is not None
            b = op.set_backfill_rate(name, rate, reason=reason)
        else:
            act = {"pause": op.pause_backfill, "resume": op.resume_backfill,
                   "cancel": op.cancel_backfill}[verb]
            b = act(name, reason=reason)
    emit_json(b.to_json()) if as_json else out.print(_backfill_line(b))


@backfills_app.command("pause")
def backfills_pause(
    name: Name, reason: Reason = None, actor: Actor = None, read_only: ReadOnlyOpt = False,
    dsn: Dsn = None, schema: Schema = None, as_json: Json = False,
) -> None:
    """Pause after the page in flight; the cursor is kept."""
    _act("pause", name, reason, actor, read_only, dsn, schema, as_json)


@backfills_app.command("resume")
def backfills_resume(
    name: Name, reason: Reason = None, actor: Actor = None, read_only: ReadOnlyOpt = False,
    dsn: Dsn = None, schema: Schema = None, as_json: Json = False,
) -> None:
    """Continue a paused, failed or stalled run from its checkpoint."""
    _act("resume", name, reason, actor, read_only, dsn, schema, as_json)


@backfills_app.command("cancel")
def backfills_cancel(
    name: Name, yes: Yes = False, reason: Reason = None, actor: Actor = None,
    read_only: ReadOnlyOpt = False, dsn: Dsn = None, schema: Schema = None, as_json: Json = False,
) -> None:
    """End the live run for good (a page in flight rolls back); start anew to run again."""
    confirm(f"cancel the live run of backfill {name!r}?", yes, as_json)
    _act("cancel", name, reason, actor, read_only, dsn, schema, as_json)


@backfills_app.command("rate")
def backfills_rate(
    name: Name,
    rate: Annotated[float, typer.Argument(help="Pages per second.")],
    reason: Reason = None, actor: Actor = None, read_only: ReadOnlyOpt = False,
    dsn: Dsn = None, schema: Schema = None, as_json: Json = False,
) -> None:
    """Change the pace of the live run, from its next page."""
    _act("rate", name, reason, actor, read_only, dsn, schema, as_json, rate=rate)
