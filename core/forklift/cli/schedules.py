"""`forklift schedules list|pause|resume|run-now`: thin doors onto forklift.ops.schedules.

``--app`` records the app's current definitions first (what a leading worker does by itself).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Annotated, Any

import typer

from forklift.cli.kit import Call, command, ident, out

if TYPE_CHECKING:
    from forklift import Forklift
    from forklift.ops import Operator

schedules_app = typer.Typer(help="Cron schedules: list, pause, resume, run now.",
                            no_args_is_help=True)

RecordApp = Annotated[str | None, typer.Option(
    "--app", help="Your app as module:attr: record its current definitions first [FORKLIFT_APP].")]
Name = Annotated[str, typer.Argument(help="The name it was declared with.")]


def record_app(op: Operator, app_spec: str | None) -> Forklift | None:
    """Load the app (when one is given) and record its schedules and backfills; the app."""
    if not (app_spec or os.environ.get("FORKLIFT_APP")):
        return None
    from forklift.ops.apps import load_app, sync_definitions

    target = load_app(app_spec)
    if not op.read_only:
        sync_definitions(op.conn, target, op.schema)
    return target


def when(value: Any) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S %Z") if value is not None else "—"


def table(*columns: str) -> Any:
    from rich.table import Table

    t = Table(box=None, header_style="bold", pad_edge=False)
    for col in columns:
        t.add_column(col)
    return t


@schedules_app.command("list")
@command()
def schedules_list(cx: Call, app_spec: RecordApp = None) -> None:
    """Every schedule: cron and zone, next run, last run and its outcome, paused or not."""
    record_app(cx.op, app_spec)
    rows = cx.op.schedules()
    if cx.as_json:
        cx.show([r.to_json() for r in rows])
        return
    if not rows:
        out.print("no schedules recorded (a worker of your app records them when it leads,"
                  " or pass --app)")
        return
    t = table("name", "kind", "cron", "tz", "policy", "next", "last run", "outcome", "state")
    for r in rows:
        t.add_row(
            ident(r.name), ident(r.kind), ident(r.cron), ident(r.tz), r.policy, when(r.next_at),
            when(r.last_run_at) + (" (manual)" if r.last_manual else ""),
            ident(r.last_outcome or "—"),
            f"[yellow]paused[/] by {ident(r.paused_by)}" if r.paused else "active",
        )
    out.print(t)


def _schedule_line(info: Any) -> str:
    state = "[yellow]paused[/]" if info.paused else f"active, next run {when(info.next_at)}"
    return f"schedule {ident(info.name)}: {state}"


@schedules_app.command("pause")
@command(acts=True)
def schedules_pause(cx: Call, name: Name) -> None:
    """Stop a schedule firing until it is resumed (audited)."""
    cx.done(cx.act(lambda op: op.pause_schedule(name, reason=cx.reason)), _schedule_line)


@schedules_app.command("resume")
@command(acts=True)
def schedules_resume(cx: Call, name: Name) -> None:
    """Let a paused schedule fire again from its next tick (ticks missed meanwhile are not run)."""
    cx.done(cx.act(lambda op: op.resume_schedule(name, reason=cx.reason)), _schedule_line)


@schedules_app.command("run-now")
@command(acts=True)
def schedules_run_now(cx: Call, name: Name) -> None:
    """Enqueue the schedule's job once, now (audited); its cron ticks are unaffected."""
    ran = cx.act(lambda op: op.run_schedule_now(name, reason=cx.reason))
    if cx.dry_run:
        cx.done(ran, lambda r: f"schedule {ident(r.schedule)} would enqueue one job on queue"
                               f" {ident(r.queue)}")
        return
    cx.done(ran, lambda r: f"schedule {ident(r.schedule)}: job {r.job_id} enqueued on queue"
                           f" {ident(r.queue)}")
