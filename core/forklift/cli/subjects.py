"""`forklift subjects check`: every coverage problem of the app's personal-data declarations.

The check reads the database's catalog (columns, comments, foreign keys) through the app's own
:class:`forklift.subjects.PersonalData`; it changes nothing. Exit 0 when exports and erases may
run, 1 when a problem would refuse them.
"""

from __future__ import annotations

import typer

from forklift.cli.kit import AppOpt, Call, command, ident, out, safe

subjects_app = typer.Typer(help="Personal data: check that the declared subjects cover every"
                                " marked column.", no_args_is_help=True)


@subjects_app.command("check")
@command()
def subjects_check(cx: Call, app_spec: AppOpt = None) -> None:
    """List every coverage problem: a reached table anonymized without one of its marked
    columns, a marked table no subject reaches, a declaration naming what does not exist."""
    from forklift.ops.apps import load_app
    from forklift.subjects import registry_of

    target = load_app(app_spec)
    data = registry_of(target)
    if data is None:
        cx.fail("the app declares no PersonalData (forklift.subjects)", "subjects_undeclared")
    problems = data.check(cx.op.conn)
    if cx.as_json:
        cx.show({"ok": not problems, "schema": data.schema, "subjects": sorted(data.subjects),
                 "problems": [p.to_json() for p in problems]})
    elif not problems:
        from forklift._base.words import plural

        covered = plural(len(data.subjects), "subject")
        out.print(f"{covered} {'covers' if len(data.subjects) == 1 else 'cover'} every marked"
                  f" column in schema {ident(data.schema)}")
    else:
        for p in problems:
            columns = f" ({', '.join(ident(c) for c in p.columns)})" if p.columns else ""
            out.print(f"[red]{p.code}[/] {ident(p.table)}{columns}: {safe(p.message)}")
    if problems:
        raise typer.Exit(1)
