"""The two lines on top of every screen, the stale banner, and the line echoing CLI commands."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime

from rich.text import Text
from textual.screen import ModalScreen
from textual.widgets import Static

from forklift.ops.replica import ReplicaStatus
from forklift_console.widgets.text import connection_state, duration, ident, one_line, plain

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
#: Where the tab bar draws a rule between the numbered screens: the work itself (overview to
#: dead letters), who does it (workers, audit), the long runs (batches to backfills).
TAB_GROUPS: frozenset[str] = frozenset({"workers", "batches"})
#: (mode, label): screens without a number key, reached with ``:name`` and the palette.
MORE_SCREENS: tuple[tuple[str, str], ...] = (
    ("flow", "Flow control"),
    ("health", "Health"),
    ("workflows", "Workflows"),
    ("retries", "Retries"),
    ("scheduled", "Scheduled"),
    ("kinds", "Kinds"),
    ("charts", "Charts"),
    ("consumers", "Consumers"),
    ("webhooks", "Webhooks"),
)
#: The keys of screens in :data:`MORE_SCREENS` that have a key of their own.
MORE_KEYS: dict[str, str] = {"flow": "0", "health": "h"}


def screen_label(mode: str) -> str:
    """A screen's name as the tab bar, the help and the palette say it."""
    for tab, _, label in TABS:
        if tab == mode:
            return label
    return dict(MORE_SCREENS).get(mode, mode.capitalize())


@dataclass(frozen=True)
class Status:
    """What the header says about the console's link to the database."""

    target: str
    #: The schema the console works on (the end of ``target``): kept whole when the target
    #: gives way to a narrow terminal.
    schema: str | None = None
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


#: Fewer columns than this left beside the tabs: the title is left out (a filter stays in
#: its own line; a job's id in the screen's own header).
MIN_TITLE = 8


def rate_label(seconds: float) -> str:
    return f"{seconds:g}s"


class StatusBar(Static):
    """``forklift ● connected  host:5432/app  replica lag 0.4s  READ-ONLY  updated 2s ago
    every 2s``; a replica not used says so, and why in a word (``replica lagging: reading the
    primary``)."""

    def show(self, status: Status, now: datetime) -> None:
        head = Text()
        head.append(" forklift ", style="bold reverse")
        head.append(" ")
        head.append_text(connection_state(status.connection))
        head.append("  ")
        tail = Text()
        replica = _replica(self.app)
        if replica is not None:
            tail.append("  ")
            words = replica.header()
            # On a narrow terminal the short form, so the refresh's age still shows.
            if self.app.size.width - head.cell_len - len(words) < 45:
                words = replica.header(short=True)
            tail.append(words, style="" if replica.used else "bold reverse")
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
        elif self.app.screen_stack and isinstance(self.app.screen_stack[-1], ModalScreen):
            # The refresh holds still while a dialog is open (see Refresher.tick).
            tail.append("held: dialog open", style="dim")
        else:
            tail.append(f"every {rate_label(status.interval)}", style="dim")
        # The target gives way first when the terminal is narrow; its schema stays whole.
        room = self.app.size.width - head.cell_len - tail.cell_len
        target, schema = status.target, Text()
        if status.schema and target.endswith(f" · {status.schema}"):
            target = target[: -len(status.schema) - 3]
            schema = Text(" · ").append_text(ident(status.schema, limit=30))
        head.append_text(fit_location(target, max(8, min(room - schema.cell_len, 60))))
        head.append_text(schema)
        head.append_text(tail)
        self.update(head)


def fit_location(target: str, limit: int) -> Text:
    """``host:port/dbname`` in at most ``limit`` cells. The host gives way first, then the
    port (``db.exa…:5432/app``, ``db.exampl…/app``): the ellipsis stands in the middle and the
    database's name stays whole; only a name too long for any room is cut itself (in the
    middle too, so its end never reads as a shorter name)."""
    text = one_line(target).plain
    if len(text) <= limit:
        return Text(text)
    location, slash, name = text.rpartition("/")
    host, colon, port = location.rpartition(":")
    if not (colon and port.isdigit()):
        host, port = location, ""
    ends = [f":{port}/{name}", f"/{name}"] if port else [f"/{name}"]
    for end in ends:
        room = limit - len(end)
        if slash and host and room >= 4:
            return Text(host[: room - 1] + "…" + end)
    return Text(_middle(text, limit))


def _middle(text: str, width: int) -> str:
    """``text`` in ``width`` cells with an ellipsis in the middle: its start and its end show."""
    if len(text) <= width:
        return text
    if width <= 1:
        return "…"[:width]
    head = (width - 1) * 2 // 3 or 1
    tail = width - 1 - head
    return text[:head] + "…" + (text[-tail:] if tail else "")


def _replica(app: object) -> ReplicaStatus | None:
    """The replica's state as the app's backend last saw it (None without a replica). Read by
    shape: a widget sits beside the backend, not above it."""
    replica = getattr(getattr(app, "backend", None), "replica", None)
    return replica if isinstance(replica, ReplicaStatus) else None


class TabBar(Static):
    """Every screen: the numbered ones in three groups, then the others (``0 Flow``,
    ``h Health``, ``:retries`` ...); the current one is bracketed (not only coloured). What
    does not fit folds into ``+N :``, named in full by ``:`` and the help."""

    def show(self, current: str, title: str | None = None) -> None:
        width = self.app.size.width
        # Full labels when they fit; else short ones; else only the current screen is named.
        # The title (the filter, the job shown) takes the room the labels leave: it never
        # shortens them (a filter on Jobs once cut every label to six letters). The other
        # screens give way first, down to a count of those left out.
        wanted = len(title) + 2 if title else 0
        shorten = next((n for n in (0, 1) if self._line(current, n, 3).cell_len <= width), 2)
        line = self._line(current, shorten, 3)
        for more in (0, 1, 2, 3, 4):
            richer = self._line(current, shorten, more)
            if richer.cell_len + wanted <= width or (more == 4 and title):
                line = richer
                break
        room = width - line.cell_len - 2
        if title and room >= MIN_TITLE:
            line.append("› ", style="dim")
            line.append_text(one_line(title, limit=room))
        line.truncate(width, overflow="ellipsis")
        self.update(line)

    @staticmethod
    def _line(current: str, shorten: int, more: int) -> Text:
        # " 1 Overview 2 Queues [3 Jobs] 4 Dead letters │ 5 Workers ...": one space between
        # screens, a rule between groups, so the nine full labels and a bracketed screen
        # without a number key fit in 120 columns.
        items: list[Text] = []
        for mode, key, label in TABS:
            if mode in TAB_GROUPS:
                items.append(Text("│", style="dim"))
            word = label if shorten == 0 else label.split()[0][:6]
            if mode == current:
                items.append(Text(f"[{key} {label}]", style="bold reverse"))
            else:
                items.append(Text(key if shorten == 2 else f"{key} {word}", style="dim"))
        if more == 4 and current not in MORE_KEYS and current not in dict(MORE_SCREENS):
            # A long title (a filter) takes the room: the other screens stay in ":" and "?".
            return Text(" ").append_text(Text(" ").join(items)).append(" ")
        items.append(Text("│", style="dim"))
        left = 0
        for other, label in MORE_SCREENS:
            hot = MORE_KEYS.get(other)
            if other == current:
                items.append(Text(f"[{hot + ' ' + label if hot else ':' + other}]",
                                  style="bold reverse"))
            elif more == 0 or (more == 1 and hot):
                items.append(Text(f"{hot} {label.split()[0]}" if hot else f":{other}",
                                  style="dim"))
            elif more == 4:
                continue
            elif hot is None or more == 3:
                left += 1
            else:
                items.append(Text(hot, style="dim"))
        if left:
            items.append(Text(f"+{left} :", style="dim"))
        line = Text(" ").append_text(Text(" ").join(items))
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
