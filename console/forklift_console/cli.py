"""The `forklift` command: a worker, migrations, enqueue, and the operator's nouns and verbs.

Exit codes: 0 done, 1 refused or failed, 2 usage error. Every read command takes ``--json``.
The CLI never writes SQL: it calls the operator API in core.

Start-up is kept short: this module and the command modules import only typer and the small
option kit (console/opskit.py); each command loads what it needs (the operator API, Rich for
human output, the worker, Textual for the console) when it runs. A new command group goes in
GROUPS (module:attribute), so it loads only when named (cligroups.py); options parse without
Pydantic (cliparse.py). tests/test_cli_extras.py names what ``forklift stats --json`` must not
import.
"""

from __future__ import annotations

import typer

from forklift_console import (
    cli_bench,
    cli_enqueue,
    cli_ops,
    cli_worker,
    console_cmd,
)
from forklift_console.cligroups import loading
from forklift_console.opskit import Group

# The command groups, each imported when named (forklift_console.cligroups).
GROUPS = {
    name: f"forklift_console.{where}"
    for name, where in (
        ("jobs", "cli_jobs:jobs_app"),
        ("queues", "cli_queues:queues_app"),
        ("workers", "cli_queues:workers_app"),
        ("dead", "cli_dead:dead_app"),
        ("batches", "cli_batches:batches_app"),
        ("schedules", "cli_schedules:schedules_app"),
        ("backfills", "cli_backfills:backfills_app"),
        ("db", "cli_db:db_app"),
        ("health", "cli_health:health_app"),
        ("retention", "cli_retention:retention_app"),
        ("roles", "cli_roles:roles_app"),
        ("locks", "cli_locks:locks_app"),
        ("keys", "cli_keys:keys_app"),
        ("outbox", "cli_outbox:outbox_app"),
        ("events", "cli_outbox:events_app"),
    )
}

app = typer.Typer(
    name="forklift",
    help="Durable background jobs on PostgreSQL: workers, operators' tools and the console.",
    cls=loading(Group, GROUPS),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

app.command("worker")(cli_worker.worker)
app.command("migrate")(cli_worker.migrate)
app.command("enqueue")(cli_enqueue.enqueue)
app.command("demo")(cli_worker.demo)
app.command("console")(console_cmd.console)
app.command("stats")(cli_ops.stats)
app.command("audit")(cli_ops.audit)
app.command("prune")(cli_ops.prune)
app.command("bench")(cli_bench.bench)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
