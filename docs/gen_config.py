"""The configuration reference: every keyword of ``Forklift`` and ``Worker`` with its default
(read from their signatures), the ``forklift worker`` options (read from the command), and the
environment variables forklift reads.

A keyword or variable the code gains without a line here fails ``tests/architecture/
test_docs.py``, so the page cannot fall behind the code.
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path
from typing import Any

__all__ = ["ENVIRONMENT", "FORKLIFT", "WORKER", "environment_in_code", "render"]

ROOT = Path(__file__).resolve().parent.parent

#: What each keyword of ``Forklift(...)`` does.
FORKLIFT: dict[str, str] = {
    "dsn": "libpq conninfo or URL. `None` resolves it on first use from `FORKLIFT_DSN`, "
    "`DATABASE_URL`, then the embedded server, so importing an app touches no database; "
    "`app.use(dsn)` points it elsewhere before first use. The DSN's `options`, "
    "`application_name` and `connect_timeout` are kept.",
    "schema": "Schema holding forklift's tables (else `FORKLIFT_SCHEMA`, else `forklift`).",
    "payload_limit": "Most bytes of JSON a payload, meta or result may take (1 MiB).",
    "pool_size": "Most connections each of the app's two enqueue pools (sync and async) opens.",
    "batch_limits": "A `BatchLimits`: targets per batch, live batches per caller and in total, "
    "the reuse window (see [Batches](../how-to/batches.md)).",
}

#: What each keyword of ``Worker(app, ...)`` does.
WORKER: dict[str, str] = {
    "app": "The `Forklift` app whose kinds this worker runs (it claims only those kinds).",
    "queues": "Queues to serve (default: every queue a declared kind uses).",
    "concurrency": "Job slots.",
    "lease": "Lease in seconds; renewed every third of it.",
    "poll_interval": "The poll behind LISTEN/NOTIFY, in seconds.",
    "drain_timeout": "Seconds in-flight jobs get to finish after SIGTERM.",
    "drain_grace": "Seconds a handler that was told to stop gets after the drain cutoff.",
    "final_timeout": "Deadline of the final writes (outcomes, deregistering, resigning).",
    "release_hold": "How long a job abandoned with the process is held back before it runs "
    "again (at least `final_timeout + 5`).",
    "leader_interval": "How often the leader's loop runs (staging, cron ticks).",
    "flush_interval": "How long outcomes gather before one statement writes them.",
    "progress_interval": "How often progress and partial results are written.",
    "listen_health": "How often the listening session is checked with a query.",
    "listen_dsn": "A direct connection for LISTEN when the DSN goes through a transaction "
    "pooler (also `FORKLIFT_LISTEN_DSN`).",
    "prefetch_max": "Most jobs in the local buffer.",
    "prefetch_horizon": "Seconds of work, at the recent completion rate, the buffer holds.",
    "retention": "Overrides of the every-queue retention windows, by state (seconds), for "
    "tests and embedding; operators set windows with `forklift retention set`.",
    "worker_id": "The worker's id (default `host:pid:random`).",
    "lead": "`False`: never become the leader (no staging, rescue, cron or retention here).",
}

#: Every environment variable forklift reads, and what it sets.
ENVIRONMENT: dict[str, str] = {
    "FORKLIFT_DSN": "The database (after `--dsn`, before `DATABASE_URL`).",
    "DATABASE_URL": "The database when `FORKLIFT_DSN` is not set.",
    "FORKLIFT_SCHEMA": "Schema holding forklift's tables (default `forklift`).",
    "FORKLIFT_HOME": "Where the embedded server keeps its data (`<home>/pg18`; default the "
    "per-user data directory).",
    "FORKLIFT_APP": "The app (`module:attr`) for CLI commands that need one, and for the "
    "pytest plugin.",
    "FORKLIFT_ACTOR": "Who acts, in the audit trail (default the OS user).",
    "FORKLIFT_READ_ONLY": "`1`: refuse every mutating operator action (CLI, console, "
    "`Operator`).",
    "FORKLIFT_POOLER": "`transaction`: the DSN goes through a transaction pooler (PgBouncer); "
    "without it forklift learns so from the first refused connection.",
    "FORKLIFT_LISTEN_DSN": "A direct connection for LISTEN when the DSN goes through a pooler.",
    "FORKLIFT_REPLICA_DSN": "A streaming replica for the console's and the CLI's reads "
    "(`--replica-dsn`); every write and claim stays on the primary.",
    "FORKLIFT_REPLICA_MAX_LAG": "Seconds of replica lag past which reads go to the primary "
    "(`--replica-max-lag`, default 30).",
    "FORKLIFT_DJANGO_BACKEND": "The `TASKS` alias `forklift.django.worker` serves (default "
    "`default`).",
    "FORKLIFT_TEST_DSN": "pytest plugin: the server test databases are made on (a role that "
    "may create databases); else an embedded server.",
    "FORKLIFT_TEST_HOME": "pytest plugin: where that embedded test server lives.",
    "FORKLIFT_BENCH_WORKER": "Set by `forklift bench` on the worker processes it starts; not "
    "for users.",
    "FORKLIFT_BENCH_PARENT": "Set by `forklift bench` on the processes it starts (its own pid, "
    "so they stop when it is killed); not for users.",
    "FORKLIFT_SCREENSHOT_DIR": "Where `scripts/screenshots.py` writes the console's pictures.",
    "FORKLIFT_CLIPBOARD": "The console's copies (`ctrl+y`, `y`): `osc52` to the terminal's "
    "clipboard, `file` to a file; unset, a file only where the terminal is known to drop OSC 52.",
    "FORKLIFT_CLIPBOARD_FILE": "That file (default `$XDG_STATE_HOME/forklift/clipboard.txt`).",
    "PGOPTIONS": "libpq's: kept when the DSN sets no `options`.",
    "PGAPPNAME": "libpq's: kept when the DSN sets no `application_name`; forklift appends "
    "its purpose.",
    "PGCONNECT_TIMEOUT": "libpq's: kept when the DSN sets no `connect_timeout`.",
    "PG_VERSION": "Read from the embedded server's data directory (a file, not a variable).",
    "NO_COLOR": "The console draws without colour (every state is a glyph and a word).",
}

_NAME = re.compile(r'"((?:FORKLIFT_[A-Z_]+)|DATABASE_URL|PG[A-Z_]+|NO_COLOR)"')


def environment_in_code() -> set[str]:
    """The variable names the source quotes: what ENVIRONMENT must cover."""
    found: set[str] = set()
    for folder in ("core", "console", "scripts"):
        for path in (ROOT / folder).rglob("*.py"):
            found |= set(_NAME.findall(path.read_text(encoding="utf-8")))
    return found


def _default(p: inspect.Parameter) -> str:
    if p.default is inspect.Parameter.empty:
        return "required"
    return f"`{p.default!r}`"


def signature_rows(func: Any, described: dict[str, str]) -> list[str]:
    rows = []
    for name, p in inspect.signature(func).parameters.items():
        if name == "self":
            continue
        rows.append(f"| `{name}` | {_default(p)} | {described.get(name, '')} |")
    return rows


def render() -> str:
    from gen_cli import commands, render_command

    from forklift import Forklift, Worker

    worker_cmd = next(cmd for path, cmd in commands() if path == ["forklift", "worker"])
    out = [
        "# Configuration",
        "",
        "Every default below is read from the code when this site is built: the keywords from "
        "the signatures of `Forklift` and `Worker`, the options from the `forklift worker` "
        "command.",
        "",
        "## Where the database is",
        "",
        "`--dsn` > `FORKLIFT_DSN` > `DATABASE_URL` > the embedded server (the `embedded` "
        "extra), which starts on first use and keeps its data under `FORKLIFT_HOME`. The "
        "schema: `--schema` > `Forklift(schema=)` > `FORKLIFT_SCHEMA` > `forklift`.",
        "",
        "## `Forklift(...)`",
        "",
        "| keyword | default | meaning |",
        "| --- | --- | --- |",
        *signature_rows(Forklift.__init__, FORKLIFT),
        "",
        "## `Worker(app, ...)`",
        "",
        "Run it with `run_worker(Worker(app, ...))` (drains on SIGTERM and returns the exit "
        "code) or `await Worker(app, ...).run()`.",
        "",
        "| keyword | default | meaning |",
        "| --- | --- | --- |",
        *signature_rows(Worker.__init__, WORKER),
        "",
        "## `forklift worker`",
        "",
        render_command(["forklift", "worker"], worker_cmd, level=3),
        "",
        "## Environment variables",
        "",
        "| variable | what it sets |",
        "| --- | --- |",
        *(f"| `{k}` | {v} |" for k, v in ENVIRONMENT.items()),
        "",
        "## Set in the database",
        "",
        "Some settings live in forklift's schema, so every worker, operator and probe sees the "
        "same ones, and each change is audited:",
        "",
        "- retention windows: `forklift retention set STATE WINDOW [--queue Q]` (completed 1 "
        "day, cancelled 7 days, dead 30 days by default; see "
        "[Running in production](../how-to/production.md#retention-forklift-retention));",
        "- health thresholds: `forklift health set NAME VALUE` (see "
        "[Running in production](../how-to/production.md#health-forklift-health));",
        "- queue pauses, concurrency limits, rates and fair share: `forklift queues ...`; key "
        "limits and rates: `forklift keys ...` (see [Flow control](../how-to/flow-control.md)).",
        "",
    ]
    return "\n".join(out)
