"""`forklift workflows replay|pause|resume|pauses`: thin doors onto forklift.ops.replay and
forklift.ops.holds (a kind's pause: cli/kinds.py). Registered on the main command in cli/main.py.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated

import typer

from forklift.cli.format import stamp
from forklift.cli.kit import Call, command, ident, out, safe

if TYPE_CHECKING:
    from forklift.ops.holds import PauseResult
    from forklift.ops.replay import ReplayResult

workflows_app = typer.Typer(
    help="Durable workflows: replay a finished one from a step; pause and resume one.",
    no_args_is_help=True,
)
JobId = Annotated[int, typer.Argument(min=1, max=2**63 - 1, help="The workflow's job id.")]


def _names(names: list[str]) -> str:
    return ", ".join(ident(n) for n in names) or "none"


def _replay_line(dry_run: bool) -> Callable[[ReplayResult], str]:
    def line(r: ReplayResult) -> str:
        made = "a new job" if dry_run else f"job {r.new_job_id}"
        return (f"job {r.job_id} replayed from {ident(r.from_step)} as {made}: reuses"
                f" {_names(r.kept)}; runs again {_names(r.rerun)}")
    return line


@workflows_app.command("replay")
@command(acts=True)
def replay_cmd(
    cx: Call,
    job_id: JobId,
    from_step: Annotated[str, typer.Option(
        "--from-step", help="The step to run again, with every later one; the steps recorded"
        " before it keep their results.")],
) -> None:
    """Replay a completed or dead workflow from a named step, as a new job (the original stays
    as it was). --dry-run says which steps are kept and which run again."""
    result = cx.act(lambda op: op.workflows.replay(job_id, from_step=from_step,
                                                   reason=cx.reason))
    cx.done(result, _replay_line(cx.dry_run))


def pause_line(r: PauseResult) -> str:
    return r.text


@workflows_app.command("pause")
@command(acts=True)
def pause_cmd(cx: Call, job_id: JobId) -> None:
    """Pause one workflow: not started again until resumed; waiting, it is held at once;
    running, it parks at its next step boundary (the step in flight is kept)."""
    cx.done(cx.act(lambda op: op.workflows.pause(job_id, reason=cx.reason)), pause_line)


@workflows_app.command("resume")
@command(acts=True)
def resume_cmd(cx: Call, job_id: JobId) -> None:
    """Resume a paused workflow: claimable at once when its time has come."""
    cx.done(cx.act(lambda op: op.workflows.resume(job_id, reason=cx.reason)), pause_line)


@workflows_app.command("pauses")
@command()
def pauses_cmd(cx: Call) -> None:
    """The pauses in force: workflows' and kinds', with who paused them, why, and how many
    jobs each holds."""
    found = cx.op.workflows.pauses()
    if cx.as_json:
        cx.show([p.to_json() for p in found])
        return
    if not found:
        out.print("nothing is paused")
    for p in found:
        out.print(f"{safe(p.text)} [dim]since {stamp(p.paused_at)}[/]")
