"""`forklift stats`, `forklift audit` and `forklift prune`: thin doors onto
forklift.ops."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Annotated, Any

import typer

from forklift.cli.format import plural, seconds, spark, stamp
from forklift.cli.kit import Call, command, ident, out, safe

if TYPE_CHECKING:
    from rich.console import Group
    from rich.table import Table

    from forklift.ops import PruneReport, Stats, WorkerInfo


#: The largest id a row can have (a bigint): a larger one is a usage error, not a query.
ID_MAX = 2**63 - 1


# -- stats ---------------------------------------------------------------------------------
def stats_tables(s: Stats, width: int | None = None) -> Group:
    from rich.console import Group
    from rich.table import Table

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
            paused = f"[bold yellow]paused[/] by {ident(x.paused_by or '?')}"
            if x.pause_expires_at:
                paused += f" until {stamp(x.pause_expires_at)}"
        cells = [
            ident(x.name), f"{c['available']:,}", f"{c['scheduled']:,}",
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
        f" {plural(t.live_workers, 'live worker')}, {t.in_use}/{t.slots} slots busy"
    )
    return Group(q, "", totals, "", workers_table(s.workers))


def workers_table(workers: list[WorkerInfo]) -> Table:
    from rich.table import Table

    w = Table(box=None, header_style="bold", pad_edge=False, title="workers", title_justify="left")
    for col in ("worker", "state", "queues", "slots", "heartbeat", "drain", "leader"):
        w.add_column(col, overflow="fold")
    for x in workers:
        drain = ""
        if x.state == "draining" and x.drain_remaining_seconds is not None:
            drain = f"drain cutoff in {seconds(max(0.0, x.drain_remaining_seconds))}"
        w.add_row(ident(x.id), worker_state(x), ", ".join(ident(q) for q in x.queues),
                  f"{x.in_use}/{x.slots}", f"{seconds(x.heartbeat_age_seconds)} ago", drain,
                  "★" if x.leader else "")
    return w


#: Colour of each worker state; a state the table does not know is shown as it is, uncoloured.
_STATE_STYLE = {"running": "green", "draining": "yellow", "exited": "dim"}


def worker_state(x: WorkerInfo) -> str:
    """The state word --json gives, so text and JSON agree; how it exited, or that it is stale
    (no heartbeat for a while, the row not yet marked), in brackets after it."""
    word = x.state
    if x.state == "exited" and x.exit_reason:
        word += f" ({x.exit_reason})"
    elif x.stale:
        return f"[red]{word} (stale)[/]"
    style = _STATE_STYLE.get(x.state)
    return f"[{style}]{word}[/]" if style else ident(word)


@command()
def stats(
    cx: Call,
    watch: Annotated[bool, typer.Option("--watch", "-w", help="Refresh until Ctrl-C.")] = False,
    interval: Annotated[float, typer.Option(min=0.2, help="Seconds between refreshes.")] = 2.0,
    count: Annotated[
        int, typer.Option(min=0, help="With --watch: stop after this many refreshes (0: never).")
    ] = 0,
    window: Annotated[str, typer.Option(help="Rates over this recent window (e.g. 30m).")] = "30m",
    bucket: Annotated[str, typer.Option(help="One sparkline point per (e.g. 1m).")] = "1m",
) -> None:
    """Per queue: depth by state, pickup lag, pause, limit, rates and run times; workers; totals.

    With --json --watch, one JSON document per line per refresh.
    """
    from forklift.ops.filters import duration

    w, b = duration(window, "window"), duration(bucket, "bucket")
    if not watch:
        cx.show(cx.op.stats(window=w, bucket=b), stats_tables)
        return
    _watch(cx.op.stats, w, b, interval, count, cx.as_json)


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
        from rich.live import Live

        with Live(console=out.console, auto_refresh=False) as live:
            while True:
                live.update(stats_tables(get(window=w, bucket=b)), refresh=True)
                n += 1
                if count and n >= count:
                    return
                time.sleep(interval)
    except KeyboardInterrupt:
        return


# -- audit ---------------------------------------------------------------------------------
@command()
def audit(
    cx: Call,
    limit: Annotated[int, typer.Option(min=1, max=1000, help="Entries, newest first.")] = 50,
    actor_filter: Annotated[str | None, typer.Option("--by", help="Only this actor's.")] = None,
    action: Annotated[str | None, typer.Option(help="Only this action (e.g. requeue).")] = None,
    since: Annotated[
        str | None, typer.Option(help="Only since this time: ISO 8601 or a duration ago (1d).")
    ] = None,
    before_id: Annotated[int | None, typer.Option(
        min=1, max=ID_MAX, help="Page: entries older than this audit id.")] = None,
) -> None:
    """The audit trail: who did what to which jobs or queues, when, and how it ended."""
    entries = cx.op.audit(limit=limit, actor=actor_filter, action=action, since=since,
                          before_id=before_id)
    if cx.as_json:
        cx.show([e.to_json() for e in entries])
        return
    from rich.table import Table

    t = Table(box=None, header_style="bold", pad_edge=False)
    for col in ("id", "at", "actor", "action", "target", "count", "outcome", "reason"):
        t.add_column(col, overflow="fold")
    for e in entries:
        t.add_row(str(e.id), stamp(e.at), ident(e.actor), ident(e.action),
                  safe(json.dumps(e.target, ensure_ascii=True)), str(e.count), safe(e.outcome),
                  safe(e.reason or ""))
    out.print(t)


# -- prune ---------------------------------------------------------------------------------
@command(acts=True, confirms=True)
def prune(
    cx: Call,
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
    batch_size: Annotated[
        int, typer.Option(min=1, max=50_000, help="Rows per transaction.")
    ] = 5_000,
) -> None:
    """Delete finished jobs older than a cut-off, in short batches; live jobs are never touched."""
    kw: dict[str, Any] = {
        "completed_older_than": completed_older_than,
        "dead_older_than": dead_older_than,
        "cancelled_older_than": cancelled_older_than,
        "max_rows": max_rows,
        "batch_size": batch_size,
        "reason": cx.reason,
    }
    op = cx.op
    if cx.dry_run:
        report = op.prune(dry_run=True, **kw)
    else:
        op.ctx.require_write("prune")
        if not cx.yes:
            preview = op.prune(dry_run=True, **kw)
            if not cx.as_json:
                _print_prune(preview)
            cx.confirm(f"Delete these {preview.total:,} jobs?")
        report = op.prune(**kw)
    cx.show(report, _print_prune)


def _print_prune(r: PruneReport) -> None:
    parts = ", ".join(f"{n:,} {s} (older than {seconds(r.older_than[s])})"
                      for s, n in r.deleted.items())
    verb = "dry run: prune would delete" if r.dry_run else "prune deleted"
    more = "; more remain: run again" if r.more else ""
    out.print(f"{verb}: {parts or 'nothing'}{more}")
