"""`forklift webhooks endpoints|deliveries|enable|disable`: thin doors onto forklift.ops.webhooks.
Registered on the main command in cli/main.py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from forklift.cli.format import stamp
from forklift.cli.kit import Call, command, ident, out, safe

if TYPE_CHECKING:
    from rich.table import Table

webhooks_app = typer.Typer(
    help="Outbound webhook endpoints: health, delivery attempts, enable and disable.",
    no_args_is_help=True,
)
Name = Annotated[str, typer.Argument(help="The endpoint's name.")]
#: The largest id a row can have (a bigint): a larger one is a usage error, not a query.
ID_MAX = 2**63 - 1


def _table(*columns: str) -> Table:
    from rich.table import Table

    table = Table(box=None, header_style="bold", pad_edge=False)
    for col in columns:
        table.add_column(col, no_wrap=col not in ("url", "reason", "error"))
    return table


def _health(e: Any) -> str:
    if not e.enabled:
        return f"disabled: {e.disabled_reason or ''}"
    return "failing" if e.failure_streak else "ok"


@webhooks_app.command("endpoints")
@command()
def endpoints_cmd(cx: Call) -> None:
    """Every endpoint: enabled or why not, last status, failure streak, deliveries owed."""
    found = cx.op.webhooks.endpoints()
    if cx.as_json:
        cx.show([e.to_json() for e in found])
        return
    if not found:
        out.print("no webhook endpoint has delivered yet")
        return
    table = _table("endpoint", "health", "last status", "streak", "last attempt", "owed",
                   "delivered", "failed", "url")
    for e in found:
        table.add_row(ident(e.name), safe(_health(e)), str(e.last_status or "-"),
                      str(e.failure_streak), stamp(e.last_at), f"{e.pending:,}",
                      f"{e.delivered:,}", f"{e.failed:,}", safe(e.url or ""))
    out.print(table)


@webhooks_app.command("deliveries")
@command()
def deliveries_cmd(
    cx: Call,
    endpoint: Annotated[str | None, typer.Option(help="Only this endpoint.")] = None,
    limit: Annotated[int, typer.Option(min=1, max=1000, help="At most this many.")] = 50,
    before: Annotated[int | None, typer.Option("--before", min=1, max=ID_MAX,
                                               help="The page below this id.")] = None,
) -> None:
    """Delivery attempts, newest first: status and size of each answer (never its body)."""
    found = cx.op.webhooks.attempts(endpoint=endpoint, limit=limit, before_id=before)
    if cx.as_json:
        cx.show([a.to_json() for a in found])
        return
    if not found:
        out.print("no delivery attempts")
        return
    table = _table("id", "endpoint", "event", "type", "job", "try", "at", "status", "size",
                   "outcome", "error")
    for a in found:
        table.add_row(str(a.id), ident(a.endpoint), safe(a.event_id), safe(a.event_type),
                      str(a.job_id), str(a.attempt), stamp(a.at),
                      str(a.status) if a.status is not None else "-",
                      f"{a.size:,}" if a.size is not None else "-", a.outcome,
                      safe(a.error or ""))
    out.print(table)


@webhooks_app.command("enable")
@command(acts=True)
def enable_cmd(cx: Call, name: Name) -> None:
    """Enable an endpoint: its held deliveries go out now (audited)."""
    change = cx.act(lambda op: op.webhooks.enable(name, reason=cx.reason))
    cx.done(change, lambda c: f"endpoint {ident(c.endpoint.name)} enabled;"
                              f" {c.released:,} held deliveries released")


@webhooks_app.command("disable")
@command(acts=True, confirms=True)
def disable_cmd(cx: Call, name: Name) -> None:
    """Disable an endpoint: its deliveries are held, never lost, until it is enabled."""
    if not cx.dry_run:
        cx.confirm(f"disable webhook endpoint {name}? its deliveries wait until enabled")
    change = cx.act(lambda op: op.webhooks.disable(name, reason=cx.reason))
    cx.done(change, lambda c: f"endpoint {ident(c.endpoint.name)} disabled;"
                              f" {c.endpoint.pending:,} deliveries held")
