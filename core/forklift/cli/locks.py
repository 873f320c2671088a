"""`forklift locks list`: locks with fencing tokens, their holders and expiries.

Registered by cli/main.py; shares options and errors with the other operator commands
(cli/kit.py): exit 0 done, 1 refused or failed, 2 usage error.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from forklift.cli.format import seconds
from forklift.cli.kit import Call, command, ident, out

if TYPE_CHECKING:
    from forklift.ops.locks import LockInfo

locks_app = typer.Typer(help="Locks with fencing tokens: who holds which key.",
                        no_args_is_help=True)


def _holder(x: LockInfo) -> str:
    if x.job_id is not None:
        return f"job {x.job_id} on {ident(x.worker_id or x.owner)}"
    return f"process {ident(x.owner)}"


@locks_app.command("list")
@command()
def locks_list(
    cx: Call,
    prefix: Annotated[
        str | None, typer.Option("--prefix", help="Only keys that start with this.")
    ] = None,
    limit: Annotated[int, typer.Option(min=1, max=1000, help="Most locks shown.")] = 500,
) -> None:
    """Every lock in key order: token, holder (job and worker, or process), expiry.

    An expired lock is free: the next request takes it under a new token.
    """
    rows = cx.op.locks(prefix=prefix, limit=limit)
    if cx.as_json:
        cx.show([r.to_json() for r in rows])
        return
    if not rows:
        out.print("no locks held")
        return
    from rich.table import Table

    t = Table(box=None, header_style="bold", pad_edge=False)
    for col in ("key", "token", "holder", "held for", "expires", "ttl"):
        t.add_column(col, overflow="fold")
    for x in rows:
        expires = (f"in {seconds(x.expires_in_seconds)}" if x.live
                   else f"[dim]expired {seconds(-x.expires_in_seconds)} ago (free)[/]")
        t.add_row(ident(x.key), str(x.token), _holder(x), seconds(x.held_seconds), expires,
                  seconds(x.ttl_seconds))
    out.print(t)
