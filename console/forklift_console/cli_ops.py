"""`forklift stats|workers|audit|prune` and `forklift queues ...`: thin doors onto forklift.ops.

:func:`register` adds these commands (and the jobs commands of cli_jobs) to the main app.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Annotated

import typer
from rich.console import Group
from rich.live import Live
from rich.table import Table

from forklift.ops import Explanation, PruneReport, QueueInfo, Stats, WorkerInfo
from forklift.ops.filters import duration
from forklift_console import cli_jobs, cli_keys
from forklift_console.cli_retention import window
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
    handled,
    operator,
    out,
    safe,
    seconds,
    spark,
    stamp,
    usage,
)

queues_app = typer.Typer(help="Queues: list, explain, pause, resume, limit, rate, fair.",
                         no_args_is_help=True)
workers_app = typer.Typer(help="Workers: who runs what, heartbeats, drains.", no_args_is_help=True)


def register(app: typer.Typer, jobs_app: typer.Typer) -> None:
    """Add the operator commands to ``app`` (and the jobs verbs to ``jobs_app``)."""
    cli_jobs.register(jobs_app)
    app.command("stats")(stats_cmd)
    app.command("audit")(audit_cmd)
    app.command("prune")(prune_cmd)
    queues_app.command("rate")(cli_keys.queues_rate)
    queues_app.command("fair")(cli_keys.queues_fair)
    app.add_typer(queues_app, name="queues")
    app.add_typer(workers_app, name="workers")


# -- stats ---------------------------------------------------------------------------------
def stats_tables(s: Stats, width: int | None = None) -> Group:
    wide = (width or out.width) >= 110  # room for the sparkline
    q = Table(box=None, header_style="bold", pad_edge=False, title_justify="left",
              title=f"queues (rates over the last {s.window_seconds / 60:.0f} min)")
    cols = ["queue", "avail", "sched", "run", "retry", "dead", "lag", "done", "failed", "p95"]
    cols += ["trend"] if wide else []
    cols += ["paused"]
    for col in cols:
        q.add_column(col, justify="left" if col in ("queue", "trend", "paused") else "right",
                     overflow="fold", no_wrap=col not in ("queue", "paused"),
                     min_width=10 if col == "queue" else None)
    for x in s.queues:
        c = x.counts
        limit = f"/{x.concurrency}" if x.concurrency is not None else ""
        paused = ""
        if x.paused:
            paused = f"[bold yellow]paused[/] by {safe(x.paused_by or '?')}"
            if x.pause_expires_at:
                paused += f" until {stamp(x.pause_expires_at)}"
        cells = [
            safe(x.name), f"{c['available']:,}", f"{c['scheduled']:,}",
            f"{c['running']:,}{limit}", f"{c['retryable']:,}", f"{c['dead']:,}",
            seconds(x.pickup_lag_seconds), f"{x.completed:,}", f"{x.failed:,}",
            seconds(x.run_time.p95_seconds),
        ]
        cells += [spark(x.series.completed)] if wide else []
        q.add_row(*cells, paused)
    t = s.totals
    totals = (
        f"[bold]total[/]  {t.counts['available']:,} available · {t.counts['scheduled']:,}"
        f" scheduled · {t.counts['running']:,} running · {t.counts['retryable']:,} retryable ·"
        f" {t.counts['dead']:,} dead  |  {t.completed_per_minute:,.1f} completed/min ·"
        f" {t.failed_per_minute:,.1f} failed/min · run time mean"
        f" {seconds(t.run_time.mean_seconds)} p95 {seconds(t.run_time.p95_seconds)}  |"
        f" {t.live_workers} live worker(s), {t.in_use}/{t.slots} slots busy"
    )
    return Group(q, "", totals, "", workers_table(s.workers))


def workers_table(workers: list[WorkerInfo]) -> Table:
    w = Table(box=None, header_style="bold", pad_edge=False, title="workers", title_justify="left")
    for col in ("worker", "state", "queues", "slots", "heartbeat", "drain", "leader"):
        w.add_column(col, overflow="fold")
    for x in workers:
        st = "[yellow]draining[/]" if x.state == "draining" else "[green]running[/]"
        if x.stale:
            st = "[red]stale[/]"
        drain = ""
        if x.drain_remaining_seconds is not None:
            drain = f"cutoff in {seconds(max(0.0, x.drain_remaining_seconds))}"
        w.add_row(safe(x.id), st, safe(", ".join(x.queues)), f"{x.in_use}/{x.slots}",
                  f"{seconds(x.heartbeat_age_seconds)} ago", drain, "★" if x.leader else "")
    return w


def stats_cmd(
    watch: Annotated[bool, typer.Option("--watch", "-w", help="Refresh until Ctrl-C.")] = False,
    interval: Annotated[float, typer.Option(min=0.2, help="Seconds between refreshes.")] = 2.0,
    count: Annotated[
        int, typer.Option(min=0, help="With --watch: stop after this many refreshes (0: never).")
    ] = 0,
    window: Annotated[str, typer.Option(help="Rates over this recent window (e.g. 30m).")] = "30m",
    bucket: Annotated[str, typer.Option(help="One sparkline point per (e.g. 1m).")] = "1m",
    read_only: ReadOnlyOpt = False,
    dsn: Dsn = None,
    schema: Schema = None,
    as_json: Json = False,
) -> None:
    """Per queue: depth by state, pickup lag, pause, limit, rates and run times; workers; totals.

    With --json --watch, one JSON document per line per refresh.
    """
    with handled(as_json), operator(dsn, schema, None, read_only) as op:
        w, b = duration(window, "window"), duration(bucket, "bucket")
        if not watch:
            s = op.stats(window=w, bucket=b)
            if as_json:
                emit_json(s.to_json())
            else:
                out.print(stats_tables(s))
            return
        _watch(op.stats, w, b, interval, count, as_json)


def _watch(get: Callable[..., Stats], w: timedelta, b: timedelta, interval: float, count: int,
           as_json: bool) -> None:
    n = 0
    try:
        if as_json:
            while True:
                s = get(window=w, bucket=b)
                sys.stdout.write(json.dumps(s.to_json(), default=str) + "\n")
                sys.stdout.flush()
                n += 1
                if count and n >= count:
                    return
                time.sleep(interval)
        with Live(console=out, auto_refresh=False) as live:
            while True:
                live.update(stats_tables(get(window=w, bucket=b)), refresh=True)
                n += 1
                if count and n >= count:
                    return
                time.sleep(interval)
    except KeyboardInterrupt:
        return


# -- queues --------------------------------------------------------------------------------
def _queue_line(q: QueueInfo) -> str:
    text = f"queue {safe(q.name)}: "
    if q.paused:
        text += f"[bold yellow]paused[/] by {safe(q.paused_by or '?')} since {stamp(q.paused_at)}"
        if q.pause_reason:
            text += f" ({safe(q.pause_reason)})"
        if q.pause_expires_at:
            text += f", until {stamp(q.pause_expires_at)}"
    else:
        text += "running"
    text += f"; concurrency {q.concurrency if q.concurrency is not None else 'unlimited'}"
    return text


def _emit_queue(q: QueueInfo, as_json: bool) -> None:
    if as_json:
        emit_json(q.to_json())
    else:
        out.print(_queue_line(q))


@queues_app.command("list")
def queues_list(
    read_only: ReadOnlyOpt = False, dsn: Dsn = None, schema: Schema = None, as_json: Json = False
) -> None:
    """Every queue with its pause, concurrency limit and retention (completed/cancelled/dead;
    depths: `forklift stats`)."""
    with handled(as_json), operator(dsn, schema, None, read_only) as op:
        queues = op.queues()
        kept = op.retention()
    if as_json:
        emit_json([{**q.to_json(), "retention": kept.for_queue(q.name)} for q in queues])
        return
    t = Table(box=None, header_style="bold", pad_edge=False)
    for col in ("queue", "paused", "by", "since", "until", "reason", "concurrency", "retention"):
        t.add_column(col)
    for q in queues:
        expired = (not q.paused) and q.paused_flag
        t.add_row(
            safe(q.name),
            "[bold yellow]paused[/]" if q.paused else ("expired" if expired else "no"),
            safe(q.paused_by or "") if q.paused else "",
            stamp(q.paused_at) if q.paused else "",
            stamp(q.pause_expires_at) if q.paused and q.pause_expires_at else "",
            safe(q.pause_reason or "") if q.paused else "",
            str(q.concurrency) if q.concurrency is not None else "–",
            "/".join(window(v) for v in kept.for_queue(q.name).values()),
        )
    out.print(t)


def _print_explanation(ex: Explanation) -> None:
    out.print(f"[bold]queue {safe(ex.queue)}[/]:")
    for r in ex.reasons:
        out.print(f"  • {safe(r.text)} [dim]({r.code})[/]")


@queues_app.command("explain")
def queues_explain(
    name: Annotated[str, typer.Argument(help="The queue.")],
    read_only: ReadOnlyOpt = False,
    dsn: Dsn = None,
    schema: Schema = None,
    as_json: Json = False,
) -> None:
    """Why is this queue not moving? Pause, limits, workers, backlog, in plain words."""
    with handled(as_json), operator(dsn, schema, None, read_only) as op:
        ex = op.explain_queue(name)
    if as_json:
        emit_json(ex.to_json())
    else:
        _print_explanation(ex)


@queues_app.command("pause")
def queues_pause(
    name: Annotated[str, typer.Argument(help="The queue.")],
    reason: Reason = None,
    for_: Annotated[
        str | None, typer.Option("--for", help="Resume by itself after this long (e.g. 30m).")
    ] = None,
    until: Annotated[
        str | None, typer.Option("--until", help="Resume by itself at this time (ISO 8601).")
    ] = None,
    create: Annotated[
        bool, typer.Option("--create", help="Pause a queue that has no jobs or workers yet.")
    ] = False,
    actor: Actor = None,
    read_only: ReadOnlyOpt = False,
    dsn: Dsn = None,
    schema: Schema = None,
    as_json: Json = False,
) -> None:
    """Pause a queue: no worker claims from it from its next claim on; running jobs go on."""
    with handled(as_json), operator(dsn, schema, actor, read_only) as op:
        q = op.pause(name, reason=reason, for_=for_, until=until, create=create)
    _emit_queue(q, as_json)


@queues_app.command("resume")
def queues_resume(
    name: Annotated[str, typer.Argument(help="The queue.")],
    reason: Reason = None,
    actor: Actor = None,
    read_only: ReadOnlyOpt = False,
    dsn: Dsn = None,
    schema: Schema = None,
    as_json: Json = False,
) -> None:
    """Resume a paused queue; its workers are woken at once."""
    with handled(as_json), operator(dsn, schema, actor, read_only) as op:
        q = op.resume(name, reason=reason)
    _emit_queue(q, as_json)


@queues_app.command("limit")
def queues_limit(
    name: Annotated[str, typer.Argument(help="The queue.")],
    limit: Annotated[
        str, typer.Argument(help="Most jobs running at once over all workers, or 'none'.")
    ],
    reason: Reason = None,
    create: Annotated[bool, typer.Option("--create", help="Set up a queue not seen yet.")] = False,
    actor: Actor = None,
    read_only: ReadOnlyOpt = False,
    dsn: Dsn = None,
    schema: Schema = None,
    as_json: Json = False,
) -> None:
    """Set (or with 'none' lift) a queue's concurrency limit across all workers."""
    with handled(as_json):
        if limit.strip().lower() in ("none", "off", "unlimited"):
            value: int | None = None
        else:
            try:
                value = int(limit)
            except ValueError:
                raise usage(f"limit {limit!r} is not a whole number or 'none'", as_json) from None
        with operator(dsn, schema, actor, read_only) as op:
            q = op.set_concurrency(name, value, reason=reason, create=create)
    _emit_queue(q, as_json)


# -- workers -------------------------------------------------------------------------------
@workers_app.command("list")
def workers_list(
    read_only: ReadOnlyOpt = False, dsn: Dsn = None, schema: Schema = None, as_json: Json = False
) -> None:
    """Registered workers: state, queues, slots in use, heartbeat age, drain cutoff, leader."""
    with handled(as_json), operator(dsn, schema, None, read_only) as op:
        workers = op.workers()
    if as_json:
        emit_json([w.to_json() for w in workers])
    else:
        out.print(workers_table(workers))


# -- audit ---------------------------------------------------------------------------------
def audit_cmd(
    limit: Annotated[int, typer.Option(min=1, max=1000, help="Entries, newest first.")] = 50,
    actor_filter: Annotated[str | None, typer.Option("--by", help="Only this actor's.")] = None,
    action: Annotated[str | None, typer.Option(help="Only this action (e.g. requeue).")] = None,
    since: Annotated[
        str | None, typer.Option(help="Only since this time: ISO 8601 or a duration ago (1d).")
    ] = None,
    before_id: Annotated[
        int | None, typer.Option(help="Page: entries older than this audit id.")
    ] = None,
    read_only: ReadOnlyOpt = False,
    dsn: Dsn = None,
    schema: Schema = None,
    as_json: Json = False,
) -> None:
    """The audit trail: who did what to which jobs or queues, when, and how it ended."""
    with handled(as_json), operator(dsn, schema, None, read_only) as op:
        entries = op.audit(limit=limit, actor=actor_filter, action=action, since=since,
                           before_id=before_id)
    if as_json:
        emit_json([e.to_json() for e in entries])
        return
    t = Table(box=None, header_style="bold", pad_edge=False)
    for col in ("id", "at", "actor", "action", "target", "count", "outcome", "reason"):
        t.add_column(col, overflow="fold")
    for e in entries:
        t.add_row(str(e.id), stamp(e.at), safe(e.actor), safe(e.action),
                  safe(json.dumps(e.target, ensure_ascii=False)), str(e.count), safe(e.outcome),
                  safe(e.reason or ""))
    out.print(t)


# -- prune ---------------------------------------------------------------------------------
def prune_cmd(
    completed_older_than: Annotated[
        str | None, typer.Option(help="Delete completed jobs finished longer ago (e.g. 7d).")
    ] = None,
    dead_older_than: Annotated[
        str | None, typer.Option(help="Delete dead jobs finished longer ago (e.g. 30d).")
    ] = None,
    cancelled_older_than: Annotated[
        str | None, typer.Option(help="Delete cancelled jobs finished longer ago.")
    ] = None,
    max_rows: Annotated[
        int, typer.Option(min=1, max=10_000_000, help="Most jobs deleted per call.")
    ] = 100_000,
    batch_size: Annotated[int, typer.Option(min=1, max=50_000, help="Rows per transaction.")] = 5_000,
    dry_run: DryRun = False,
    reason: Reason = None,
    yes: Yes = False,
    actor: Actor = None,
    read_only: ReadOnlyOpt = False,
    dsn: Dsn = None,
    schema: Schema = None,
    as_json: Json = False,
) -> None:
    """Delete finished jobs older than a cut-off, in short batches; live jobs are never touched."""
    kw = {
        "completed_older_than": completed_older_than,
        "dead_older_than": dead_older_than,
        "cancelled_older_than": cancelled_older_than,
        "max_rows": max_rows,
        "batch_size": batch_size,
        "reason": reason,
    }
    with handled(as_json), operator(dsn, schema, actor, read_only) as op:
        if dry_run:
            report = op.prune(dry_run=True, **kw)
        else:
            op.ctx.require_write("prune")
            if not yes:
                preview = op.prune(dry_run=True, **kw)
                if not as_json:
                    _print_prune(preview)
                confirm(f"Delete these {preview.total:,} jobs?", yes, as_json)
            report = op.prune(**kw)
    if as_json:
        emit_json(report.to_json())
    else:
        _print_prune(report)


def _print_prune(r: PruneReport) -> None:
    parts = ", ".join(f"{n:,} {s} (older than {seconds(r.older_than[s])})"
                      for s, n in r.deleted.items())
    verb = "would delete" if r.dry_run else "deleted"
    more = "; more remain: run again" if r.more else ""
    out.print(f"prune {verb}: {parts or 'nothing'}{more}")
