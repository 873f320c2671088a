"""`forklift dead groups|requeue|delete`: dead letters grouped on the server, acted on by group.

A group is every dead job with one kind, last error code and message shape; ``groups`` counts
all dead jobs (not a sample) and gives each group an id, which ``requeue`` and ``delete`` take.
Both are bulk actions like ``jobs retry|delete``: ``--dry-run`` counts and samples, a terminal
asks first (``--yes`` in scripts), at most ``--cap`` jobs a call in batches of 1,000, audited.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from forklift.cli.format import plural, stamp
from forklift.cli.jobs import bulk
from forklift.cli.kit import Call, command, ident, out, safe
from forklift.ops.limits import DEFAULT_CAP

if TYPE_CHECKING:
    from forklift.ops.dead import DeadGroups

dead_app = typer.Typer(
    help="Dead letters grouped by kind, error code and message shape; requeue or delete a group.",
    no_args_is_help=True,
)
GroupId = Annotated[str, typer.Argument(help="The group's id, as `forklift dead groups` shows it.")]
Cap = Annotated[int, typer.Option(min=1, max=1_000_000, help="Most jobs acted on per call.")]


@dead_app.command("groups")
@command()
def groups(
    cx: Call,
    queue: Annotated[str | None, typer.Option("--queue", "-q", help="Only this queue's.")] = None,
    kind: Annotated[str | None, typer.Option("--kind", "-k", help="Only this kind's.")] = None,
    limit: Annotated[int, typer.Option(min=1, max=1000, help="Groups to show.")] = 50,
) -> None:
    """Every dead job, grouped: count, when they died, the kind, code and message shape."""
    cx.show(cx.op.dead_groups(queue=queue, kind=kind, limit=limit), _print_groups)


def _print_groups(found: DeadGroups) -> None:
    if not found.groups:
        out.print("no dead jobs")
        return
    from rich.table import Table

    t = Table(box=None, header_style="bold", pad_edge=False)
    for col in ("group", "jobs", "1h", "24h", "last died", "kind", "code", "message shape"):
        t.add_column(col, justify="right" if col in ("jobs", "1h", "24h") else "left",
                     overflow="fold", no_wrap=col in ("group", "last died"))
    for g in found.groups:
        t.add_row(g.id, f"{g.count:,}", f"{g.last_hour:,}", f"{g.last_day:,}", stamp(g.last_at),
                  ident(g.kind), ident(g.code), safe(g.fingerprint))
    out.print(t)
    more = f"; {found.group_count - len(found.groups):,} more: --limit" if found.more else ""
    out.print(f"[dim]{plural(found.dead, 'dead job')} in {plural(found.group_count, 'group')}"
              f"{more}; act on one: forklift dead requeue GROUP --dry-run[/]")


def _group_action(action: str, doc: str) -> None:
    def body(cx: Call, group: GroupId, cap: Cap = DEFAULT_CAP) -> None:
        g = cx.op.dead_group(group)
        if not (cx.as_json or cx.dry_run):
            out.print(f"group {g.id}: {plural(g.count, 'dead job')} of kind {ident(g.kind)},"
                      f" code {ident(g.code)}: {safe(g.fingerprint)}")
        bulk(cx, action,
             lambda op, **kw: getattr(op, f"{action}_dead_group")(g.id, **kw), cap)

    body.__doc__ = doc
    body.__name__ = f"dead_{action}"
    dead_app.command(action)(command(acts=True, confirms=True)(body))


_group_action("requeue", "Requeue every job of a dead group (fresh attempts, history kept).")
_group_action("delete", "Delete every job of a dead group, for good.")
