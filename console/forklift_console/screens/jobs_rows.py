"""What the jobs screen shows of its page: a job's cells, the line under the table for the
highlighted job, and the count reconciled with the rows shown."""

from __future__ import annotations

from datetime import datetime

from rich.text import Text

from forklift.ops import JobPage, JobSummary
from forklift_console.screens.workflows import parked_state, parked_words
from forklift_console.widgets.text import age, ident, job_state, one_line


def job_cells(j: JobSummary, now: datetime, *, wide: bool) -> list[Text | str]:
    """``wide``: with the queue and attempt columns (at 80 columns they give way)."""
    if j.last_error_code:
        info = Text().append(f"{j.last_error_code}: ", style="bold")
        info.append_text(one_line(j.last_error_message or "", limit=120))
    elif j.parked is not None:
        info = parked_words(j.parked, now)
    else:
        info = one_line(j.args_preview, limit=120)
    when = j.finished_at or j.attempted_at or j.created_at
    return [
        str(j.id),
        job_state(j.state) if j.parked is None else parked_state(j.parked),
        *([ident(j.queue, limit=8)] if wide else []),
        ident(j.kind, limit=12),
        *([f"{j.attempt}/{j.max_attempts}"] if wide else []),
        age(when, now),
        info,
    ]


def current_line(job: JobSummary | None, width: int) -> Text:
    """The highlighted job on one line: what the columns cut or leave out."""
    text = Text()
    if job is not None:
        text.append(f"job {job.id} ", style="bold")
        text.append_text(job_state(job.state))
        text.append(" · queue ")
        text.append_text(ident(job.queue, limit=40))
        text.append(" · ")
        text.append_text(ident(job.kind, limit=40))
        text.append(f" · attempt {job.attempt}/{job.max_attempts}")
        if job.last_error_code:
            text.append(" · ")
            text.append(f"{job.last_error_code}: ", style="bold")
            text.append_text(one_line(job.last_error_message or "", limit=300))
        text.truncate(max(10, width - 2), overflow="ellipsis")
    return text


def reconciled_total(page: JobPage, first: int, count: tuple[int, bool] | None
                     ) -> tuple[int, bool]:
    """The count reconciled with the rows shown (never "jobs 1-11 of 2"): the last page
    gives the exact number; with more pages there are more than the rows so far. A count
    that says otherwise is out of date. ``first``: the rows before this page; ``count``: the
    last (count, capped) read, else the page's own."""
    seen = first + len(page.jobs)
    total, capped = count or (page.count, page.count_capped)
    if page.next_cursor is None:
        return (seen, False) if first == 0 or total < seen or capped else (total, False)
    if not capped and total <= seen:
        return seen, True
    return total, capped
