"""The `forklift` command: a worker, migrations, enqueue, and the operator's nouns and verbs.

Exit codes: 0 done, 1 refused or failed, 2 usage error. Every read command takes ``--json``.
The CLI never writes SQL: it calls the operator API in core.
"""

from __future__ import annotations

import json
from typing import Annotated

import typer

from forklift.ops import connect as config
from forklift.ops.connect import connection
from forklift_console import cli_bench, cli_ops, console_cmd
from forklift_console.cli_batches import batches_app
from forklift_console.cli_db import db_app
from forklift_console.cli_health import health_app
from forklift_console.cli_keys import keys_app
from forklift_console.cli_locks import locks_app
from forklift_console.cli_retention import retention_app
from forklift_console.cli_roles import roles_app
from forklift_console.cli_schedules import backfills_app, schedules_app
from forklift_console.opskit import Dsn, Json, Schema, emit_json, handled, out, safe, usage

app = typer.Typer(
    name="forklift",
    help="Durable background jobs on PostgreSQL: workers, operators' tools and the console.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
jobs_app = typer.Typer(help="Inspect and act on jobs.", no_args_is_help=True)
app.add_typer(jobs_app, name="jobs")
app.add_typer(schedules_app, name="schedules")
app.add_typer(backfills_app, name="backfills")
app.add_typer(batches_app, name="batches")
app.add_typer(db_app, name="db")
app.add_typer(health_app, name="health")
app.add_typer(retention_app, name="retention")
app.add_typer(roles_app, name="roles")
app.add_typer(locks_app, name="locks")
app.add_typer(keys_app, name="keys")
# stats, jobs list|show|explain|retry|cancel|delete, queues, workers, audit, prune
cli_ops.register(app, jobs_app)
app.command("console")(console_cmd.console)
app.command("bench")(cli_bench.bench)

AppOpt = Annotated[
    str | None, typer.Option("--app", help="Your app as module:attr (default: FORKLIFT_APP).")
]


# -- worker ------------------------------------------------------------------------------------
@app.command()
def worker(
    app_spec: AppOpt = None,
    queues: Annotated[
        str | None, typer.Option("--queues", "-q", help="Comma-separated queues (default: every declared kind's).")
    ] = None,
    concurrency: Annotated[int, typer.Option("--concurrency", "-c", min=1, help="Job slots.")] = 10,
    lease: Annotated[float, typer.Option(min=1.0, help="Lease seconds; renewed every third.")] = 30.0,
    drain_timeout: Annotated[
        float, typer.Option(min=0.0, help="Seconds in-flight jobs get to finish on SIGTERM.")
    ] = 30.0,
    poll_interval: Annotated[float, typer.Option(min=0.01, help="Poll backstop seconds.")] = 1.0,
    dsn: Dsn = None,
    log_level: Annotated[str, typer.Option(help="Logging level.")] = "INFO",
    log_format: Annotated[str, typer.Option(
        help="Log lines as text, or json: one JSON object a line (forklift.logs).")] = "text",
    metrics_port: Annotated[int | None, typer.Option(
        min=1, max=65535, help="Serve Prometheus /metrics on this port (extra metrics).")] = None,
) -> None:
    """Run jobs: claim, execute, retry, until SIGTERM (drain) or a second signal (skip the wait)."""
    from forklift import Worker, logs, run_worker
    from forklift.ops.apps import load_app

    with handled():
        logs.configure(format=log_format, level=log_level)  # type: ignore[arg-type]
        if metrics_port is not None:
            _serve_metrics(metrics_port)
        target = load_app(app_spec)
        if dsn:
            target.use(dsn)
        target.dsn  # noqa: B018 - resolve (and start the embedded server) before the loop
        w = Worker(
            target,
            queues=[q.strip() for q in queues.split(",") if q.strip()] if queues else None,
            concurrency=concurrency,
            lease=lease,
            drain_timeout=drain_timeout,
            poll_interval=poll_interval,
        )
    raise typer.Exit(run_worker(w))


def _serve_metrics(port: int) -> None:
    from forklift import ConfigError

    try:
        from forklift import metrics
    except ImportError as exc:
        raise ConfigError(f"--metrics-port needs the metrics extra (pip install"
                          f" 'forklift[metrics]'): {exc}") from None
    metrics.serve(port)


# -- migrate -----------------------------------------------------------------------------------
@app.command()
def migrate(
    check: Annotated[bool, typer.Option("--check", help="Exit 1 if migrations are pending.")] = False,
    partitioned_history: Annotated[bool, typer.Option(
        "--partitioned-history", help="Also keep finished jobs in a table partitioned by day"
        " (retention drops partitions); safe to repeat.")] = False,
    dsn: Dsn = None,
    schema: Schema = None,
) -> None:
    """Apply pending schema migrations (safe to run twice, or from two hosts at once)."""
    from forklift.ops import history
    from forklift.ops import migrations as m

    with handled():
        schema_name = schema or config.schema_from_env()
        target = config.resolve(dsn, schema=schema_name, migrate=False).dsn
        with connection(target, "migrate") as conn:
            if check:
                todo = m.pending(conn, schema_name)
                if todo:
                    out.print(f"{len(todo)} pending: " + ", ".join(f"{x.version:04d}_{x.name}" for x in todo))
                    raise typer.Exit(1)
                out.print(f"schema {schema_name} is up to date (version {m.required_version()})")
                return
            done = m.apply(conn, schema_name)
            if partitioned_history:
                fresh = history.enable(conn, schema_name)
                out.print("partitioned history " + ("enabled" if fresh else "already enabled"))
        if done:
            out.print("applied: " + ", ".join(f"{x.version:04d}_{x.name}" for x in done))
        else:
            out.print(f"nothing to apply: schema {schema_name} is at version {m.required_version()}")


# -- enqueue -----------------------------------------------------------------------------------
@app.command()
def enqueue(
    kind: Annotated[str, typer.Argument(help="The job kind's declared name.")],
    args: Annotated[str, typer.Option("--args", help="The payload as JSON.")] = "{}",
    queue: Annotated[str | None, typer.Option(help="Queue (default: the kind's).")] = None,
    delay: Annotated[float | None, typer.Option(min=0.0, help="Seconds from now.")] = None,
    priority: Annotated[int | None, typer.Option(help="Lower runs first (default: the kind's).")] = None,
    unique_key: Annotated[str | None, typer.Option(help="At most one live job per key.")] = None,
    app_spec: AppOpt = None,
    dsn: Dsn = None,
    as_json: Json = False,
) -> None:
    """Enqueue one job, validated against the kind declared in your app."""
    from forklift.ops.apps import load_app

    try:
        payload = json.loads(args)
    except ValueError as exc:
        raise usage(f"--args is not JSON: {exc}", as_json) from None
    with handled(as_json):
        target = load_app(app_spec)
        if dsn:
            target.use(dsn)
        job = target.enqueue(
            kind, payload, queue=queue, delay=delay, priority=priority, unique_key=unique_key
        )
        target.close()
    if as_json:
        emit_json(job.to_json())
    else:
        note = " (an existing live job holds that unique key)" if job.reused else ""
        out.print(f"job {job.id} {job.state} on queue {safe(job.queue)}{note}")


# -- demo --------------------------------------------------------------------------------------
@app.command()
def demo(
    headless: Annotated[bool, typer.Option(help="No UI: run --jobs jobs to the end and print a summary.")] = False,
    jobs: Annotated[int, typer.Option(min=1, help="Jobs to run with --headless.")] = 2000,
    concurrency: Annotated[int, typer.Option(min=1)] = 20,
    dsn: Dsn = None,
) -> None:
    """Run the bundled demo app on the embedded database (or --dsn) and watch jobs flow."""
    from forklift_console.demo import run_demo

    with handled():
        raise typer.Exit(run_demo(headless=headless, jobs=jobs, concurrency=concurrency, dsn=dsn))


def main() -> None:
    app()


if __name__ == "__main__":
    main()
