"""The `forklift` command: a worker, migrations, enqueue, and the operator's nouns and verbs.

Exit codes: 0 done, 1 refused or failed, 2 usage error. Every read command takes ``--json``.
The CLI never writes SQL: it calls the operator API in core.

Start-up is kept short: this module and the command modules import only typer and the small
option kit (cli/kit.py); each command loads what it needs (the operator API, Rich for
human output, the worker, Textual for the console) when it runs. A new command group goes in
GROUPS (module:attribute), so it loads only when named (cli/groups.py); options parse without
Pydantic (cli/parse.py). tests/cli/test_cli_extras.py names what ``forklift stats --json`` must not
import.
"""

from __future__ import annotations

import typer

from forklift.cli import bench_cmd as cli_bench
from forklift.cli import console as console_cmd
from forklift.cli import enqueue as cli_enqueue
from forklift.cli import migrate as cli_migrate
from forklift.cli import ops as cli_ops
from forklift.cli import worker as cli_worker
from forklift.cli.groups import loading
from forklift.cli.kit import Group

# The command groups, each imported when named (forklift.cli.groups).
GROUPS = {
    name: f"forklift.cli.{where}"
    for name, where in (
        ("jobs", "jobs:jobs_app"),
        ("queues", "queues:queues_app"),
        ("workers", "queues:workers_app"),
        ("dead", "dead:dead_app"),
        ("batches", "batches:batches_app"),
        ("schedules", "schedules:schedules_app"),
        ("backfills", "backfills:backfills_app"),
        ("db", "db:db_app"),
        ("health", "health:health_app"),
        ("retention", "retention:retention_app"),
        ("roles", "roles:roles_app"),
        ("locks", "locks:locks_app"),
        ("keys", "keys:keys_app"),
        ("kinds", "kinds:kinds_app"),
        ("outbox", "outbox:outbox_app"),
        ("events", "outbox:events_app"),
        ("ledger", "ledger:ledger_app"),
        ("partitions", "partitions:partitions_app"),
        ("subjects", "subjects:subjects_app"),
        ("consumers", "consumers:consumers_app"),
        ("webhooks", "webhooks:webhooks_app"),
        ("workflows", "workflows:workflows_app"),
        ("kinds", "kinds:kinds_app"),
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
app.command("migrate")(cli_migrate.migrate)
app.command("enqueue")(cli_enqueue.enqueue)
app.command("demo")(console_cmd.demo)
app.command("console")(console_cmd.console)
app.command("stats")(cli_ops.stats)
app.command("audit")(cli_ops.audit)
app.command("prune")(cli_ops.prune)
app.command("bench")(cli_bench.bench)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
