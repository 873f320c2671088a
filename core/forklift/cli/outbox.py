"""`forklift outbox list|retry` and `forklift events list|waits|publish`: thin doors onto
forklift.ops.outbox and forklift.ops.events. Registered on the main command in cli/main.py.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any

import typer

from forklift.cli.format import plural, stamp
from forklift.cli.kit import Call, command, ident, out, safe

if TYPE_CHECKING:
    from rich.table import Table

outbox_app = typer.Typer(
    help="The transactional outbox: messages per topic, delivery state, retry of dead ones.",
    no_args_is_help=True,
)
events_app = typer.Typer(
    help="Events for ctx.wait_for_event: recent events, parked waits, publish by hand.",
    no_args_is_help=True,
)
Limit = Annotated[int, typer.Option(min=1, max=1000, help="At most this many.")]
#: The largest id a row can have (a bigint): a larger one is a usage error, not a query.
ID_MAX = 2**63 - 1
Before = Annotated[int | None, typer.Option("--before", min=1, max=ID_MAX,
                                            help="The page below this id.")]


def _table(*columns: str) -> Table:
    from rich.table import Table

    table = Table(box=None, header_style="bold", pad_edge=False)
    for col in columns:
        table.add_column(col, no_wrap=col not in ("payload", "data", "error", "match"))
    return table


@outbox_app.command("list")
@command()
def list_cmd(
    cx: Call,
    state: Annotated[str | None, typer.Option(help="pending, delivered or dead.")] = None,
    topic: Annotated[str | None, typer.Option(help="Only this topic.")] = None,
    limit: Limit = 50,
    before: Before = None,
) -> None:
    """Messages, newest first (with per-topic totals of pending and dead ones)."""
    found = cx.op.outbox_messages(state=state, topic=topic, limit=limit, before_id=before)
    totals = cx.op.outbox_topics()
    if cx.as_json:
        cx.show({"topics": [t.to_json() for t in totals],
                 "messages": [m.to_json() for m in found]})
        return
    if totals:
        table = _table("topic", "pending", "dead", "oldest pending", "head tries")
        for t in totals:
            table.add_row(ident(t.topic), f"{t.pending:,}", f"{t.dead:,}",
                          stamp(t.oldest_pending), str(t.max_attempts or 0))
        out.print(table)
        out.print()
    if not found:
        out.print("no outbox messages")
        return
    table = _table("id", "topic", "state", "tries", "created", "delivered / next", "payload",
                   "error")
    for m in found:
        when = stamp(m.delivered_at) if m.state == "delivered" else stamp(m.next_at)
        error = f"{m.last_error_code}: {m.last_error_message or ''}" if m.last_error_code else ""
        table.add_row(str(m.id), ident(m.topic), m.state, str(m.attempts), stamp(m.created_at),
                      when, safe(m.payload_preview), safe(error))
    out.print(table)


@outbox_app.command("retry")
@command(acts=True, confirms=True)
def retry_cmd(
    cx: Call,
    ids: Annotated[
        list[int] | None, typer.Argument(min=1, max=ID_MAX, help="Dead message ids.")
    ] = None,
    topic: Annotated[str | None, typer.Option(help="Every dead message of this topic.")] = None,
) -> None:
    """Send dead messages again, in their topic's order."""
    if not ids and not topic:
        raise cx.usage("name dead message ids, or --topic")
    what = f"topic {topic}" if topic and not ids else plural(len(ids or []), "message")
    if not cx.dry_run:
        cx.confirm(f"retry the dead messages of {what}?")
    done = cx.act(lambda op: op.retry_outbox(ids=ids, topic=topic, reason=cx.reason))
    cx.done({"retried": done}, _retried_line)


def _retried_line(result: dict[str, Any]) -> str:
    done: list[int] = result["retried"]
    return (f"{plural(len(done), 'message')} pending again"
            + (f": {', '.join(map(str, done[:20]))}" if done else ""))


@events_app.command("list")
@command()
def events_cmd(
    cx: Call,
    name: Annotated[str | None, typer.Option(help="Only events of this name.")] = None,
    limit: Limit = 50,
    before: Before = None,
) -> None:
    """Events, newest first, with how many waits each one ended."""
    found = cx.op.events(name=name, limit=limit, before_id=before)
    if cx.as_json:
        cx.show([e.to_json() for e in found])
        return
    if not found:
        out.print("no events")
        return
    table = _table("id", "name", "published", "expires", "woke", "data")
    for e in found:
        table.add_row(str(e.id), ident(e.name), stamp(e.published_at), stamp(e.expires_at),
                      str(e.woke), safe(e.data_preview))
    out.print(table)


@events_app.command("waits")
@command()
def waits_cmd(
    cx: Call,
    name: Annotated[str | None, typer.Option(help="Only waits for this event name.")] = None,
    limit: Limit = 50,
) -> None:
    """Jobs parked waiting for an event, longest waiting first."""
    found = cx.op.event_waits(name=name, limit=limit)
    if cx.as_json:
        cx.show([w.to_json() for w in found])
        return
    if not found:
        out.print("no job waits for an event")
        return
    table = _table("job", "kind", "step", "event", "match", "since", "deadline")
    for w in found:
        table.add_row(str(w.job_id), ident(w.kind), ident(w.step), ident(w.event),
                      safe(w.match_preview or "any"), stamp(w.since),
                      stamp(w.deadline) if w.deadline else "never")
    out.print(table)


@events_app.command("publish")
@command(acts=True)
def publish_cmd(
    cx: Call,
    name: Annotated[str, typer.Argument(help="The event's name.")],
    data: Annotated[str, typer.Option("--data", help="The event's data as JSON.")] = "null",
) -> None:
    """Publish an event by hand: wakes the waits it matches (audited)."""
    try:
        value = json.loads(data)
    except ValueError as exc:
        raise cx.usage(f"--data is not JSON: {exc}") from None
    event = cx.act(lambda op: op.publish_event(name, value, reason=cx.reason))
    cx.done(event, lambda e: f"event {e.id} {ident(e.name)} published")
