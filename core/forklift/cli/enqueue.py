"""`forklift enqueue KIND`: one job, validated against the kind declared in your app.

An operator's enqueue is an action like the others: refused in read-only mode, audited
(``enqueue``, with the job, its kind and queue) in the same transaction as the insert, and
``--dry-run`` rehearses it (validation, unique key, the row as it would be stored) and rolls
back. ``--args`` takes the payload as JSON, ``@path`` for a file, or ``-`` for stdin.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from forklift.cli.kit import AppOpt, Call, command, ident, out

Args = Annotated[
    str,
    typer.Option("--args", help="The payload: JSON, @file to read it from a file, - for stdin."),
]

#: The longest --delay: ten years (a job's run_at must stay a time PostgreSQL can store).
MAX_DELAY = 10 * 365.25 * 86400.0


def read_args(text: str, cx: Call) -> Any:
    """The payload from ``--args``: JSON text, ``@path`` or ``-`` (stdin)."""
    where = "--args"
    if text == "-":
        text, where = sys.stdin.read(), "--args - (stdin)"
    elif text.startswith("@"):
        path = Path(text[1:]).expanduser()
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
            raise cx.usage(f"cannot read --args file {str(path)!r}: {reason}") from None
        where = f"--args file {str(path)!r}"
    try:
        return json.loads(text)
    except ValueError as exc:
        raise cx.usage(f"{where} is not JSON: {exc}") from None


@command(acts=True)
def enqueue(
    cx: Call,
    kind: Annotated[str, typer.Argument(help="The job kind's declared name.")],
    args: Args = "{}",
    queue: Annotated[str | None, typer.Option(help="Queue (default: the kind's).")] = None,
    delay: Annotated[
        float | None, typer.Option(min=0.0, max=MAX_DELAY, help="Seconds from now.")
    ] = None,
    priority: Annotated[int | None, typer.Option(
        min=-32768, max=32767, help="Lower runs first (default: the kind's).")] = None,
    unique_key: Annotated[str | None, typer.Option(help="At most one live job per key.")] = None,
    tenant: Annotated[str | None, typer.Option(help="The tenant the job belongs to.")] = None,
    enqueued_by: Annotated[str | None, typer.Option(
        help="Who enqueued it, shown with the job (attribution, never authority).")] = None,
    app_spec: AppOpt = None,
) -> None:
    """Enqueue one job, validated against the kind declared in your app (audited)."""
    payload = read_args(args, cx)
    from forklift.ops import audit
    from forklift.ops import connect as fc
    from forklift.ops.apps import load_app
    from forklift.ops.context import OpsContext

    target = load_app(app_spec)
    schema = fc.check_schema(cx.schema) if cx.schema else target.schema
    ctx = OpsContext.from_env(schema=schema, actor=cx.actor, read_only=cx.read_only)
    if not cx.dry_run:
        ctx.require_write("enqueue")
    if cx.dsn:
        target.use(cx.dsn)
    reason = audit.clean_reason(cx.reason)
    declared, target.schema = target.schema, schema  # for this command only
    try:
        with fc.connection(target.dsn, "enqueue") as conn, \
                conn.transaction(force_rollback=cx.dry_run):
            job = target.enqueue(kind, payload, conn=conn, queue=queue, delay=delay,
                                 priority=priority, unique_key=unique_key, tenant=tenant,
                                 enqueued_by=enqueued_by)
            audit.record(conn, ctx, "enqueue",
                         {"job": job.id, "kind": job.kind, "queue": job.queue},
                         count=0 if job.reused else 1, reason=reason,
                         outcome="noop: existing" if job.reused else "enqueued")
    finally:
        target.schema = declared
        target.close()
    if cx.as_json:
        cx.show({**job.to_json(), **({"dry_run": True} if cx.dry_run else {})})
        return
    if cx.dry_run:
        if job.reused:
            out.print(f"dry run: live job {job.id} holds that unique key: enqueue would return"
                      " it; nothing changed")
        else:
            out.print(f"dry run: would enqueue a {ident(job.kind)} job, {job.state}, on queue"
                      f" {ident(job.queue)} (priority {job.priority}); nothing changed")
        return
    note = " (an existing live job holds that unique key)" if job.reused else ""
    out.print(f"job {job.id} {job.state} on queue {ident(job.queue)}{note}")
