"""The console's actions: a plan confirmed with the operator (after a dry run for a bulk action
or a check first), run in a worker thread, then reported; a refusal or an outage is said, never
fatal. The app owns one :class:`Actions` and hands screens' proposals to it."""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial
from typing import Any

from textual.app import App

from forklift import ForkliftError
from forklift.ops import BulkReport, JobFilter
from forklift_console.backend import Backend, describe_error
from forklift_console.plan import Plan
from forklift_console.screens.base import ConsoleScreen
from forklift_console.screens.job import VERBS
from forklift_console.screens.jobs import bulk_cli, bulk_report
from forklift_console.screens.modals import ConfirmScreen
from forklift_console.widgets.text import one_line

log = logging.getLogger("forklift_console")


class Actions:
    """Runs plans for the app: dialogs and notifications through ``app``, the operator API
    through ``backend`` (in the app's worker threads, group ``action``). ``ran`` hears the CLI
    command of each action done, before it is reported; ``repaint`` redraws the chrome after."""

    def __init__(
        self,
        app: App[Any],
        backend: Backend,
        *,
        ran: Callable[[str], None],
        repaint: Callable[[], None],
    ) -> None:
        self._app = app
        self._backend = backend
        self._ran = ran
        self._repaint = repaint

    def propose(self, plan: Plan, after: Callable[[], None] | None = None) -> None:
        """Confirm a plan with the operator, then run it. Non-destructive plans run at once."""

        def decided(yes: bool | None) -> None:
            if yes:
                self.perform(plan, after)

        if plan.destructive or plan.typed:
            self._app.push_screen(ConfirmScreen(plan), decided)
        else:
            self.perform(plan, after)

    def propose_bulk(
        self, action: str, flt: JobFilter, described: str, after: Callable[[], None] | None = None
    ) -> None:
        """All jobs matching a filter: a dry run names the count and sample ids (from the same
        query the action runs), then the operator types the count to confirm."""
        self._in_thread(partial(self._dry_run, action, flt, described, after))

    def propose_checked(
        self,
        verb: str,
        check: Callable[[Any], Any],
        plan_of: Callable[[Any], Plan | str],
        after: Callable[[], None] | None = None,
    ) -> None:
        """Ask the operator API first (a dry run, in a worker thread), then confirm the plan
        built from its answer; ``plan_of`` returns a sentence instead when there is nothing
        to do."""
        self._in_thread(partial(self._check_first, verb, check, plan_of, after))

    def perform(self, plan: Plan, after: Callable[[], None] | None = None) -> None:
        """Run a plan (already confirmed) in a worker thread, then report it."""
        self._in_thread(partial(self._perform, plan, after))

    # -- in a worker thread ---------------------------------------------------------------------
    def _in_thread(self, work: Callable[[], None]) -> None:
        self._app.run_worker(work, thread=True, exit_on_error=False, group="action")

    def _check_first(
        self,
        verb: str,
        check: Callable[[Any], Any],
        plan_of: Callable[[Any], Plan | str],
        after: Callable[[], None] | None,
    ) -> None:
        try:
            answer = self._backend.call(check)
        except Exception as exc:
            self._app.call_from_thread(self._failed, verb, exc)
            return
        self._app.call_from_thread(self._checked, verb, plan_of, answer, after)

    def _dry_run(
        self, action: str, flt: JobFilter, described: str, after: Callable[[], None] | None
    ) -> None:
        try:
            report = self._backend.call(lambda op: op.bulk(action, flt, dry_run=True))
        except Exception as exc:
            self._app.call_from_thread(self._failed, VERBS[action], exc)
            return
        self._app.call_from_thread(self._confirm_bulk, action, flt, described, report, after)

    def _perform(self, plan: Plan, after: Callable[[], None] | None) -> None:
        try:
            result = self._backend.call(plan.run)
        except Exception as exc:  # refusals and outages are reported, never fatal
            self._app.call_from_thread(self._failed, plan.verb, exc)
            return
        self._app.call_from_thread(self._done, plan, result, after)

    # -- back on the UI thread ------------------------------------------------------------------
    def _checked(
        self,
        verb: str,
        plan_of: Callable[[Any], Plan | str],
        answer: Any,
        after: Callable[[], None] | None,
    ) -> None:
        plan = plan_of(answer)
        if isinstance(plan, str):
            self._app.notify(plan, title=verb)
        else:
            self.propose(plan, after)

    def _confirm_bulk(
        self,
        action: str,
        flt: JobFilter,
        described: str,
        report: BulkReport,
        after: Callable[[], None] | None,
    ) -> None:
        if not report.matched:
            self._app.notify(f"no job matching {described or 'the filter'} can be {action}d",
                             title=VERBS[action])
            return
        scope = described or "every job"
        if report.more:
            scope += f" (the first {report.cap:,}; run it again for the rest)"
        self.propose(
            Plan(
                verb=VERBS[action],
                noun="job",
                count=report.matched,
                ids=tuple(report.sample_ids),
                scope=scope,
                cli=bulk_cli(action, flt),
                run=lambda op: op.bulk(action, flt, cap=report.cap),
                report=bulk_report,
            ),
            after,
        )

    def _done(self, plan: Plan, result: Any, after: Callable[[], None] | None) -> None:
        self._ran(plan.cli_of(result) if plan.cli_of is not None else plan.cli)
        message = plan.report(result) if plan.report else f"{plan.verb}: done"
        self._app.notify(message, title=plan.verb)
        if after is not None:
            after()
        self._repaint()
        screen = self._app.screen
        if isinstance(screen, ConsoleScreen):
            screen.reload()

    def _failed(self, verb: str, exc: BaseException) -> None:
        if not isinstance(exc, ForkliftError):
            log.warning("%s failed", verb, exc_info=exc)
        # A refusal may quote what was typed: the toast keeps to a few lines.
        self._app.notify(str(one_line(describe_error(exc), limit=300)), title=f"{verb} refused",
                         severity="error")
