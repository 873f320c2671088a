"""`forklift workflows replay|pause|resume` and `forklift kinds pause|resume`: thin doors onto
forklift.ops.replay and forklift.ops.holds. Registered on the main command in cli/main.py.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated

import typer

from forklift.cli.kit import Call, command, ident

if TYPE_CHECKING:
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
