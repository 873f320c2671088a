"""The two lines on top of every screen, the stale banner, and the line echoing CLI commands."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime

from rich.text import Text
from textual.widgets import Static

from forklift_console.widgets.text import connection_state, duration, one_line, plain

# (mode, key, label): the screens, in the order of their number keys.
TABS: tuple[tuple[str, str, str], ...] = (
    ("overview", "1", "Overview"),
    ("queues", "2", "Queues"),
    ("jobs", "3", "Jobs"),
    ("dead", "4", "Dead letters"),
    ("workers", "5", "Workers"),
    ("audit", "6", "Audit"),
    ("batches", "7", "Batches"),
    ("schedules", "8", "Schedules"),
    ("backfills", "9", "Backfills"),
)
#: (mode, label): screens without a number key, reached with ``:name`` and the palette.
MORE_SCREENS: tuple[tuple[str, str], ...] = (
    ("retries", "Retries"),
    ("scheduled", "Scheduled"),
    ("kinds", "Kinds"),
    ("charts", "Charts"),
)


@dataclass(frozen=True)
class Status:
    """What the header says about the console's link to the database."""

    target: str
    read_only: bool = False
    connection: str = "connecting"  # connected | connecting | offline
    updated_at: datetime | None = None
    failing_since: datetime | None = None
    error: str | None = None
    interval: float = 2.0
    frozen: bool = False

    def but(self, **changes: object) -> Status:
        return replace(self, **changes)  # type: ignore[arg-type]

    def stale(self, now: datetime) -> bool:
        """Refreshes are failing, or nothing fresh has arrived for a while."""
        if self.failing_since is not None:
            return True
        if self.frozen or self.updated_at is None:
            return False
        # Slow screens fetch less often (ConsoleScreen.DUTY, MIN_INTERVAL): leave them room.
        return (now - self.updated_at).total_seconds() > max(30.0, 5 * self.interval)


def rate_label(seconds: float) -> str:
    return f"{seconds:g}s"


class StatusBar(Static):
    """``forklift ● connected  host:5432/app  READ-ONLY  updated 2s ago  every 2s``."""

    def show(self, status: Status, now: datetime) -> None:
        head = Text()
        head.append(" forklift ", style="bold reverse")
        head.append(" ")
        head.append_text(connection_state(status.connection))
        head.append("  ")
        tail = Text()
        if status.read_only:
            tail.append("  ")
            tail.append(" READ-ONLY ", style="bold reverse")
        tail.append("  ")
        if status.updated_at is None:
            tail.append("no data yet", style="dim")
        else:
            seconds = max(0.0, (now - status.updated_at).total_seconds())
            tail.append(f"updated {duration(seconds)} ago")
        tail.append("  ")
        if status.frozen:
            tail.append("❄ frozen (f)", style="bold")
        else:
            tail.append(f"every {rate_label(status.interval)}", style="dim")
        # The target gives way first when the terminal is narrow.
        room = self.app.size.width - head.cell_len - tail.cell_len
        head.append_text(one_line(status.target, limit=max(8, min(room, 60))))
        head.append_text(tail)
        self.update(head)


class TabBar(Static):
    """The screens and their number keys; the current one is bracketed (not only coloured)."""

    def show(self, current: str, title: str | None = None) -> None:
        width = self.app.size.width
        room = min(len(title) + 2, 20) if title else 0
        # Full labels when they fit; else short ones; else only the current screen is named.
        for shorten in (0, 1, 2):
            line = self._line(current, shorten)
            if line.cell_len + room <= width:
                break
        if title:
            line.append("› ", style="dim")
            line.append_text(one_line(title, limit=max(10, width - line.cell_len - 1)))
        line.truncate(width, overflow="ellipsis")
        self.update(line)

    @staticmethod
    def _line(current: str, shorten: int) -> Text:
        line = Text(" ")
        for mode, key, label in TABS:
            word = label if shorten == 0 else label.split()[0][:6]
            if mode == current:
                line.append(f"[{key} {label}]", style="bold reverse")
            elif shorten == 2:
                line.append(f" {key} ", style="dim")
            else:
                line.append(f" {key} {word} ", style="dim")
            line.append("" if shorten == 2 else " ")
        if shorten == 2:
            line.append(" ")
        for mode, _ in MORE_SCREENS:  # a screen without a number key names itself
            if mode == current:
                line.append(f"[:{mode}]", style="bold reverse")
                line.append(" ")
        return line


class StaleBanner(Static):
    """Shown when refreshes fail: what failed, since when, and that the data on screen is old."""

    def show(self, status: Status, now: datetime) -> None:
        if not status.stale(now):
            self.display = False
            return
        text = Text().append("⚠ STALE ", style="bold reverse")
        if status.failing_since is not None:
            down = duration((now - status.failing_since).total_seconds())
            text.append(f" refresh failing for {down}: ")
            text.append_text(one_line(status.error or "unknown error", limit=160))
            text.append(" — retrying on its own")
        else:
            text.append(" waiting for the database")
        if status.updated_at is not None:
            age = duration((now - status.updated_at).total_seconds())
            text.append(f"; the data shown is {age} old")
        self.update(text)
        self.display = True


class CommandEcho(Static):
    """The CLI equivalent of the last action, ready to paste into a runbook."""

    def show(self, command: str | None) -> None:
        if not command:
            self.display = False
            return
        text = Text().append("cli ", style="bold")
        text.append("$ ", style="dim")
        text.append_text(plain(command))
        self.update(text)
        self.display = True
