"""`forklift partitions plan|run`: keep one range-partitioned table of the app's ready.

``plan`` shows the DDL a run would execute at an instant (``--now``, default the present);
``run`` executes it, each statement under a lock timeout that fails fast and retries, and
audits what it did. The SQL lives in :mod:`forklift.partitions`.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated

import typer

from forklift.cli.format import plural
from forklift.cli.kit import Call, command, ident, out

if TYPE_CHECKING:
    from forklift.partitions import PartitionedTable, UpkeepPlan

partitions_app = typer.Typer(
    help="Partition upkeep: create partitions ahead, drop those past retention.",
    no_args_is_help=True,
)

TableArg = Annotated[str, typer.Argument(help="The partitioned table, as table or schema.table.")]
IntervalOpt = Annotated[str, typer.Option("--interval", help="One partition per day or month.")]
AheadOpt = Annotated[int, typer.Option("--ahead", min=0, max=1000,
                                       help="Partitions kept ready past the current one.")]
RetainOpt = Annotated[int | None, typer.Option(
    "--retain", min=0, max=1000,
    help="Whole periods kept before the current one; older partitions are dropped"
         " (default: drop none).")]
FromOpt = Annotated[str | None, typer.Option(
    "--from", help="Create back to the partition holding this instant (ISO 8601), dropping"
                   " nothing: before a backfill of old rows.")]
NowOpt = Annotated[str | None, typer.Option(
    "--now", help="Plan for this instant (ISO 8601, UTC unless it says) instead of now.")]


def _instant(cx: Call, value: str | None, option: str) -> datetime | None:
    if value is None:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise cx.usage(f"{option} must be an ISO 8601 date or time, not {value!r}") from None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment


def _spec(table: str, interval: str, ahead: int, retain: int | None) -> PartitionedTable:
    from forklift.partitions import PartitionedTable

    return PartitionedTable(table, interval=interval, ahead=ahead,  # type: ignore[arg-type]
                            retain=retain)


def _print_plan(plan: UpkeepPlan) -> None:
    if not plan.changes:
        out.print(f"{ident(plan.table)} is ready at {plan.now.isoformat()}: nothing to do")
        return
    for change in plan.changes:
        out.print(f"{change.sql};", markup=False, highlight=False)


@partitions_app.command("plan")
@command()
def plan_cmd(
    cx: Call,
    table: TableArg,
    interval: IntervalOpt = "month",
    ahead: AheadOpt = 3,
    retain: RetainOpt = None,
    from_: FromOpt = None,
    now: NowOpt = None,
) -> None:
    """Show the DDL a run would execute (one statement a line); change nothing."""
    from forklift.partitions import plan

    at = _instant(cx, now, "--now") or datetime.now(UTC)
    cx.show(plan(cx.op.session.conn, _spec(table, interval, ahead, retain), now=at,
                 from_=_instant(cx, from_, "--from")), _print_plan)


@partitions_app.command("run")
@command(acts=True)
def run_cmd(
    cx: Call,
    table: TableArg,
    interval: IntervalOpt = "month",
    ahead: AheadOpt = 3,
    retain: RetainOpt = None,
    from_: FromOpt = None,
    now: NowOpt = None,
    lock_timeout: Annotated[float, typer.Option(
        "--lock-timeout", min=0.001, help="Seconds a statement waits for its lock.")] = 0.5,
    attempts: Annotated[int, typer.Option(
        "--attempts", min=1, max=100, help="Tries per statement before giving up.")] = 5,
) -> None:
    """Create and drop partitions as planned (--dry-run: show the plan instead)."""
    from forklift.partitions import apply, plan

    at = _instant(cx, now, "--now") or datetime.now(UTC)
    conn = cx.op.session.conn
    planned = plan(conn, _spec(table, interval, ahead, retain), now=at,
                   from_=_instant(cx, from_, "--from"))
    if cx.dry_run:
        if cx.as_json:
            cx.show({**planned.to_json(), "dry_run": True})
            return
        out.print(f"dry run: {plural(len(planned.changes), 'statement')} would run"
                  " [dim](nothing changed)[/]:")
        _print_plan(planned)
        return
    cx.op.ctx.require_write("partitions run")
    report = apply(conn, planned, lock_timeout=lock_timeout, attempts=attempts)
    from forklift.ops import audit

    audit.record(conn, cx.op.ctx, "partitions.run", report.to_json(),
                 count=len(report.created) + len(report.dropped), reason=cx.reason)
    if cx.as_json:
        cx.show(report)
        return
    for name in report.created:
        out.print(f"created {ident(name)}")
    for name in report.dropped:
        out.print(f"dropped {ident(name)}")
    if not report.created and not report.dropped:
        out.print(f"{ident(report.table)} is ready: nothing to do")
