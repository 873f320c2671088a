"""`forklift consumers list|show|pause|resume|reset-cursor`: thin doors onto forklift.ops.consumers."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from forklift.cli.format import seconds, stamp
from forklift.cli.kit import Call, command, ident, out, safe

consumers_app = typer.Typer(
    help="Consumers: lag and failure streak; pause, resume, move the cursor.",
    no_args_is_help=True)

Name = Annotated[str, typer.Argument(help="The consumer's name, as declared.")]
To = Annotated[str, typer.Option(
    "--to", help="The new cursor as JSON (e.g. 1200 or '\"2024-06-01\"'); default null: the"
                 " source's start, so everything is read again.")]

_STATE = {"paused": "[yellow]paused[/]", "backing_off": "[red]backing off[/]",
          "failing": "[red]failing[/]", "running": "[green]running[/]", "waiting": "waiting",
          "idle": "idle"}


def _cursor(value: Any) -> str:
    return "start" if value is None else safe(json.dumps(value))


def _line(info: Any) -> str:
    text = (f"consumer {ident(info.name)}: {_STATE.get(info.state, info.state)}, cursor"
            f" {_cursor(info.cursor)}")
    if info.failures:
        text += f", {info.failures} failures in a row"
    return text


@consumers_app.command("list")
@command()
def consumers_list(cx: Call) -> None:
    """Every consumer: state, cursor and its age, items done, failure streak."""
    rows = cx.op.consumers.list()
    if cx.as_json:
        cx.show([r.to_json() for r in rows])
        return
    if not rows:
        out.print("no consumers recorded (a worker of your app records each one when it first"
                  " runs)")
        return
    from rich.table import Table

    t = Table(box=None, header_style="bold", pad_edge=False)
    for col in ("name", "state", "cursor", "cursor age", "items", "failures", "last error",
                "retry at"):
        t.add_column(col)
    for r in rows:
        error = r.last_error or {}
        t.add_row(
            ident(r.name), _STATE.get(r.state, r.state), _cursor(r.cursor),
            seconds(r.cursor_age_seconds), str(r.items_done), str(r.failures),
            safe(error.get("message") or "—") if r.failures else "—",
            stamp(r.retry_at) if r.state == "backing_off" else "—",
        )
    out.print(t)


@consumers_app.command("show")
@command()
def consumers_show(cx: Call, name: Name) -> None:
    """One consumer, every field."""
    info = cx.op.consumers.show(name)
    cx.show(info, _line)


@consumers_app.command("pause")
@command(acts=True)
def consumers_pause(cx: Call, name: Name) -> None:
    """Stop a consumer from its next batch (the batch in flight commits) until resumed."""
    cx.done(cx.act(lambda op: op.consumers.pause(name, reason=cx.reason)), _line)


@consumers_app.command("resume")
@command(acts=True)
def consumers_resume(cx: Call, name: Name) -> None:
    """Let a paused consumer run again; a run starts at once."""
    cx.done(cx.act(lambda op: op.consumers.resume(name, reason=cx.reason)), _line)


@consumers_app.command("reset-cursor")
@command(acts=True, confirms=True)
def consumers_reset_cursor(cx: Call, name: Name, to: To = "null") -> None:
    """Move a consumer's cursor: back to read items again, forward to pass over them."""
    try:
        cursor = json.loads(to)
    except ValueError:
        raise cx.usage(f"--to must be JSON (a number, a quoted string, null), not {to!r}") from None
    if not cx.dry_run:
        from forklift.ops.display import show_id

        cx.confirm(f"move the cursor of consumer {show_id(name)} to {json.dumps(cursor)}?")
    cx.done(cx.act(lambda op: op.consumers.reset_cursor(name, cursor=cursor, reason=cx.reason)),
            _line)
