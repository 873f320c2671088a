"""`forklift migrate`: bring the schema up to date, without breaking the workers that run on it.

Before applying, it reads which live workers (fresh heartbeat, running or draining) a pending
migration would break (a migration's ``-- workers: N`` header against the schema each worker
recorded it was built for) and refuses while there are any, unless ``--force``. ``--check``
applies nothing: it reports what is pending, the workers that would break, and drift (what was
changed by hand against schema.sql), and exits 1 when something is pending or drifted.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from forklift.cli.kit import Call, DryRun, command, out

if TYPE_CHECKING:
    from forklift.ops.migrations import BrokenWorker, Drift


@command()
def migrate(
    cx: Call,
    check: Annotated[bool, typer.Option(
        "--check", help="Apply nothing; exit 1 if migrations are pending or the schema drifted"
        " from schema.sql (changed by hand).")] = False,
    partitioned_history: Annotated[bool, typer.Option(
        "--partitioned-history", help="Also keep finished jobs in a table partitioned by day"
        " (retention drops partitions); safe to repeat.")] = False,
    force: Annotated[bool, typer.Option(
        "--force", help="Apply even though live workers built for an older schema would break"
        " (drain them first instead when you can).")] = False,
    dry_run: DryRun = False,
) -> None:
    """Apply pending schema migrations (safe to run twice, or from two hosts at once)."""
    from forklift.ops import connect as fc
    from forklift.ops import migrations as m
    from forklift.ops.context import OpsContext

    ctx = OpsContext.from_env(schema=cx.schema, read_only=cx.read_only)
    applies = not (check or dry_run)
    if applies:
        ctx.require_write("migrate")
    target = fc.resolve(cx.dsn, schema=ctx.schema, migrate=False).dsn
    history = None
    drift: list[Drift] | None = None
    with fc.connection(target, "migrate") as conn:
        status = m.status(conn, ctx.schema)
        broken = m.breaking(conn, ctx.schema)
        unchecked = None
        if check and status.current > 0:
            import psycopg

            try:
                drift = m.drift(conn, ctx.schema)
            except psycopg.errors.InsufficientPrivilege as exc:
                # Drift is read against a scratch schema built beside it, which this role may
                # not create; the rest of --check stands.
                unchecked = f"drift not checked: {str(exc).strip().splitlines()[0]}"
        if applies and broken and not force:
            _refuse(cx, broken)
        applied = [m.label(x) for x in m.apply(conn, ctx.schema)] if applies else []
        if partitioned_history and applies:
            from forklift.ops import history as h

            history = "enabled" if h.enable(conn, ctx.schema) else "already enabled"
    if cx.as_json:
        cx.show({**status.to_json(), "applied": applied, "dry_run": dry_run,
                 "breaks_workers": [w.to_json() for w in broken],
                 **({"forced": True} if applies and broken and force else {}),
                 **({"drift": [d.to_json() for d in drift]} if drift is not None else {}),
                 **({"drift_unchecked": unchecked} if unchecked else {}),
                 **({"partitioned_history": history} if history else {})})
    else:
        _human(ctx.schema, status, applied, broken, drift, check=check, dry_run=dry_run)
        if unchecked:
            out.print(unchecked, markup=False)
        if history:
            out.print(f"partitioned history {history}")
    if check and (status.pending or drift):
        raise typer.Exit(1)


def _human(schema: str, status: Any, applied: list[str], broken: list[BrokenWorker],
           drift: list[Drift] | None, *, check: bool, dry_run: bool) -> None:
    from forklift._base.words import plural

    if check or dry_run:
        if status.pending:
            out.print(f"{len(status.pending)} pending: " + ", ".join(status.pending)
                      + (" (dry run: nothing applied)" if dry_run else ""))
        else:
            out.print(f"schema {schema} is up to date (version {status.required})")
    elif applied:
        out.print("applied: " + ", ".join(applied))
    else:
        out.print(f"nothing to apply: schema {schema} is at version {status.required}")
    if status.building:
        out.print("indexes still building (an interrupted run; `forklift migrate` finishes them): "
                  + ", ".join(status.building), markup=False)
    if broken:
        verb = "broke" if applied else "would break"
        out.print(f"{verb} {plural(len(broken), 'live worker')}:", markup=False)
        for line in _worker_lines(broken):
            out.print(line, markup=False)
    if drift is not None:
        if drift:
            out.print(f"drift: {plural(len(drift), 'difference')} from schema.sql:", markup=False)
            for d in drift:
                out.print(f"  {d.change:<8} {d.part} {d.name}", markup=False)
        else:
            out.print("no drift: the schema is as schema.sql makes it", markup=False)


def _worker_lines(broken: list[BrokenWorker]) -> list[str]:
    return [
        f"  {w.host} pid {w.pid} ({w.state}, forklift {w.version or '?'}, built for schema"
        f" {w.schema_built if w.schema_built is not None else '18 or older'};"
        f" {', '.join(w.broken_by)} needs workers built for {w.needs} or later)"
        for w in broken
    ]


def _refuse(cx: Call, broken: list[BrokenWorker]) -> None:
    from forklift._base.words import plural

    if not cx.as_json:
        out.print(f"would break {plural(len(broken), 'live worker')}:", markup=False)
        for line in _worker_lines(broken):
            out.print(line, markup=False)
    names = ", ".join(f"{w.host}:{w.pid}" for w in broken)
    cx.fail(f"refused: a pending migration would break {plural(len(broken), 'live worker')}"
            f" ({names}):"
            " drain them (SIGTERM) and start workers of this version, or pass --force",
            "workers_would_break", workers=[w.to_json() for w in broken])
