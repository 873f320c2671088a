"""`forklift locks list`: locks with fencing tokens, their holders and expiries.

Registered by console/cli.py; shares options and errors with the other operator commands
(console/opskit.py): exit 0 done, 1 refused or failed, 2 usage error.
"""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from forklift.ops.locks import LockInfo
from forklift_console.opskit import (
    Dsn,
    Json,
    ReadOnlyOpt,
    Schema,
    emit_json,
    handled,
    operator,
    out,
    safe,
    seconds,
)

locks_app = typer.Typer(help="Locks with fencing tokens: who holds which key.",
                        no_args_is_help=True)


def _holder(x: LockInfo) -> str:
    if x.job_id is not None:
        return f"job {x.job_id} on {safe(x.worker_id or x.owner)}"
    return f"process {safe(x.owner)}"


@locks_app.command("list")
def locks_list(
    prefix: Annotated[
        str | None, typer.Option("--prefix", help="Only keys that start with this.")
    ] = None,
    limit: Annotated[int, typer.Option(min=1, max=1000, help="Most locks shown.")] = 500,
    read_only: ReadOnlyOpt = False,
    dsn: Dsn = None,
    schema: Schema = None,
    as_json: Json = False,
) -> None:
    """Every lock in key order: token, holder (job and worker, or process), expiry.

    An expired lock is free: the next request takes it under a new token.
    """
    with handled(as_json), operator(dsn, schema, None, read_only) as op:
        rows = op.locks(prefix=prefix, limit=limit)
    if as_json:
        emit_json([r.to_json() for r in rows])
        return
    if not rows:
        out.print("no locks held")
        return
    t = Table(box=None, header_style="bold", pad_edge=False)
    for col in ("key", "token", "holder", "held for", "expires", "ttl"):
        t.add_column(col, overflow="fold")
    for x in rows:
        expires = (f"in {seconds(x.expires_in_seconds)}" if x.live
                   else f"[dim]expired {seconds(-x.expires_in_seconds)} ago (free)[/]")
        t.add_row(safe(x.key), str(x.token), _holder(x), seconds(x.held_seconds), expires,
                  seconds(x.ttl_seconds))
    out.print(t)
