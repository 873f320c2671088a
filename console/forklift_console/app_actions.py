"""The console's actions: a plan confirmed with the operator (after a dry run for a bulk action
or a check first), run in a worker thread, then reported; a refusal or an outage is said, never
fatal.

A mixin of :class:`forklift_console.app.ConsoleApp`."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from textual import work

from forklift import ForkliftError
from forklift.ops import BulkReport, JobFilter
from forklift_console.backend import CONNECTION_ERRORS, Backend
from forklift_console.screens.base import ConsoleScreen
from forklift_console.screens.job import VERBS
from forklift_console.screens.jobs import bulk_cli, bulk_report
from forklift_console.screens.modals import ConfirmScreen, Plan

if TYPE_CHECKING:
    from textual.app import App

    #: The console app's mixins are Apps to the type checker, plain classes at run time (so
    #: Textual sees one App class); each declares what it uses of the app's own attributes.
    AppMixin = App[None]
else:
    AppMixin = object

log = logging.getLogger("forklift_console")


def describe_error(exc: BaseException) -> str:
    if isinstance(exc, ForkliftError):
        return exc.message
    text = str(exc).strip().splitlines()
    first = text[0] if text else ""
    if isinstance(exc, CONNECTION_ERRORS):
        return f"database unreachable: {first or type(exc).__name__}"
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


class ConsoleActions(AppMixin):
    if TYPE_CHECKING:
        backend: Backend
        last_command: str | None

        def _repaint(self) -> None: ...

    def propose(self, plan: Plan, after: Callable[[], None] | None = None) -> None:
        """Confirm a plan with the operator, then run it. Non-destructive plans run at once."""

        def decided(yes: bool | None) -> None:
            if yes:
                self.perform(plan, after)

        if plan.destructive or plan.typed:
            self.push_screen(ConfirmScreen(plan), decided)
        else:
            self.perform(plan, after)

    def propose_bulk(
        self, action: str, flt: JobFilter, described: str, after: Callable[[], None] | None = None
    ) -> None:
        """All jobs matching a filter: a dry run names the count and sample ids (from the same
        query the action runs), then the operator types the count to confirm."""
        self._dry_run(action, flt, described, after)

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
        self._check_first(verb, check, plan_of, after)

    @work(thread=True, exit_on_error=False, group="action")
    def _check_first(
        self,
        verb: str,
        check: Callable[[Any], Any],
        plan_of: Callable[[Any], Plan | str],
        after: Callable[[], None] | None,
    ) -> None:
        try:
            answer = self.backend.call(check)
        except Exception as exc:
            self.call_from_thread(self._action_failed, verb, exc)
            return
        self.call_from_thread(self._checked, verb, plan_of, answer, after)

    def _checked(
        self,
        verb: str,
        plan_of: Callable[[Any], Plan | str],
        answer: Any,
        after: Callable[[], None] | None,
    ) -> None:
        plan = plan_of(answer)
        if isinstance(plan, str):
            self.notify(plan, title=verb)
        else:
            self.propose(plan, after)

    @work(thread=True, exit_on_error=False, group="action")
    def _dry_run(
        self, action: str, flt: JobFilter, described: str, after: Callable[[], None] | None
    ) -> None:
        try:
            report = self.backend.call(lambda op: op.bulk(action, flt, dry_run=True))
        except Exception as exc:
            self.call_from_thread(self._action_failed, VERBS[action], exc)
            return
        self.call_from_thread(self._confirm_bulk, action, flt, described, report, after)

    def _confirm_bulk(
        self,
        action: str,
        flt: JobFilter,
        described: str,
        report: BulkReport,
        after: Callable[[], None] | None,
    ) -> None:
        if not report.matched:
            self.notify(f"no job matching {described or 'the filter'} can be {action}d",
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

    @work(thread=True, exit_on_error=False, group="action")
    def perform(self, plan: Plan, after: Callable[[], None] | None = None) -> None:
        try:
            result = self.backend.call(plan.run)
        except Exception as exc:  # refusals and outages are reported, never fatal
            self.call_from_thread(self._action_failed, plan.verb, exc)
            return
        self.call_from_thread(self._action_done, plan, result, after)

    def _action_done(self, plan: Plan, result: Any, after: Callable[[], None] | None) -> None:
        self.last_command = plan.cli_of(result) if plan.cli_of is not None else plan.cli
        message = plan.report(result) if plan.report else f"{plan.verb}: done"
        self.notify(message, title=plan.verb)
        if after is not None:
            after()
        self._repaint()
        screen = self.screen
        if isinstance(screen, ConsoleScreen):
            screen.reload()

    def _action_failed(self, verb: str, exc: BaseException) -> None:
        if not isinstance(exc, ForkliftError):
            log.warning("%s failed", verb, exc_info=exc)
        self.notify(describe_error(exc), title=f"{verb} refused", severity="error")
