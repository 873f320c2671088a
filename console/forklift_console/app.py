"""The operator console: a Textual app over the operator API.

Screens live in ``forklift_console.screens``; each fetches its own snapshot in a background
thread through :class:`~forklift_console.backend.Backend`, and sees the app only as a
:class:`~forklift_console.host.ConsoleHost`. The app owns what is shared: the refresh tick and
the connection status shown in every header (its :class:`~forklift_console.refresher.Refresher`),
the last CLI command, actions (confirm, run, report: its
:class:`~forklift_console.actions.Actions`), the keys, navigation and the command palette.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any, ClassVar

from textual import events
from textual.actions import parse as parse_action
from textual.app import App, SystemCommand
from textual.binding import Binding, BindingType
from textual.screen import Screen

from forklift.ops import JobFilter
from forklift_console.actions import Actions
from forklift_console.backend import Backend
from forklift_console.host import ConsoleHost, DemoControls
from forklift_console.plan import Plan
from forklift_console.refresher import Refresher
from forklift_console.screens.audit import AuditScreen
from forklift_console.screens.backfills import BackfillsScreen
from forklift_console.screens.base import READ_ONLY_WHY, WRITE_ACTIONS, ConsoleScreen
from forklift_console.screens.batches import BatchesScreen
from forklift_console.screens.charts import ChartsScreen
from forklift_console.screens.consumers import ConsumersScreen
from forklift_console.screens.dead import DeadScreen
from forklift_console.screens.flow import FlowScreen
from forklift_console.screens.health import HealthScreen
from forklift_console.screens.help import HelpScreen
from forklift_console.screens.job import JobScreen
from forklift_console.screens.jobs import JobsScreen
from forklift_console.screens.jump import JumpScreen
from forklift_console.screens.kinds import KindsScreen
from forklift_console.screens.modals import GotoScreen, PickScreen
from forklift_console.screens.overview import OverviewScreen
from forklift_console.screens.queues import QueuesScreen
from forklift_console.screens.schedules import SchedulesScreen
from forklift_console.screens.waiting import RetriesScreen, ScheduledScreen
from forklift_console.screens.webhooks import WebhooksScreen
from forklift_console.screens.workers import WorkersScreen
from forklift_console.screens.workflows import WorkflowsScreen
from forklift_console.widgets.clipboard import cli_line, copy_out
from forklift_console.widgets.header import MORE_KEYS, MORE_SCREENS, TABS, Status
from forklift_console.widgets.table import LiveTable
from forklift_console.widgets.text import use_colour

Clock = Callable[[], datetime]


def system_clock() -> datetime:
    return datetime.now(UTC)


class ConsoleApp(App[None]):
    CSS_PATH = str(Path(__file__).with_name("console.tcss"))
    TITLE = "forklift console"
    ENABLE_COMMAND_PALETTE = True
    # 80x24 terminals get the compact layout (no blank separators).
    VERTICAL_BREAKPOINTS = [(0, "-short"), (30, "-tall")]  # noqa: RUF012 - typed by Textual
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (100, "-wide")]  # noqa: RUF012 - typed by Textual

    BINDINGS: ClassVar[list[BindingType]] = [
        *(
            Binding(key, f"go('{mode}')", label, show=False)
            for mode, key, label in TABS
        ),
        Binding("0", "go('flow')", "Flow control", show=False),
        Binding(":", "goto", "Go to screen", show=False),
        Binding("J", "jump", "Jump to job id", show=False, key_display="J"),
        # priority: it must reach the app from inside a dialog, where the line is.
        Binding("ctrl+y", "copy_cli", "Copy the CLI line", show=False, key_display="^y",
                priority=True),
        Binding("question_mark", "help", "Help", key_display="?"),
        Binding("f", "freeze", "Freeze", show=False),
        Binding("plus,equals_sign", "faster", "Faster refresh", show=False, key_display="+"),
        Binding("minus", "slower", "Slower refresh", show=False, key_display="-"),
        Binding("h", "go('health')", "Health", show=False),
        Binding("q", "quit", "Quit"),
    ]

    def __init__(
        self,
        backend: Backend,
        *,
        clock: Clock | None = None,
        interval: float = 2.0,
        demo: DemoControls | None = None,
        start: str = "overview",
    ) -> None:
        super().__init__()
        use_colour(not self.no_color)
        self.backend = backend
        self.clock: Clock = clock or system_clock
        self.demo = demo
        self.start = start
        self.last_command: str | None = None
        self.refresher = Refresher(
            self,
            Status(target=backend.target, schema=backend.operator.schema,
                   read_only=backend.read_only, interval=interval),
            now=self.now,
            screens=self._every_screen,
        )
        self.actions = Actions(self, backend, ran=self._ran, repaint=self.refresher.repaint)
        self.views: dict[str, ConsoleScreen[Any]] = {
            "overview": OverviewScreen(),
            "queues": QueuesScreen(),
            "jobs": JobsScreen(),
            "dead": DeadScreen(),
            "workers": WorkersScreen(),
            "audit": AuditScreen(),
            "batches": BatchesScreen(),
            "schedules": SchedulesScreen(),
            "backfills": BackfillsScreen(),
            "flow": FlowScreen(),
            "health": HealthScreen(),
            "workflows": WorkflowsScreen(),  # no tab: the command palette's "Go to Workflows"
            "retries": RetriesScreen(),
            "scheduled": ScheduledScreen(),
            "kinds": KindsScreen(),
            "charts": ChartsScreen(),
            "consumers": ConsumersScreen(),
            "webhooks": WebhooksScreen(),
        }
        for mode, view in self.views.items():
            self.add_mode(mode, lambda view=view: view)  # type: ignore[misc]

    # -- clock and status -----------------------------------------------------------------------
    @property
    def read_only(self) -> bool:
        return self.backend.read_only

    @property
    def status(self) -> Status:
        return self.refresher.status

    def now(self) -> datetime:
        return self.clock()

    def on_mount(self) -> None:
        self.refresher.start()
        self.switch_mode(self.start)

    def _every_screen(self) -> Iterable[Screen[Any]]:
        for stack in self._screen_stacks.values():
            yield from stack

    def fetch_ok(self) -> None:
        self.refresher.fetch_ok()

    def fetch_failed(self, exc: BaseException) -> None:
        self.refresher.fetch_failed(exc)

    def action_freeze(self) -> None:
        self.refresher.freeze()

    def action_faster(self) -> None:
        self.refresher.step_rate(-1)

    def action_slower(self) -> None:
        self.refresher.step_rate(+1)

    # -- actions --------------------------------------------------------------------------------
    def propose(self, plan: Plan, after: Callable[[], None] | None = None) -> None:
        self.actions.propose(plan, after)

    def propose_bulk(
        self, action: str, flt: JobFilter, described: str, after: Callable[[], None] | None = None
    ) -> None:
        self.actions.propose_bulk(action, flt, described, after)

    def propose_checked(
        self,
        verb: str,
        check: Callable[[Any], Any],
        plan_of: Callable[[Any], Plan | str],
        after: Callable[[], None] | None = None,
    ) -> None:
        self.actions.propose_checked(verb, check, plan_of, after)

    def _ran(self, command: str) -> None:
        """An action was done: the command echo shows its CLI equivalent."""
        self.last_command = command

    def action_copy_cli(self) -> None:
        """ctrl+y: the CLI line of the dialog open now (every dialog shows one), else of the
        last action done (the command echo), for a runbook or a terminal."""
        line = cli_line(self.screen)
        what = "the dialog's CLI line"
        if line is None and self.last_command:
            line, what = self.last_command, "the last action's CLI line"
        if line is None:
            self.notify("no CLI line to copy: open an action's dialog first", title="Copy CLI",
                        severity="warning")
            return
        copy_out(self, line, what, title="Copy CLI")

    def on_unmount(self) -> None:
        self.backend.close()

    # -- disabled keys ------------------------------------------------------------------------
    def on_key(self, event: events.Key) -> None:
        """A key whose action is disabled says why, before Textual drops it silently.
        (This runs before the app's own key handling, which is where bindings are looked up.)"""
        active = self.screen.active_bindings.get(event.key)
        if active is None or active.enabled:
            return
        binding = active.binding
        _, name, params = parse_action(binding.action)
        where = active.node
        why = where.why_not(name, params) if isinstance(where, ConsoleScreen) else None
        key = binding.key_display or self.get_key_display(binding)
        self.notify(
            f"{key} ({binding.description or name}) is not available: "
            f"{why or 'it does not apply here'}",
            title="not available",
            severity="warning",
        )

    # -- navigation ---------------------------------------------------------------------------
    def action_go(self, mode: str) -> None:
        if mode in self.views and self.current_mode != mode:
            self.views[mode].arriving = True
            self.switch_mode(mode)

    def action_goto(self) -> None:
        def chosen(target: str | None) -> None:
            if target == "quit":
                self.exit()
            elif target == "help":
                self.action_help()
            elif target and (target == "job" or target.startswith("job ")):
                self.action_jump(target.removeprefix("job").strip())
            elif target:
                self.action_go(target)

        self.push_screen(GotoScreen(), chosen)

    def action_jump(self, initial: str = "") -> None:
        """J or ``:job 123``: the job with that id, from any screen."""

        def chosen(job_id: int | None) -> None:
            if job_id is not None:
                self.push_screen(JobScreen(job_id))

        self.push_screen(JumpScreen(initial), chosen)

    def action_help(self) -> None:
        if isinstance(self.screen, HelpScreen):
            self.pop_screen()
            return
        self.push_screen(HelpScreen(self.screen, read_only=self.read_only))

    def show_jobs(self, text: str, *, came_from: str | None = None) -> None:
        """Drill down: the jobs screen, filtered (``queue:mail``, ``state:dead kind:x``);
        esc there comes back here."""
        jobs = self.views["jobs"]
        assert isinstance(jobs, JobsScreen)
        origin = came_from or self.current_mode
        if jobs.set_filter_text(text, came_from=origin if origin != "jobs" else None):
            self.action_go("jobs")
            # A job's detail left open on the jobs screen is not what this asked for.
            while len(self.screen_stack) > 1 and self.screen is not jobs:
                self.pop_screen()

    def show_queue(self, name: str) -> None:
        """The Queues screen with the cursor on ``name`` (an alert about that queue)."""
        queues = self.views["queues"]
        assert isinstance(queues, QueuesScreen)
        queues.show_queue(name)
        self.action_go("queues")
        while len(self.screen_stack) > 1 and self.screen is not queues:
            self.pop_screen()

    # -- screenshots --------------------------------------------------------------------------
    def action_screenshot(self, filename: str | None = None, path: str | None = None) -> None:
        """Save an SVG of the screen and say where (Textual's own action fails without a word
        when ~/Downloads is missing): FORKLIFT_SCREENSHOT_DIR, else Downloads if it exists,
        else the current directory."""
        import os

        from platformdirs import user_downloads_path

        where = path or os.environ.get("FORKLIFT_SCREENSHOT_DIR")
        if not where:
            downloads = user_downloads_path()
            where = str(downloads) if downloads.is_dir() else os.getcwd()
        try:
            saved = self.save_screenshot(filename, where)
        except OSError as exc:
            self.notify(f"screenshot not saved in {where}: {exc.strerror or exc}",
                        title="Screenshot", severity="error")
            return
        self.notify(f"screenshot saved: {saved}", title="Screenshot")

    # -- command palette ----------------------------------------------------------------------
    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        for mode, key, label in TABS:
            yield SystemCommand(
                f"Go to {label}", f"Show the {label.lower()} screen (key {key})",
                partial(self.action_go, mode),
            )
        for mode, label in MORE_SCREENS:
            if mode in self.views:
                keys = f"key {MORE_KEYS[mode]} or :{mode}" if mode in MORE_KEYS else f":{mode}"
                yield SystemCommand(
                    f"Go to {label}", f"Show the {label.lower()} screen ({keys})",
                    partial(self.action_go, mode),
                )
        yield from self._sort_commands(screen)
        yield SystemCommand("Jump to job id", "Open one job by its id (J, or :job 1234)",
                            self.action_jump)
        yield SystemCommand("Copy the CLI line", "Of the dialog open, else of the last action"
                            " (ctrl+y): to the clipboard, or a file", self.action_copy_cli)
        yield SystemCommand("Help", "Keys of this screen and the glyph legend (?)", self.action_help)
        yield SystemCommand(
            "Freeze refresh" if not self.status.frozen else "Resume refresh",
            "Hold the picture still while you read it (f)",
            self.action_freeze,
        )
        yield SystemCommand("Refresh faster", "Shorter refresh interval (+)", self.action_faster)
        yield SystemCommand("Refresh slower", "Longer refresh interval (-)", self.action_slower)
        for mode, view in self.views.items():
            for title, help_text, action in view.palette():
                yield SystemCommand(
                    title,
                    help_text,
                    partial(self._palette_action, mode, view, action, title),
                )
        # Textual's own "Keys" panel lists its internals ("Focus Next", "c,super+^c"): the
        # console's help (?) takes its place.
        for command in super().get_system_commands(screen):
            if command.title != "Keys":
                yield command

    def _sort_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        """Sort this screen's list by any of its columns (what s and S step through)."""
        tables = [t for t in screen.query(LiveTable) if t.display][:1]
        for table in tables:
            if table.sortable():
                yield SystemCommand("Sort by… (pick a column and direction)",
                                    "Choose the sort from a list (o)", table.action_sort_pick)
            for col in table.sortable():
                label = col.label.strip() or col.key
                for descending in (False, True):
                    glyph = "▼" if descending else "▲"
                    yield SystemCommand(
                        f"Sort by {label} {glyph}",
                        f"{'Descending' if descending else 'Ascending'} (s: next column,"
                        " S: reverse)",
                        partial(table.set_sort, col.key, descending),
                    )

    def _palette_action(
        self, mode: str, view: ConsoleScreen[Any], action: str, title: str = ""
    ) -> None:
        """Run a screen's action from the palette. One that acts on a row asks which row
        first (the palette opened elsewhere must not act on whatever row that screen
        happened to have highlighted)."""
        _, name, _ = parse_action(action)
        if name in WRITE_ACTIONS and self.read_only:
            self.notify(f"{title}: {READ_ONLY_WHY}", title="not available", severity="warning")
            return
        if self.current_mode != mode:
            self.switch_mode(mode)
        if name in view.ROW_ACTIONS:
            view.when_loaded(lambda: self._pick_target(view, action, title))
        else:
            self.call_after_refresh(self.run_action, action, view)

    def _pick_target(self, view: ConsoleScreen[Any], action: str, title: str) -> None:
        choices = view.palette_targets(action)
        if not choices:
            self.notify("nothing on this screen to act on", title=title, severity="warning")
            return

        def picked(key: str | None) -> None:
            if key is not None:
                view.act_on(action, key)

        self.push_screen(
            PickScreen(f"{title}: which one?", choices, current=view.palette_current()), picked
        )


#: The app is what its screens take it for: mypy checks this assignment against the protocol.
_HOST: type[ConsoleHost] = ConsoleApp
