"""Jump to a job by its id from any screen (``J``, or ``:job 123``), as k9s jumps to a resource.

The id is checked twice before the job screen opens: as typed (a whole number within a job id's
range) and against the database (the job exists). Either refusal is written beside the field and
the dialog stays open, so a typo is fixed in place instead of landing on an empty job screen.
"""

from __future__ import annotations

from typing import ClassVar, cast

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label, Static

from forklift import JobNotFound
from forklift.ops import Operator
from forklift_console.backend import describe_error
from forklift_console.host import ConsoleHost
from forklift_console.widgets.text import plain

#: The largest job id (ids are PostgreSQL bigints).
MAX_ID = 2**63 - 1


class JobIdError(ValueError):
    """The text is not a job id; the message says what is wrong with it."""


def parse_job_id(text: str) -> int:
    """``123`` or ``#123`` (as lists and logs print ids) to a job id."""
    value = text.strip().removeprefix("#").replace(",", "").replace("_", "")
    if not value:
        raise JobIdError("type a job id, e.g. 1234")
    if not value.isdigit() or not value.isascii():
        raise JobIdError(f"{text.strip()!r} is not a job id: a job id is a whole number, e.g. 1234")
    job_id = int(value)
    if not 1 <= job_id <= MAX_ID:
        raise JobIdError(f"{value} is out of range for a job id (1 to {MAX_ID:,})")
    return job_id


class JumpScreen(ModalScreen[int | None]):
    """Asks for a job id; dismisses with the id once the job is known to exist."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]
    AUTO_FOCUS = "#job-id"

    def __init__(self, initial: str = "") -> None:
        super().__init__(classes="dialog")
        self.initial = initial
        #: The last refusal shown beside the field (None: nothing refused).
        self.refused: str | None = None

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label(Text("Jump to a job", style="bold"), id="title")
            yield Input(value=self.initial, placeholder="job id, e.g. 1234", id="job-id",
                        compact=True)
            yield Static(Text("enter: open the job · esc: cancel", style="dim"), id="why")

    def on_mount(self) -> None:
        if self.initial:  # `:job 123`: go straight on, or say what is wrong
            self._check(self.initial)

    @on(Input.Submitted, "#job-id")
    def _submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self._check(event.value)

    def _check(self, text: str) -> None:
        try:
            job_id = parse_job_id(text)
        except JobIdError as exc:
            self._refuse(str(exc))
            return
        self.query_one("#why", Static).update(Text(f"looking for job {job_id}…", style="dim"))
        self.run_worker(lambda: self._look_up(job_id), thread=True, exclusive=True,
                        group="jump", exit_on_error=False)

    def _look_up(self, job_id: int) -> None:
        host = cast("ConsoleHost", self.app)

        def exists(op: Operator) -> bool:
            try:
                op.jobs.show(job_id)
            except JobNotFound:
                return False
            return True

        try:
            found: bool | None = host.backend.call(exists, deadline=host.backend.fetch_deadline)
            error = None
        except Exception as exc:  # the database is away: say so, keep the dialog
            found, error = None, describe_error(exc)
        self.app.call_from_thread(self._looked_up, job_id, found, error)

    def _looked_up(self, job_id: int, found: bool | None, error: str | None) -> None:
        if found:
            self.dismiss(job_id)
        elif error is not None:
            self._refuse(f"could not look job {job_id} up: {error}")
        else:
            self._refuse(f"no job {job_id}: it never existed, or it was deleted or pruned")

    def _refuse(self, why: str) -> None:
        self.refused = why
        line = Text("✖ ", style="bold").append_text(plain(why))
        self.query_one("#why", Static).update(line)

    @on(Input.Changed, "#job-id")
    def _changed(self) -> None:
        if self.refused is not None:
            self.refused = None
            self.query_one("#why", Static).update(
                Text("enter: open the job · esc: cancel", style="dim"))

    def action_cancel(self) -> None:
        self.dismiss(None)
