"""Health (key h): the database as forklift depends on it, a thin view of ``forklift.ops.health``.

Alerts first (each with what to do), then the xmin-horizon holder, the forklift tables (dead
rows, last vacuum and analyze, HOT ratio), connections by purpose, lock waits and the retention
windows. The same data as ``forklift health --json``; health reads only statistics views, so a
refresh costs milliseconds whatever the history, and it is fetched at most every 10 s.
"""

from __future__ import annotations

import time

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from forklift.ops import Operator
from forklift.ops.health import Health
from forklift_console.screens.base import ConsoleScreen
from forklift_console.widgets.table import Column, LiveTable, Row
from forklift_console.widgets.text import duration, one_line, plural, style_of

#: Seconds between health reads (the screen may tick faster).
EVERY = 10.0


def window(seconds: float | None) -> str:
    return "forever" if seconds is None else duration(seconds)


def summary(h: Health) -> Text:
    """Alerts, the horizon, connections, locks and retention, as the top of the screen."""
    text = Text()
    if not h.alerts:
        text.append("no alerts", style=style_of("state-completed"))
    for a in h.alerts:
        text.append(f"⚠ {a.code} ", style=style_of("state-dead"))
        text.append_text(one_line(a.message, limit=200))
        text.append("\n    do: ", style="bold")
        text.append_text(one_line(a.action, limit=300))
        text.append("\n")
    text.append("\n")
    if h.horizon:
        x = h.horizon[0]
        who = f"pid {x.pid}" if x.pid is not None else (x.name or "?")
        text.append("xmin horizon held by ", style="bold")
        text.append_text(one_line(
            f"{x.kind.replace('_', ' ')} {who} ({x.application or x.role or '?'}, "
            f"{x.state or '?'}, {duration(x.age_seconds) if x.age_seconds is not None else '?'}"
            f" old, {x.xid_age or 0:,} xids back)", limit=160))
    else:
        text.append("xmin horizon: nothing holds it back", style="bold")
    c = h.connections
    mine = ", ".join(f"{k} {v}" for k, v in c.forklift.items()) or "none"
    text.append(f"\nconnections {c.in_use}/{c.max_connections} (forklift: {mine}) · NOTIFY"
                f" queue {h.notify_queue_usage:.1%} · lock waits {len(h.lock_waits)}")
    d = h.retention.defaults
    text.append("\nretention: " + ", ".join(f"{k} {window(v)}" for k, v in d.items()))
    if h.retention.queues:
        text.append(f" · {plural(len({w.queue for w in h.retention.queues}), 'queue')} with their own")
    return text


class HealthScreen(ConsoleScreen[Health]):
    MODE = "health"
    HELP = (
        "Database health as forklift depends on it: alerts with what to do; who holds the xmin"
        " horizon (a long transaction, a replication slot or a prepared transaction keeps"
        " vacuum from removing dead jobs); per forklift table the dead rows, last vacuum and"
        " analyze and the HOT update ratio; connections by purpose; lock waits; retention."
        " The same as `forklift health`; thresholds: `forklift health set`."
    )

    def __init__(self) -> None:
        super().__init__()
        self._last: Health | None = None
        self._at = float("-inf")

    def compose_body(self) -> ComposeResult:
        with Vertical(id="body"):
            yield Static(id="info")
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

    def fetch(self, op: Operator) -> Health:
        if self._last is None or time.monotonic() - self._at >= EVERY:
            self._last, self._at = op.health(), time.monotonic()
        return self._last

    def show(self, data: Health) -> None:
        now = self.console.now()

        def ago(*stamps: object) -> str:
            seen = [s for s in stamps if s is not None]
            return duration((now - max(seen)).total_seconds()) if seen else "never"  # type: ignore[operator, type-var]

        rows: list[Row] = [
            (t.table, [t.table, f"{t.live_rows:,}", f"{t.dead_rows:,}", f"{t.dead_ratio:.0%}",
                       f"{t.hot_ratio:.0%}" if t.hot_ratio is not None else "–",
                       ago(t.last_vacuum, t.last_autovacuum),
                       ago(t.last_analyze, t.last_autoanalyze)])
            for t in data.tables
        ]
        self.query_one("#tables", LiveTable).sync(rows)
        self.query_one("#info", Static).update(summary(data))
