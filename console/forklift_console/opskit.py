"""What the operator commands share: options, the Operator, errors, confirmations, output.

Independent of console/cli.py (which imports the command modules while it is itself being
imported), so nothing here imports it back.

Confirmations: a destructive command (retry, cancel, delete, prune) asks on a terminal; with
stdin not a terminal and no ``--yes`` it refuses with exit code 1, so a script never acts by
accident. ``--dry-run`` never asks. Errors: one line on stderr saying what was wrong and what to
do; with ``--json`` also ``{"error": {"code": ..., "message": ...}}`` on stdout. Exit codes: 0
done, 1 refused or failed, 2 usage error (a malformed filter, an impossible range).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Annotated, Any

import psycopg
import typer
from rich.console import Console
from rich.markup import escape

from forklift import ForkliftError
from forklift.ops import Operator, roles
from forklift.ops.display import clean_text as clean_display

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)

Dsn = Annotated[
    str | None,
    typer.Option("--dsn", help="PostgreSQL DSN (default: FORKLIFT_DSN, DATABASE_URL, embedded)."),
]
Schema = Annotated[
    str | None, typer.Option("--schema", help="Schema holding forklift's tables (default: forklift).")
]
Json = Annotated[bool, typer.Option("--json", help="Print JSON for scripts (documented shape).")]
Actor = Annotated[
    str | None,
    typer.Option("--actor", help="Who acts, for the audit trail [FORKLIFT_ACTOR, else the OS user]."),
]
ReadOnlyOpt = Annotated[
    bool,
    typer.Option("--read-only", help="Refuse every change (also FORKLIFT_READ_ONLY=1)."),
]
Reason = Annotated[str | None, typer.Option("--reason", help="Why, for the audit trail.")]
Yes = Annotated[bool, typer.Option("--yes", "-y", help="Act without asking for confirmation.")]
DryRun = Annotated[
    bool, typer.Option("--dry-run", help="Count and sample what would be done; change nothing.")
]


def safe(text: Any) -> str:
    """Text from jobs, made safe for Rich: control and bidi characters out, markup escaped."""
    return escape(clean_display(str(text)))


def emit_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, default=str, indent=2) + "\n")
    sys.stdout.flush()


def operator(
    dsn: str | None, schema: str | None, actor: str | None = None, read_only: bool = False
) -> Operator:
    return Operator(dsn, schema=schema, actor=actor, read_only=read_only or None)


@contextmanager
def handled(as_json: bool = False) -> Iterator[None]:
    """Refusals and failures: a clear line on stderr (and JSON on stdout), exit 1 or 2."""
    try:
        yield
    except ForkliftError as exc:
        code = 2 if getattr(exc, "usage_error", False) else 1
        if as_json:
            emit_json({"error": exc.to_dict()})
        err.print(f"[bold red]error:[/] {safe(exc.message)} [dim]({exc.code})[/]")
        raise typer.Exit(code) from None
    except psycopg.Error as exc:
        refused = roles.refusal(exc)
        if refused is not None:  # a write this database role may not make (forklift roles)
            if as_json:
                emit_json({"error": refused.to_dict()})
            err.print(f"[bold red]error:[/] {safe(refused.message)} [dim]({refused.code})[/]")
            raise typer.Exit(1) from None
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if as_json:
            emit_json({"error": {"code": "database_error", "message": text}})
        err.print(f"[bold red]database error:[/] {safe(text)}")
        raise typer.Exit(1) from None


def usage(message: str, as_json: bool = False) -> typer.Exit:
    if as_json:
        emit_json({"error": {"code": "usage_error", "message": message}})
    err.print(f"[bold red]error:[/] {safe(message)}")
    return typer.Exit(2)


def interactive() -> bool:
    return sys.stdin.isatty()


def confirm(question: str, yes: bool, as_json: bool = False) -> None:
    """Ask on a terminal; refuse (exit 1) without --yes when stdin is not one."""
    if yes:
        return
    if not interactive():
        message = (
            f"refusing to {question.rstrip('?')} without confirmation: stdin is not a terminal;"
            " pass --yes to act (or --dry-run to see what would happen)"
        )
        if as_json:
            emit_json({"error": {"code": "confirmation_required", "message": message}})
        err.print(f"[bold red]error:[/] {safe(message)}")
        raise typer.Exit(1)
    if not typer.confirm(question, default=False, err=True):
        err.print("aborted: nothing changed")
        raise typer.Exit(1)


# -- formatting ----------------------------------------------------------------------------
_SPARK = "▁▂▃▄▅▆▇█"


def spark(points: list[int], width: int = 30) -> str:
    pts = points[-width:]
    top = max(pts, default=0)
    if top == 0:
        return _SPARK[0] * len(pts)
    return "".join(_SPARK[min(len(_SPARK) - 1, round(p / top * (len(_SPARK) - 1)))] for p in pts)


def seconds(value: float | None) -> str:
    if value is None:
        return "–"
    v = abs(value)
    if v < 1:
        return f"{value * 1000:.0f}ms"
    if v < 90:
        return f"{value:.1f}s"
    if v < 5400:
        return f"{value / 60:.0f}m"
    if v < 172800:
        return f"{value / 3600:.1f}h"
    return f"{value / 86400:.1f}d"


def stamp(at: datetime | str | None) -> str:
    if at is None:
        return "–"
    if isinstance(at, str):
        try:
            at = datetime.fromisoformat(at)
        except ValueError:
            return safe(at)
    return at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


STATE_STYLE = {
    "scheduled": "cyan", "available": "blue", "running": "green", "retryable": "yellow",
    "completed": "dim green", "cancelled": "magenta", "dead": "bold red",
}


def state(s: str) -> str:
    return f"[{STATE_STYLE.get(s, '')}]{s}[/]"
