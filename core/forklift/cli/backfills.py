"""`forklift backfills list|show|start|pause|resume|cancel|rate`: thin doors onto
forklift.ops.backfills.

``start`` is idempotent by name: a live run is reported, never doubled; with ``--rate`` it also
takes that pace (so a script that starts a backfill at a rate gets that rate). ``--dry-run``
rehearses any action and rolls it back.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any

import typer

from forklift.cli.kit import Call, command, ident, out, safe
from forklift.cli.schedules import RecordApp, record_app, table, when

if TYPE_CHECKING:
    from forklift.ops import Operator

backfills_app = typer.Typer(help="Paced backfills: start, watch, pause, resume, cancel, pace.",
                            no_args_is_help=True)
Name = Annotated[str, typer.Argument(help="The name it was declared with.")]


def _pages_per_second(value: float | None) -> float | None:
    """A pace the backfill can take, or a usage error (exit 2) before anything runs, as for
    every other out-of-range option (NaN included: it compares false)."""
    if value is None:
        return None
    from forklift._features.backfill.backfill import MAX_RATE

    if not 0 < value <= MAX_RATE:
        raise typer.BadParameter(
            f"pages per second, above 0 and at most {MAX_RATE:g}, not {value:g}")
    return value


def _rate(value: float | None) -> str:
    return "—" if value is None else f"{value:g}/s"


def _progress(b: Any) -> str:
    total = f"/{b.total:,}" if b.total is not None else ""
    pct = f" ({b.fraction:.0%})" if b.fraction is not None else ""
    return f"{b.items_done:,}{total}{pct}"


def backfill_line(b: Any) -> str:
    return (f"backfill {ident(b.name)}: {b.state}, rate {_rate(b.rate)}, {_progress(b)} items,"
            f" ETA {b.eta}")


@backfills_app.command("list")
@command()
def backfills_list(cx: Call) -> None:
    """Every backfill: state, progress, rate, pace, ETA, and whether its code changed."""
    rows = cx.op.backfills()
    if cx.as_json:
        cx.show([r.to_json() for r in rows])
        return
    if not rows:
        out.print("no backfills recorded (a worker of your app records them when it leads)")
        return
    t = table("name", "state", "items", "pages", "rate", "items/s", "eta", "changed")
    for b in rows:
        t.add_row(ident(b.name), b.state, _progress(b), f"{b.pages_done:,}", _rate(b.rate),
                  f"{b.items_per_s:,.1f}", b.eta, "yes" if b.changed else "")
    out.print(t)


@backfills_app.command("show")
@command()
def backfills_show(cx: Call, name: Name) -> None:
    """One backfill in full: progress, pace, ETA, cursor, last error, and its earlier runs."""
    b = cx.op.backfill(name)
    runs = cx.op.backfill_runs(name)
    if cx.as_json:
        cx.show({**b.to_json(), "runs": [r.to_json() for r in runs]})
        return
    out.print(f"[bold]backfill {ident(b.name)}[/]  state: [bold]{b.state}[/]"
              + (f"  run {b.run_id}" if b.run_id is not None else ""))
    if b.run_id is None:
        out.print("never run" + (" (declared)" if b.declared else ""))
        return
    out.print(f"items {_progress(b)}  pages {b.pages_done:,}  page size {b.page_size}")
    out.print(f"rate {_rate(b.rate)}  pace {b.items_per_s:,.1f} items/s,"
              f" {b.pages_per_s:,.2f} pages/s  ETA {b.eta}")
    out.print(f"cursor {safe(json.dumps(b.cursor))}  (started from"
              f" {safe(json.dumps(b.start_cursor))})")
    out.print(f"started {when(b.created_at)} by {ident(b.started_by or '—')}  job {b.job_id}"
              f" ({b.job_state or '—'})")
    if b.paused_by:
        out.print(f"paused by {ident(b.paused_by)} at {when(b.paused_at)}")
    if b.changed:
        out.print("[yellow]its code changed since the last completed run[/]")
    if b.last_error:
        e = b.last_error
        out.print(f"last failure ({b.error_count} in all):"
                  f" [bold]{ident(e.get('type') or e.get('code'))}[/] {safe(e.get('message') or '')}"
                  f"  attempt {e.get('attempt')}  at {safe(e.get('at'))}")
    for r in runs:
        if r.run_id != b.run_id:
            out.print(f"  run {r.run_id}: {r.state}, {r.items_done:,} items,"
                      f" finished {when(r.finished_at)}")


def _cursor(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text  # a bare string cursor needs no quotes on the command line


@backfills_app.command("start")
@command(acts=True)
def backfills_start(
    cx: Call,
    name: Name,
    from_cursor: Annotated[str | None, typer.Option(
        "--from", help="Cursor to start from (JSON, or a plain string; default: the beginning).")] = None,
    rate: Annotated[float | None, typer.Option(
        "--rate", callback=_pages_per_second,
        help="Pages per second (default: as declared); a live run takes it too.")] = None,
    force: Annotated[bool, typer.Option(
        "--force", help="Run again a backfill that completed (or replace a failed run).")] = False,
    app_spec: RecordApp = None,
) -> None:
    """Start a run; idempotent by name: a live run is reported, never doubled (given --rate, it
    takes that rate). Exits 1 when the backfill completed before and --force was not given."""

    def start(op: Operator) -> Any:
        op.ctx.require_write("backfill.start")
        target = record_app(op, app_spec)
        definition = target.backfills.get(name) if target is not None else None
        return op.start_backfill(name, from_cursor=_cursor(from_cursor), rate=rate, force=force,
                                 definition=definition, reason=cx.reason)

    result = cx.act(start)
    note = " [yellow](its code changed since the last completed run)[/]" if result.changed else ""
    cx.done(result, lambda r: f"backfill {ident(name)}: {safe(r.message)}{note}")
    if result.outcome == "completed":
        raise typer.Exit(1)


@backfills_app.command("pause")
@command(acts=True)
def backfills_pause(cx: Call, name: Name) -> None:
    """Pause after the page in flight; the cursor is kept."""
    cx.done(cx.act(lambda op: op.pause_backfill(name, reason=cx.reason)), backfill_line)


@backfills_app.command("resume")
@command(acts=True)
def backfills_resume(cx: Call, name: Name) -> None:
    """Continue a paused, failed or stalled run from its checkpoint."""
    cx.done(cx.act(lambda op: op.resume_backfill(name, reason=cx.reason)), backfill_line)


@backfills_app.command("cancel")
@command(acts=True, confirms=True)
def backfills_cancel(cx: Call, name: Name) -> None:
    """End the live run for good (a page in flight rolls back); start anew to run again."""
    if not cx.dry_run:
        from forklift.ops.display import show_id

        cx.confirm(f"cancel the live run of backfill {show_id(name)}?")
    cx.done(cx.act(lambda op: op.cancel_backfill(name, reason=cx.reason)), backfill_line)


@backfills_app.command("rate")
@command(acts=True)
def backfills_rate(
    cx: Call,
    name: Name,
    rate: Annotated[float, typer.Argument(callback=_pages_per_second, help="Pages per second.")],
) -> None:
    """Change the pace of the live run, from its next page."""
    cx.done(cx.act(lambda op: op.set_backfill_rate(name, rate, reason=cx.reason)), backfill_line)
