"""`forklift ledger check|create`: a book of postings summed per currency, and its table.

The SQL lives in :mod:`forklift.ledger` (the book); these commands only name the table and
show what it says. ``check`` exits 1 when a currency does not sum to zero.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from forklift.cli.kit import Call, command, ident, out

if TYPE_CHECKING:
    from forklift.ledger import BookCheck, TableBook

ledger_app = typer.Typer(help="Ledger postings: sum a book per currency, create its table.",
                         no_args_is_help=True)

TableOpt = Annotated[
    str, typer.Option("--table", help="The book's table, as table or schema.table.")
]


def _book(table: str) -> TableBook:
    from forklift.ledger import TableBook

    return TableBook.named(table)


def _print_check(check: BookCheck) -> None:
    from rich.table import Table

    t = Table(box=None, header_style="bold", pad_edge=False)
    for col in ("currency", "total (minor units)", "lines", "postings"):
        t.add_column(col)
    for c in check.currencies:
        total = f"[green]{c.total}[/]" if c.total == 0 else f"[red bold]{c.total:+d}[/]"
        t.add_row(ident(c.currency), total, str(c.lines), str(c.postings))
    out.print(t)
    scope = f" for tenant {ident(check.tenant)}" if check.tenant is not None else ""
    if not check.currencies:
        out.print(f"{ident(check.table)}{scope}: no lines")
    elif check.balanced:
        out.print(f"{ident(check.table)}{scope}: balanced, every currency sums to zero")


@ledger_app.command("check")
@command()
def check_cmd(
    cx: Call,
    table: TableOpt = "ledger_lines",
    tenant: Annotated[str | None, typer.Option("--tenant", help="Only this tenant's lines.")] = None,
) -> None:
    """Sum the book per currency: every total is zero in a balanced book (exit 1 otherwise)."""
    check = _book(table).check(cx.op.session.conn, tenant=tenant)
    cx.show(check, _print_check)
    if not check.balanced:
        off = ", ".join(f"{c.currency} {c.total:+d}" for c in check.currencies if c.total)
        cx.fail(f"the book {check.table} does not balance: {off}", "ledger_unbalanced")


@ledger_app.command("create")
@command(acts=True)
def create_cmd(cx: Call, table: TableOpt = "ledger_lines") -> None:
    """Create the book's table if it does not exist (--dry-run shows the statement)."""
    book = _book(table)
    conn = cx.op.session.conn
    statement = book.create_sql().as_string(conn)
    if not cx.dry_run:
        cx.op.ctx.require_write("ledger create")
        from forklift.ops import audit

        with conn.transaction():
            book.create(conn)
            audit.record(conn, cx.op.ctx, "ledger.create", {"table": book.name},
                         reason=cx.reason)
    if cx.as_json:
        cx.show({"table": book.name, "sql": statement, "dry_run": cx.dry_run})
        return
    out.print(statement, markup=False, highlight=False)
    out.print("[dim](dry run: nothing changed)[/]" if cx.dry_run
              else f"created {ident(book.name)} (if it was not there)")
