"""Words, glyphs and numbers as the console shows them.

Every state is a glyph AND a word, so nothing depends on colour (``NO_COLOR``, colour-blind
readers, a screenshot pasted into a ticket). Text that came from jobs goes through
:func:`plain`, which drops control, ANSI and bidi characters and returns a :class:`Text`, so
markup such as ``[bold]`` in a payload is shown literally, never interpreted.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Final

from rich.text import Text

from forklift.ops.display import clean_text, show_id

# glyph, word, style. Styles only decorate: the glyph and the word carry the meaning.
JOB_STATES: Final[dict[str, tuple[str, str]]] = {
    "scheduled": ("◷", "state-scheduled"),
    "available": ("○", "state-available"),
    "running": ("▶", "state-running"),
    "retryable": ("↻", "state-retryable"),
    "completed": ("✔", "state-completed"),
    "cancelled": ("⊘", "state-cancelled"),
    "dead": ("✖", "state-dead"),
}
#: A parked job's word wherever its state is shown (list, detail header): its state stays
#: scheduled; the word says why (ctx.sleep, ctx.wait_for_event, after= jobs).
PARKED_WORDS: Final[dict[str, str]] = {"sleeping": "sleeping", "event": "waiting", "jobs": "held"}


def parked_badge(why: str) -> Text:
    """A parked job's state: scheduled's glyph and colour, the reason's word."""
    glyph, style = JOB_STATES["scheduled"]
    return badge(glyph, PARKED_WORDS[why], style)


QUEUE_STATES: Final[dict[str, tuple[str, str]]] = {
    "active": ("▶", "state-running"),
    "idle": ("·", "state-idle"),
    "lagging": ("⚠", "state-warn"),
    "failing": ("✖", "state-dead"),
    "no_worker": ("∅", "state-warn"),
    "paused": ("‖", "state-paused"),
    "full": ("⊘", "state-warn"),
}
WORKER_STATES: Final[dict[str, tuple[str, str]]] = {
    "running": ("●", "state-running"),
    "draining": ("◐", "state-warn"),
    "stale": ("⚠", "state-dead"),
}
CONNECTION_STATES: Final[dict[str, tuple[str, str]]] = {
    "connected": ("●", "state-running"),
    "connecting": ("◌", "state-warn"),
    "offline": ("✖", "state-dead"),
}

# Textual component classes cannot reach into DataTable cells, so cells carry Rich styles.
# These stay readable on dark and light themes and vanish cleanly under NO_COLOR.
_STYLES: Final[dict[str, str]] = {
    "state-scheduled": "cyan",
    "state-available": "blue",
    "state-running": "green",
    "state-retryable": "yellow",
    "state-completed": "green",
    "state-cancelled": "magenta",
    "state-dead": "bold red",
    "state-idle": "dim",
    "state-warn": "bold yellow",
    "state-paused": "bold magenta",
}

#: Under NO_COLOR, Textual turns colours into greys, and a dark red on black all but vanishes;
#: there the alarming states are bold and the rest plain. Set once per app (use_colour).
_MONOCHROME: dict[str, str] = {
    "state-dead": "bold",
    "state-warn": "bold",
    "state-paused": "bold",
    "state-idle": "dim",
}
_colour = True


def use_colour(on: bool) -> None:
    global _colour
    _colour = on


def style_of(style_class: str) -> str:
    return _STYLES.get(style_class, "") if _colour else _MONOCHROME.get(style_class, "")


MARK: Final = "✓"
SPARK_BLOCKS: Final = "▁▂▃▄▅▆▇█"
NONE: Final = "–"


def plain(value: Any, *, limit: int | None = None) -> Text:
    """Untrusted text, safe to render: no control/ANSI/bidi characters, markup shown as typed."""
    text = clean_text("" if value is None else str(value))
    if "\n" in text:
        text = text.replace("\r\n", "\n")
    if limit is not None and len(text) > limit:
        text = text[: max(limit - 1, 0)] + "…"
    return Text(text)


def one_line(value: Any, *, limit: int | None = None) -> Text:
    """Like :func:`plain`, folded onto one line (for table cells and summaries)."""
    text = clean_text("" if value is None else str(value))
    return plain(" ".join(text.split()), limit=limit)


def ident(value: Any, *, limit: int | None = None) -> Text:
    """An identifier an application chose (queue, kind, tag, schedule, backfill, worker,
    actor), shown so that two different ones never look alike: every character a reader
    cannot see becomes a visible escape (``mail\\x1b[0m``, ``mail\\u200b``; see
    :func:`forklift.ops.display.show_id`), never stripped."""
    text = show_id("" if value is None else value)
    if limit is not None and len(text) > limit:
        text = text[: max(limit - 1, 0)] + "…"
    return Text(text)


def idents(values: Sequence[Any], *, limit: int | None = None, sep: str = ",") -> Text:
    """Several identifiers, each shown with :func:`ident`, joined by ``sep``."""
    return ident_join([show_id(v) for v in values], sep, limit)


def ident_join(shown: Sequence[str], sep: str, limit: int | None) -> Text:
    text = sep.join(shown)
    if limit is not None and len(text) > limit:
        text = text[: max(limit - 1, 0)] + "…"
    return Text(text)


def pretty_json(value: Any) -> Text:
    """A JSON value indented for reading; strings from jobs stay literal (never markup)."""
    try:
        text = json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=str)
    except (TypeError, ValueError):
        text = repr(value)
    return plain(text)


def badge(glyph: str, word: str, style_class: str, *, width: int | None = None) -> Text:
    label = f"{glyph} {word}"
    if width is not None:
        label = label.ljust(width)
    return Text(label, style=style_of(style_class))


def job_state(state: str) -> Text:
    glyph, style = JOB_STATES.get(state, ("?", ""))
    return badge(glyph, state, style)


def queue_state(state: str) -> Text:
    glyph, style = QUEUE_STATES.get(state, ("?", ""))
    return badge(glyph, state.replace("_", " "), style)


def worker_state(state: str) -> Text:
    glyph, style = WORKER_STATES.get(state, ("?", ""))
    return badge(glyph, state, style)


def connection_state(state: str) -> Text:
    glyph, style = CONNECTION_STATES.get(state, ("?", ""))
    return badge(glyph, state, style)


def count(n: int | None) -> str:
    if n is None:
        return NONE
    return f"{n:,}"


def capped(n: int, cap: int | None) -> str:
    """A count that may have stopped at a cap: ``10,000+``."""
    return f"{n:,}+" if cap is not None and n >= cap else f"{n:,}"


def duration(seconds: float | None) -> str:
    """A short human duration: ``0s``, ``42s``, ``3m05s``, ``2h14m``, ``3d4h``."""
    if seconds is None:
        return NONE
    s = int(abs(seconds))
    negative = seconds < 0 and s > 0  # never "-0s"
    if s < 60:
        out = f"{s}s"
    elif s < 3600:
        out = f"{s // 60}m{s % 60:02d}s"
    elif s < 86400:
        out = f"{s // 3600}h{(s % 3600) // 60:02d}m"
    else:
        out = f"{s // 86400}d{(s % 86400) // 3600}h"
    return f"-{out}" if negative else out


def seconds(value: float | None) -> str:
    """A run time: tenths under ten seconds (``0.4s``), else :func:`duration`."""
    if value is None:
        return NONE
    return f"{value:.1f}s" if abs(value) < 10 else duration(value)


def age(at: datetime | None, now: datetime) -> str:
    """How long ago ``at`` was, from the console's clock."""
    if at is None:
        return NONE
    return duration((now - at).total_seconds())


def until(at: datetime | None, now: datetime) -> str:
    """``in 12s`` for a future time, ``12s ago`` for a past one."""
    if at is None:
        return NONE
    seconds = (at - now).total_seconds()
    return f"in {duration(seconds)}" if seconds >= 0 else f"{duration(-seconds)} ago"


def stamp(at: datetime | str | None, now: datetime | None = None) -> str:
    """A timestamp in UTC; the date is left out when it is today's (by the console's clock).
    Text that is not a time is shown as it is."""
    if at is None:
        return NONE
    if isinstance(at, str):
        return clean_text(at)
    at = at.astimezone(UTC)
    if now is not None and at.date() == now.astimezone(UTC).date():
        return at.strftime("%H:%M:%S")
    return at.strftime("%Y-%m-%d %H:%M:%S")


def spark(values: Sequence[float], width: int | None = None) -> str:
    """A sparkline of block characters; zero is the lowest block, so a flat line reads 'none'."""
    points = list(values)[-width:] if width else list(values)
    if not points:
        return ""
    top = max(points)
    if top <= 0:
        return SPARK_BLOCKS[0] * len(points)
    steps = len(SPARK_BLOCKS) - 1
    return "".join(
        SPARK_BLOCKS[0] if v <= 0 else SPARK_BLOCKS[max(1, round(v / top * steps))] for v in points
    )


def ids_summary(ids: Sequence[int | str], limit: int = 12) -> str:
    """``12, 15, 19 and 40 more``: the ids a confirmation names."""
    shown = ", ".join(str(i) for i in ids[:limit])
    rest = len(ids) - limit
    return f"{shown} and {rest:,} more" if rest > 0 else shown


def plural(n: int, word: str, many: str | None = None) -> str:
    return f"{n:,} {word if n == 1 else (many or word + 's')}"
