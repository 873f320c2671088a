"""`forklift health [horizon|set]`: the database's health as forklift depends on it.

``forklift health`` prints tables, indexes, connections, lock waits and the horizon holder with
the alerts (exit 0; with ``--fail-on-alert`` exit 1 when there is one); ``forklift health
--json`` exits with the report's level, 0 ok, 1 warning, 2 critical, for a cron monitor;
``forklift health horizon`` shows who holds back vacuum and the command that ends it;
``forklift health set NAME VALUE`` changes a threshold (audited).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from forklift.cli.format import plural, seconds, stamp
from forklift.cli.kit import Call, command, ident, out, safe, usage

if TYPE_CHECKING:
    from forklift.ops.health import Health
    from forklift.ops.horizon import HorizonHolder

#: The thresholds `health set` takes (forklift.ops.health.THRESHOLDS; a test keeps them equal).
THRESHOLD_NAMES = ("dead_tuple_ratio", "dead_tuple_min", "hot_ratio_min", "hot_min_updates",
                   "notify_queue_usage", "connections_ratio", "lock_wait_seconds",
                   "horizon_seconds", "horizon_xids", "retention_backlog", "starvation_seconds")

health_app = typer.Typer(
    help="Database health: bloat, vacuum, HOT updates, NOTIFY queue, connections, locks, and"
         " who holds the xmin horizon.",
    invoke_without_command=True,
)

ThresholdOpt = Annotated[
    list[str] | None,
    typer.Option("--threshold", "-t",
                 help="NAME=VALUE for this run only (see `forklift health set --help`)."),
]


def _bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "kB", "MB", "GB"):
        if size < 1024:
            return f"{size:.0f}{unit}" if unit == "B" else f"{size:.1f}{unit}"
        size /= 1024
    return f"{size:.1f}TB"


def _parse(pairs: list[str] | None, as_json: bool) -> dict[str, float]:
    found: dict[str, float] = {}
    for pair in pairs or []:
        name, sep, value = pair.partition("=")
        try:
            if not sep:
                raise ValueError
            found[name.strip()] = float(value)
        except ValueError:
            raise usage(f"--threshold {pair!r} is not NAME=NUMBER (e.g. horizon_seconds=60)",
                        as_json) from None
    return found


@health_app.callback()
@command()
def health_cmd(
    cx: Call,
    ctx: typer.Context,
    threshold: ThresholdOpt = None,
    fail_on_alert: Annotated[
        bool, typer.Option("--fail-on-alert", help="Exit 1 when there is an alert (with --json:"
                           " the level's exit code, as always).")
    ] = False,
) -> None:
    """Tables (dead rows, last vacuum and analyze, HOT ratio), indexes, NOTIFY queue,
    connections by purpose, lock waits, the xmin-horizon holder, and alerts with what to do.

    With --json it exits 0 (ok), 1 (warning) or 2 (critical): the report's "level"."""
    if ctx.invoked_subcommand is not None:
        return
    report = cx.op.health(overrides=_parse(threshold, cx.as_json))
    cx.show(report, print_health)
    if cx.as_json:
        raise typer.Exit(report.exit_code)
    if fail_on_alert and report.alerts:
        raise typer.Exit(1)


def print_health(r: Health) -> None:
    from rich.table import Table

    from forklift.cli.retention import window

    t = Table(box=None, header_style="bold", pad_edge=False, title="tables", title_justify="left")
    for col in ("table", "live", "dead", "dead%", "HOT%", "last vacuum", "last analyze", "size"):
        t.add_column(col, justify="left" if col in ("table", "last vacuum", "last analyze")
                     else "right")
    for x in r.tables:
        vac = max((d for d in (x.last_vacuum, x.last_autovacuum) if d), default=None)
        ana = max((d for d in (x.last_analyze, x.last_autoanalyze) if d), default=None)
        t.add_row(safe(x.table), f"{x.live_rows:,}", f"{x.dead_rows:,}", f"{x.dead_ratio:.0%}",
                  f"{x.hot_ratio:.0%}" if x.hot_ratio is not None else "–", stamp(vac),
                  stamp(ana), _bytes(x.total_bytes))
    out.print(t)
    big = sorted(r.indexes, key=lambda i: -i.size_bytes)[:8]
    out.print("[bold]largest indexes[/]: " + ", ".join(
        f"{safe(i.index)} {_bytes(i.size_bytes)}" for i in big))
    c = r.connections
    mine = ", ".join(f"{safe(k)} {v}" for k, v in c.forklift.items()) or "none"
    out.print(f"[bold]connections[/]: {c.in_use} of {c.max_connections} (forklift: {mine});"
              f" [bold]NOTIFY queue[/] {r.notify_queue_usage:.1%} full;"
              f" [bold]lock waits[/] {len(r.lock_waits)}")
    if r.horizon:
        out.print(f"[bold]xmin horizon[/] held by {_holder(r.horizon[0])}")
    else:
        out.print("[bold]xmin horizon[/]: nothing holds it back")
    d = r.retention.defaults
    out.print("[bold]retention[/] (forklift retention show): "
              + ", ".join(f"{k} {window(v)}" for k, v in d.items())
              + (f"; {plural(len({w.queue for w in r.retention.queues}), 'queue')} with their own"
                 if r.retention.queues else ""))
    overdue = sum(r.retention_backlog.values())
    out.print(f"[bold]retention backlog[/]: {overdue:,} finished jobs over an hour past their"
              " window" + (f" ({', '.join(f'{k} {v:,}' for k, v in r.retention_backlog.items() if v)})"
                          if overdue else ""))
    oldest = max(r.oldest_waits, key=lambda w: w.wait_seconds, default=None)
    out.print("[bold]oldest waiting job[/]: " + (
        f"queue {ident(oldest.queue)}, priority {oldest.priority}, {seconds(oldest.wait_seconds)}"
        if oldest is not None else "none waits"))
    out.print("")
    if not r.alerts:
        out.print("[green]no alerts[/]")
    for a in r.alerts:
        colour = "bold red" if a.level == "critical" else "bold yellow"
        out.print(f"[{colour}]{a.level}[/] [bold]{a.code}[/] {safe(a.message)}\n"
                  f"  [bold]do:[/] {safe(a.action)}")


def _holder(x: HorizonHolder) -> str:
    who = f"pid {x.pid}" if x.pid is not None else safe(x.name or "?")
    age = f", {seconds(x.age_seconds)}" if x.age_seconds is not None else ""
    return (f"{x.kind.replace('_', ' ')} {who} ({safe(x.application or x.role or '?')},"
            f" {safe(x.state or '?')}{age}, {x.xid_age or 0:,} xids back)")


@health_app.command("horizon")
@command()
def horizon_cmd(
    cx: Call, limit: Annotated[int, typer.Option(min=1, max=100, help="Holders to show.")] = 5
) -> None:
    """Who holds back vacuum: the oldest transactions, replication slots and prepared
    transactions, each with the SQL that ends it."""
    holders = cx.op.horizon(limit=limit)
    if cx.as_json:
        cx.show({"holders": [x.to_json() for x in holders]})
        return
    if not holders:
        out.print("nothing holds the xmin horizon back: vacuum can remove every dead row")
        return
    for x in holders:
        out.print(f"[bold]{_holder(x)}[/]")
        out.print(f"  client {safe(x.client or 'local')}, role {ident(x.role or '?')},"
                  f" since {stamp(x.since)}, query start {stamp(x.query_start)}")
        if x.query:
            out.print(f"  query: {safe(x.query)}")
        out.print(f"  [bold]do:[/] {safe(x.action)}")


@health_app.command("set")
@command(acts=True)
def set_cmd(
    cx: Call,
    name: Annotated[str, typer.Argument(help="Threshold: " + ", ".join(THRESHOLD_NAMES) + ".")],
    value: Annotated[str, typer.Argument(help="A number, or 'default'.")],
) -> None:
    """Change an alert threshold for everyone (stored in the database, audited)."""
    if value.strip().lower() == "default":
        number: float | None = None
    else:
        try:
            number = float(value)
        except ValueError:
            raise cx.usage(f"{value!r} is not a number or 'default'") from None
    values = cx.act(lambda op: op.set_health_threshold(name, number, reason=cx.reason))
    cx.done({"thresholds": values},
            lambda _: f"{ident(name)} = {values.get(name, number)}")
