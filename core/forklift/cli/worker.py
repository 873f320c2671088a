"""`forklift worker`: running jobs (`forklift migrate` is in cli/migrate.py)."""

from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING, Annotated, Literal

import typer

from forklift.cli.kit import AppOpt, Call, Dsn, Schema, command

if TYPE_CHECKING:
    from forklift._worker.probe_server import ProbeServer

Queues = Annotated[
    str | None,
    typer.Option("--queues", "-q", help="Comma-separated queues (default: every declared kind's)."),
]


@command(database=False, json=False)
def worker(
    cx: Call,
    app_spec: AppOpt = None,
    queues: Queues = None,
    concurrency: Annotated[int, typer.Option("--concurrency", "-c", min=1, help="Job slots.")] = 10,
    lease: Annotated[float, typer.Option(min=1.0, help="Lease seconds; renewed every third.")] = 30.0,
    drain_timeout: Annotated[
        float, typer.Option(min=0.0, help="Seconds in-flight jobs get to finish on SIGTERM.")
    ] = 30.0,
    poll_interval: Annotated[float, typer.Option(min=0.01, help="Poll backstop seconds.")] = 1.0,
    dsn: Dsn = None,
    schema: Schema = None,
    log_level: Annotated[str, typer.Option(
        help="Logging level: DEBUG, INFO, WARNING, ERROR or CRITICAL.")] = "INFO",
    log_format: Annotated[Literal["text", "json"], typer.Option(
        help="Log lines as text, or json: one JSON object a line (forklift.logs).")] = "text",
    metrics_port: Annotated[int | None, typer.Option(
        min=1, max=65535, help="Serve Prometheus /metrics on this port (extra metrics), and"
        " the /healthz and /readyz probes unless --health-port is given.")] = None,
    health_port: Annotated[int | None, typer.Option(
        min=1, max=65535, help="Serve the /healthz and /readyz probes on this port.")] = None,
) -> None:
    """Run jobs: claim, execute, retry, until SIGTERM (drain) or a second signal (skip the wait)."""
    import logging

    from forklift import Worker, logs, run_worker
    from forklift.ops.apps import load_app

    if not isinstance(logging.getLevelName(log_level.upper()), int):
        raise cx.usage(f"--log-level must be DEBUG, INFO, WARNING, ERROR or CRITICAL, not"
                       f" {log_level!r} (try: forklift worker --help)")
    logs.configure(format=log_format, level=log_level)
    probes = _serve(metrics_port, health_port)
    target = load_app(app_spec)
    if schema:
        from forklift.ops.connect import check_schema

        target.schema = check_schema(schema)
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
    if probes is not None:
        from forklift._worker.probes import Probes

        w.add_service(Probes(w.config, w.state, server=probes, restarts=w.supervisor.restarts))
    raise typer.Exit(run_worker(w))


def _serve(metrics_port: int | None, health_port: int | None) -> ProbeServer | None:
    """Bind the ports asked for (failing at start, naming the flag): the probes on
    ``--health-port``, else beside ``/metrics`` on ``--metrics-port`` (one server answering the
    three paths). The probes are served once the worker runs."""
    from forklift._worker.probe_server import ProbeServer

    if metrics_port is None:
        return None if health_port is None else ProbeServer(health_port, flag="--health-port")
    metrics = _metrics()
    if health_port is not None and health_port != metrics_port:
        probes = ProbeServer(health_port, flag="--health-port")
        metrics.serve(metrics_port)
        return probes
    probes = ProbeServer(metrics_port, flag="--metrics-port")
    probes.route("/metrics", metrics.exposition)
    metrics.enable()
    return probes


def _metrics() -> ModuleType:
    from forklift import ConfigError

    try:
        from forklift import metrics
    except ImportError as exc:
        raise ConfigError(f"--metrics-port needs the metrics extra (pip install"
                          f" 'forklift[metrics]'): {exc}") from None
    return metrics
