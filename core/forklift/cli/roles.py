"""`forklift roles create [--prefix app] [--print]`: least-privilege roles for forklift.

Three login roles: ``<prefix>_worker`` (runs jobs), ``<prefix>_operator`` (the CLI's and the
console's actions) and ``<prefix>_console`` (reads only: the console and CLI then disable every
action and say so). Safe to run again; run it after each `forklift migrate`.
"""

from __future__ import annotations

from typing import Annotated

import typer

from forklift.cli.kit import Call, command, ident, out, safe

roles_app = typer.Typer(help="Least-privilege database roles: worker, operator, read-only console.",
                        no_args_is_help=True)


@roles_app.command("create")
@command()
def create_cmd(
    cx: Call,
    prefix: Annotated[str, typer.Option("--prefix", help="Role names: PREFIX_worker, ...")] = (
        "forklift"),
    print_only: Annotated[
        bool, typer.Option("--print", help="Print the SQL instead of running it.")
    ] = False,
) -> None:
    """Create the worker, operator and read-only console roles with the grants each needs."""
    from forklift.ops import OpsContext
    from forklift.ops import roles as _roles
    from forklift.ops.connect import connection, resolve

    ctx = OpsContext.from_env(schema=cx.schema, read_only=cx.read_only)
    if not print_only:
        ctx.require_write("roles create")
    target = resolve(cx.dsn, schema=ctx.schema).dsn
    with connection(target, "migrate") as conn:
        report = _roles.create(conn, ctx, prefix, print_only=print_only)
    if cx.as_json:
        cx.show(report)
        return
    if print_only:
        for text in report.statements:
            print(text + ";")
        return
    for kind, name in report.roles.items():
        out.print(f"{kind}: role [bold]{ident(name)}[/]")
    for note in report.notes:
        out.print(f"[yellow]note:[/] {safe(note)}")
    out.print("set their passwords: ALTER ROLE <name> PASSWORD '...';"
              " run this again after each forklift migrate")
