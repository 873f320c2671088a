"""`forklift kinds versions`: live jobs by kind and payload version, through the operator API
(``op.stats.versions()``), so an operator sees when an old version has drained.

Registered by cli/main.py; shares options and errors with the other operator commands
(cli/kit.py): exit 0 done, 1 refused or failed, 2 usage error. A read: it changes nothing.
"""

from __future__ import annotations

from typing import Annotated

import typer

from forklift.cli.kit import Call, command, ident, out

kinds_app = typer.Typer(help="Kinds: their live jobs by payload version.", no_args_is_help=True)


@kinds_app.command("versions")
@command()
def kinds_versions(
    cx: Call,
    kind: Annotated[list[str] | None, typer.Option("--kind", "-k", help="Kind(s).")] = None,
) -> None:
    """Waiting, running and retrying jobs by queue, kind and payload version (1: a kind
    without versions). An old version whose jobs are gone has drained: its writers and the
    upcasters from it may be retired."""
    data = cx.op.stats.versions(kinds=kind or ())
    if cx.as_json:
        cx.show(data)
        return
    if not data.rows:
        out.print("no live jobs" + (" of these kinds" if kind else ""))
        return
    from rich.table import Table

    t = Table(box=None, header_style="bold", pad_edge=False)
    for col in ("queue", "kind", "version", "waiting", "running", "retrying"):
        t.add_column(col, justify="left" if col in ("queue", "kind") else "right")
    for r in data.rows:
        t.add_row(ident(r.queue), ident(r.kind), f"v{r.version}", f"{r.waiting:,}",
                  f"{r.running:,}", f"{r.retrying:,}")
    out.print(t)
    mixed = sorted({r.kind for r in data.rows if len(data.versions(r.kind)) > 1})
    for k in mixed:
        versions = data.versions(k)
        out.print(f"[dim]{ident(k)}: version {versions[0]} has not drained (live beside"
                  f" version {versions[-1]})[/]")
