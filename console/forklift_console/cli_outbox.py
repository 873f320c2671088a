"""`forklift outbox list|retry` and `forklift events list|waits|publish`: thin doors onto
forklift.ops.outbox and forklift.ops.events. Registered on the main command in console/cli.py.
"""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.table import Table

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
    stamp,
    usage,
)

outbox_app = typer.Typer(
    help="The transactional outbox: messages per topic, delivery state, retry of dead ones.",
    no_args_is_help=True,
)
events_app = typer.Typer(
    help="Events for ctx.wait_for_event: recent events, parked waits, publish by hand.",
    no_args_is_help=True,
)
Limit = Annotated[int, typer.Option(min=1, max=1000, help="At most this many.")]
Before = Annotated[int | None, typer.Option("--before", help="The page below this id.")]


def _table(*columns: str) -> Table:
    table = Table(box=None, header_style="bold", pad_edge=False)
    for col in columns:
        table.add_column(col, no_wrap=col not in ("payload", "data", "error", "match"))
    return table


@outbox_app.command("list")
def list_cmd(
    state: Annotated[str | None, typer.Option(help="pending, delivered or dead.")] = None,
    topic: Annotated[str | None, typer.Option(help="Only this topic.")] = None,
    limit: Limit = 50,
    before: Before = None,
    dsn: Dsn = None,
    schema: Schema = None,
    as_json: Json = False,
) -> None:
    """Messages, newest first (with per-topic totals of pending and dead ones)."""
    with handled(as_json), operator(dsn, schema) as op:
        found = op.outbox_messages(state=state, topic=topic, limit=limit, before_id=before)
        totals = op.outbox_topics()
    if as_json:
        emit_json({"topics": [t.to_json() for t in totals],
                   "messages": [m.to_json() for m in found]})
        return
    if totals:
        table = _table("topic", "pending", "dead", "oldest pending", "head tries")
        for t in totals:
            table.add_row(safe(t.topic), str(t.pending), str(t.dead), stamp(t.oldest_pending),
                          str(t.max_attempts or 0))
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
        table.add_row(str(m.id), safe(m.topic), m.state, str(m.attempts), stamp(m.created_at),
                      when, safe(m.payload_preview), safe(error))
    out.print(table)


@outbox_app.command("retry")
def retry_cmd(
    ids: Annotated[list[int] | None, typer.Argument(help="Dead message ids.")] = None,
    topic: Annotated[str | None, typer.Option(help="Every dead message of this topic.")] = None,
    reason: Reason = None,
    actor: Actor = None,
    read_only: ReadOnlyOpt = False,
    yes: Yes = False,
    dsn: Dsn = None,
    schema: Schema = None,
    as_json: Json = False,
) -> None:
    """Send dead messages again, in their topic's order."""
    if not ids and not topic:
        raise usage("name dead message ids, or --topic", as_json)
    what = f"topic {topic}" if topic and not ids else f"{len(ids or [])} message(s)"
    with handled(as_json):
        confirm(f"retry the dead messages of {what}?", yes, as_json)
        with operator(dsn, schema, actor, read_only) as op:
            done = op.retry_outbox(ids=ids, topic=topic, reason=reason)
    if as_json:
        emit_json({"retried": done})
    else:
        out.print(f"{len(done)} message(s) pending again" + (f": {done[:20]}" if done else ""))


@events_app.command("list")
def events_cmd(
    name: Annotated[str | None, typer.Option(help="Only events of this name.")] = None,
    limit: Limit = 50,
    before: Before = None,
    dsn: Dsn = None,
    schema: Schema = None,
    as_json: Json = False,
) -> None:
    """Events, newest first, with how many waits each one ended."""
    with handled(as_json), operator(dsn, schema) as op:
        found = op.events(name=name, limit=limit, before_id=before)
    if as_json:
        emit_json([e.to_json() for e in found])
        return
    if not found:
        out.print("no events")
        return
    table = _table("id", "name", "published", "expires", "woke", "data")
    for e in found:
        table.add_row(str(e.id), safe(e.name), stamp(e.published_at), stamp(e.expires_at),
                      str(e.woke), safe(e.data_preview))
    out.print(table)


@events_app.command("waits")
def waits_cmd(
    name: Annotated[str | None, typer.Option(help="Only waits for this event name.")] = None,
    limit: Limit = 50,
    dsn: Dsn = None,
    schema: Schema = None,
    as_json: Json = False,
) -> None:
    """Jobs parked waiting for an event, longest waiting first."""
    with handled(as_json), operator(dsn, schema) as op:
        found = op.event_waits(name=name, limit=limit)
    if as_json:
        emit_json([w.to_json() for w in found])
        return
    if not found:
        out.print("no job waits for an event")
        return
    table = _table("job", "kind", "step", "event", "match", "since", "deadline")
    for w in found:
        table.add_row(str(w.job_id), safe(w.kind), safe(w.step), safe(w.event),
                      safe(w.match_preview or "any"), stamp(w.since),
                      stamp(w.deadline) if w.deadline else "never")
    out.print(table)


@events_app.command("publish")
def publish_cmd(
    name: Annotated[str, typer.Argument(help="The event's name.")],
    data: Annotated[str, typer.Option("--data", help="The event's data as JSON.")] = "null",
    reason: Reason = None,
    actor: Actor = None,
    read_only: ReadOnlyOpt = False,
    dsn: Dsn = None,
    schema: Schema = None,
    as_json: Json = False,
) -> None:
    """Publish an event by hand: wakes the waits it matches (audited)."""
    try:
        value = json.loads(data)
    except ValueError as exc:
        raise usage(f"--data is not JSON: {exc}", as_json) from None
    with handled(as_json), operator(dsn, schema, actor, read_only) as op:
        event = op.publish_event(name, value, reason=reason)
    if as_json:
        emit_json(event.to_json())
    else:
        out.print(f"event {event.id} {safe(event.name)} published")
