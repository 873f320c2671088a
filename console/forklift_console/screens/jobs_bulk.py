"""The jobs screen's actions in words: the CLI line that does the same, and the report after."""

from __future__ import annotations

from dataclasses import replace

from forklift.ops import BulkReport, JobFilter
from forklift.ops.runbook import cli, filter_flags
from forklift_console.screens.job import CLI_VERBS, VERBS
from forklift_console.widgets.text import plural


def bulk_cli(action: str, flt: JobFilter) -> str:
    if flt.dead_group is not None:
        # A dead-letter group (group:ID, from Dead letters) is acted on by `forklift dead`.
        if replace(flt, states=(), dead_group=None).is_empty() and action != "cancel":
            return cli("dead", "requeue" if action == "requeue" else "delete", flt.dead_group,
                       "--yes")
        return "(none: the jobs commands cannot narrow a dead-letter group further)"
    return cli("jobs", CLI_VERBS[action], *filter_flags(flt), "--yes")


def ids_cli(action: str, ids: list[int]) -> str:
    return cli("jobs", CLI_VERBS[action], *ids, "--yes")


def bulk_report(report: BulkReport) -> str:
    verb = VERBS[report.action].lower().rstrip("e") + "ed"
    text = f"{verb} {plural(report.done, 'job')}"
    if report.skipped:
        text += f"; {report.skipped:,} skipped (changed meanwhile)"
    if report.more:
        text += f"; more than {report.cap:,} matched: run it again for the rest"
    return text


def marked_report(report: BulkReport, marked: int) -> str:
    text = bulk_report(report)
    left = marked - report.matched
    if left > 0:
        text += f"; {plural(left, 'marked job')} not in a state this applies to"
    return text
