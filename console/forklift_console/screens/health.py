"""Health (key h): the database as forklift depends on it, a thin view of ``forklift.ops.health``.

First one verdict per area (``Health.checks``): the xmin-horizon holder, blocking locks,
connections by purpose against their limit, the NOTIFY queue, table bloat, the retention
backlog and, with a replica, its lag; each with a word and a symbol for its level (never colour
alone) and the advice the operator API gives, the same words ``forklift health`` prints. Then
who holds the horizon and who blocks whom, in full, and the forklift tables (dead rows, last
vacuum and analyze, HOT ratio). Health reads only statistics views, so a refresh costs
milliseconds whatever the history; it is fetched at most every 10 s (``r`` reads it now).
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from datetime import datetime
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.widgets import Static

from forklift import ForkliftError
from forklift.ops import Operator
from forklift.ops.health import Check, Health, replica_check
from forklift.ops.replica import ReplicaStatus
from forklift_console.screens.base import ConsoleScreen
from forklift_console.widgets.table import Column, LiveTable, Row
from forklift_console.widgets.text import duration, one_line, plural, stamp, style_of

#: Seconds between health reads (the screen may tick faster).
EVERY = 10.0

#: level -> (symbol, word, style class): a level reads the same without colour.
LEVELS: dict[str, tuple[str, str, str]] = {
    "ok": ("✔", "ok", "state-completed"),
    "warning": ("▲", "WARNING", "state-warn"),
    "critical": ("✖", "CRITICAL", "state-dead"),
}


@dataclass(frozen=True)
class HealthData:
    health: Health
    #: The replica the console reads, as last seen (None without one).
    replica: ReplicaStatus | None = None


def window(seconds: float | None) -> str:
    return "forever" if seconds is None else duration(seconds)


def level_badge(level: str) -> Text:
    glyph, word, style = LEVELS.get(level, ("?", level, "state-warn"))
    return Text(f"{glyph} {word:<8}", style=style_of(style))


def every_check(data: HealthData) -> list[Check]:
    found = list(data.health.checks)
    replica = replica_check(data.replica)
    if replica is not None:
        found.append(replica)
    return found


def summary(data: HealthData, now: datetime | None = None) -> Text:
    """The verdicts, worst first within the reading order, each with what to do."""
    h = data.health
    checks = every_check(data)
    bad = [c for c in checks if c.level != "ok"]
    text = Text()
    if bad:
        text.append(f"{plural(len(bad), 'check')} {'needs' if len(bad) == 1 else 'need'}"
                    " attention", style="bold")
    else:
        text.append("✔ all checks ok", style="bold " + style_of("state-completed"))
    text.append("\n")
    for c in checks:
        text.append_text(level_badge(c.level))
        text.append(f" {c.title}: ", style="bold")
        text.append_text(one_line(c.summary, limit=300))
        text.append("\n")
        if c.action and (c.level != "ok" or c.name in ("horizon", "locks")):
            text.append("    do: ", style="bold")
            text.append_text(one_line(c.action, limit=400))
            text.append("\n")
    d = h.retention.defaults
    text.append("retention windows: " + ", ".join(f"{k} {window(v)}" for k, v in d.items()),
                style="dim")
    if h.retention.queues:
        text.append(f" · {plural(len({w.queue for w in h.retention.queues}), 'queue')} with"
                    " their own", style="dim")
    return text


def details(h: Health, now: datetime | None = None) -> Text:
    """Who holds the horizon and who blocks whom: every holder and waiter, with the query."""
    text = Text()
    if h.horizon:
        text.append("xmin horizon holders, oldest first\n", style="bold")
    for x in h.horizon:
        who = f"pid {x.pid}" if x.pid is not None else (x.name or "?")
        text.append_text(one_line(
            f"  {x.kind.replace('_', ' ')} {who} · {x.application or x.role or '?'} ·"
            f" {x.state or '?'} · since {stamp(x.since, now)}"
            f" ({duration(x.age_seconds) if x.age_seconds is not None else '?'})"
            f" · {x.xid_age or 0:,} xids back", limit=300))
        text.append("\n")
        if x.query:
            text.append("    query: ", style="dim")
            text.append_text(one_line(x.query, limit=200))
            text.append("\n")
    if h.lock_waits:
        text.append("sessions waiting on a lock of a forklift table\n", style="bold")
    for w in h.lock_waits:
        text.append_text(one_line(
            f"  pid {w.pid} · {w.application or '?'} · waited {w.waiting_seconds:,.1f}s on"
            f" {', '.join(w.tables) or '?'} · {w.query or ''}", limit=300))
        text.append("\n")
        for b in w.blockers:
            text.append_text(one_line(
                f"    blocked by pid {b.pid} · {b.application or '?'} · {b.state or '?'}"
                f" · transaction since {stamp(b.since, now)} · {b.query or ''}", limit=300))
            text.append("\n")
    text.rstrip()
    return text


class HealthScreen(ConsoleScreen[HealthData]):
    MODE = "health"
    HELP = (
        "Database health as forklift depends on it, one verdict per area with a word and a"
        " symbol (✔ ok, ▲ WARNING, ✖ CRITICAL) and what to do: who holds the xmin horizon (a"
        " long transaction, a replication slot or a prepared transaction keeps vacuum from"
        " removing dead jobs), sessions blocked on forklift tables and who blocks them,"
        " connections by purpose against max_connections, the NOTIFY queue, dead rows, the"
        " retention backlog and, with a replica, its lag. Below: every horizon holder and"
        " lock wait with its query, and per forklift table the dead rows, last vacuum and"
        " analyze and the HOT ratio. The same as `forklift health`; thresholds: `forklift"
        " health set`. In `forklift demo`, p holds a transaction open to pin the horizon."
    )
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("r", "read", "Read now"),
        Binding("p", "pin", "Pin horizon (demo)"),
    ]
    DEFAULT_CSS = """
    HealthScreen #body { height: 1fr; }
    HealthScreen #checks { height: auto; padding: 0 1; }
    HealthScreen #holders { height: auto; padding: 0 1; margin-top: 1; }
    HealthScreen #tables { height: auto; margin-top: 1; }
    """

    def __init__(self) -> None:
        super().__init__()
        self._last: Health | None = None
        self._at = float("-inf")

    def compose_body(self) -> ComposeResult:
        with VerticalScroll(id="body"):
            yield Static(id="checks")
            yield Static(id="holders")
            yield LiveTable(
                [
                    Column("table", "Table", 16),
                    Column("live", "Live", 9),
                    Column("dead", "Dead", 9),
                    Column("ratio", "Dead%", 6),
                    Column("hot", "HOT%", 5),
                    Column("vacuum", "Vacuumed", 9),
                    Column("analyze", "Analyzed", 9),
                ],
                id="tables",
            )

    def fetch(self, op: Operator) -> HealthData:
        if self._last is None or time.monotonic() - self._at >= EVERY:
            self._last, self._at = op.health(), time.monotonic()
        replica = op.session.replica
        if replica is not None and replica.state == "not_asked":
            # Health reads the primary only: ask the replica itself, so its verdict is known
            # even when no other screen has read there yet.
            with contextlib.suppress(ForkliftError):  # not a standby: the verdict says so
                replica = op.session.check_replica()
            replica = op.session.replica or replica
        return HealthData(self._last, replica)

    def show(self, data: HealthData) -> None:
        now = self.console.now()

        def ago(*stamps: datetime | None) -> str:
            seen = [s for s in stamps if s is not None]
            return duration((now - max(seen)).total_seconds()) if seen else "never"

        h = data.health
        rows: list[Row] = [
            (t.table, [t.table, f"{t.live_rows:,}", f"{t.dead_rows:,}", f"{t.dead_ratio:.0%}",
                       f"{t.hot_ratio:.0%}" if t.hot_ratio is not None else "–",
                       ago(t.last_vacuum, t.last_autovacuum),
                       ago(t.last_analyze, t.last_autoanalyze)])
            for t in h.tables
        ]
        self.query_one("#tables", LiveTable).sync(rows)
        self.query_one("#checks", Static).update(summary(data, now))
        holders = self.query_one("#holders", Static)
        holders.update(details(h, now))
        holders.display = bool(h.horizon or h.lock_waits)

    # -- actions ------------------------------------------------------------------------------
    def action_read(self) -> None:
        """Read health now, not at the next 10-second mark."""
        self._at = float("-inf")
        self.reload()

    def can(self, action: str) -> bool | None:
        if action == "pin":
            return self.console.demo is not None  # a demo-only rehearsal: hidden elsewhere
        return True

    def action_pin(self) -> None:
        demo = self.console.demo
        if demo is None:
            return
        self.notify(demo.pin_horizon(), title="xmin horizon")
        self.action_read()
