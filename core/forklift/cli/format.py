"""How the CLI writes numbers, times, states and sparklines for people (never for --json)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

_SPARK = "▁▂▃▄▅▆▇█"

STATE_STYLE = {
    "scheduled": "cyan", "available": "blue", "running": "green", "retryable": "yellow",
    "completed": "dim green", "cancelled": "magenta", "dead": "bold red",
}


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


def state(s: str) -> str:
    return f"[{STATE_STYLE.get(s, '')}]{s}[/]"


def plural(n: int, one: str, many: str | None = None) -> str:
    """``1 job``, ``3 jobs``, ``1,200 jobs``: never ``job(s)``."""
    return f"{n:,} {one if n == 1 else (many or one + 's')}"


def ident(value: Any) -> str:
    """An identifier (queue, kind, tag, name, worker, actor) for Rich: nothing hidden, no markup."""
    from rich.markup import escape

    from forklift.ops.display import show_id

    return escape(show_id(value))


def safe(value: Any) -> str:
    """Free text from jobs (messages, args) for Rich: controls and bidi out, markup escaped."""
    from rich.markup import escape

    from forklift.ops.display import clean_text

    return escape(clean_text(value))
