"""Paced backfills: walk a large set page by page, at a rate an operator can change live.

A backfill is declared over two functions: ``read(cursor, limit) -> (items, next_cursor)`` and
``process(items, conn)``. A run is a job of the internal kind ``forklift._features.backfill.backfill`` that loops
within its attempt, one page per transaction:

    BEGIN; read the checkpoint; read(cursor, limit); process(items, conn);
    UPDATE the checkpoint (cursor, counters) WHERE job_id = mine AND pages_done = as read; COMMIT

``conn`` is that transaction's connection, so when ``process`` writes to the same database its
writes and the checkpoint commit together: a crash (kill -9 included) before the commit rolls the
page back and the next attempt redoes it from the checkpoint; after the commit, the page is done
and never seen again. Writes ``process`` makes elsewhere (HTTP, another database) are
at-least-once: a crash between them and the commit repeats that page.

An attempt runs for a slice of :data:`SLICE` seconds and then snoozes (not an attempt) until its
next page is due, so a draining worker lets go of a run within seconds.

Pacing is a token bucket on the backfill's clock (:class:`SystemClock`, or a
:class:`FrozenClock` a test advances by hand). The run row's ``rate`` is re-read at every
checkpoint and while waiting, so a rate change applies from the next page; so do pause and
cancel. A wait longer than :data:`SNOOZE_AFTER` seconds on the real clock gives the worker slot
back (the job snoozes) instead of sleeping in it.

A page that raises fails the attempt, and the job retries by its policy (``max_attempts``,
``retry``); after a page succeeds on a retry the run moves to a fresh job, so each page gets the
full budget. When a page exhausts it the run stops as ``failed`` with its cursor kept, and
``backfills resume`` continues from there.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import textwrap
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import psycopg

from forklift._base.errors import ConfigError, ForkliftError
from forklift._base.names import check_name
from forklift._base.retry import Backoff
from forklift._db.sqltext import render
from forklift._db.steps import Query, Steps, drive, drive_async
from forklift._features.backfill.pace import (
    Clock,
    FrozenClock,
    SystemClock,
    TokenBucket,
    pace_add,
    pace_rates,
    pace_series,
)
from forklift._features.host import Host
from forklift._jobs import insert as _enq

__all__ = [
    "MAX_RATE",
    "RUNNER_KIND",
    "Backfill",
    "BackfillError",
    "BackfillHost",
    "BackfillNotFound",
    "BackfillNotLive",
    "Clock",
    "FrozenClock",
    "InvalidRate",
    "SystemClock",
    "TokenBucket",
    "check_rate",
    "declare",
    "definition_steps",
    "pace_add",
    "pace_rates",
    "pace_series",
    "runner_row",
    "sync_definitions",
    "sync_definitions_now",
]

RUNNER_KIND = "forklift.backfill"
RUNNER_QUEUE = "backfills"
#: On the real clock, a wait longer than this snoozes the job rather than holding a slot.
SNOOZE_AFTER = 5.0
#: While waiting for a token, the run row is re-read this often (pause, cancel, rate).
POLL_EVERY = 1.0
#: An attempt gives its slot back (snoozes until its next page is due) after this many seconds
#: of its clock, so a draining worker is not held for a whole backfill and runs spread over the
#: workers.
SLICE = 5.0
MAX_RATE = 10_000.0

LIVE_RUN_STATES = ("running", "paused", "failed")


class BackfillError(ForkliftError):
    code = "backfill_error"


class BackfillNotFound(BackfillError):
    code = "backfill_not_found"


class BackfillNotLive(BackfillError):
    """The action needs a live run (running, paused or failed) and there is none in that state."""

    code = "backfill_not_live"


class InvalidRate(BackfillError):
    code = "invalid_rate"


def check_rate(rate: float) -> float:
    value = float(rate)
    if not 0 < value <= MAX_RATE or value != value:
        raise InvalidRate(
            f"rate must be pages per second, above 0 and at most {MAX_RATE:g}, not {rate!r}",
            rate=rate,
        )
    return value


# -- declarations -----------------------------------------------------------------------------------
class BackfillHost(Host, Protocol):
    """What backfills need from an app: where the database is, its backfills, and a way to
    declare the internal kind that carries a run."""

    @property
    def dsn(self) -> str: ...

    @property
    def backfills(self) -> dict[str, Backfill]: ...

    @property
    def job(self) -> Callable[..., Callable[[Callable[..., Any]], object]]: ...


Reader = Callable[..., tuple[Sequence[Any], Any]]
Processor = Callable[[list[Any], psycopg.Connection[Any]], Any]


def takes(fn: Callable[..., Any], n: int) -> bool:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= n or any(p.kind == p.VAR_POSITIONAL for p in params)


def code_hash(*parts: Any) -> str:
    """A short hash of the source of the given functions or classes (compiled code if no source)."""
    digest = hashlib.sha256()
    for part in parts:
        if part is None:
            continue
        target = part.__func__ if hasattr(part, "__func__") else part
        try:
            text = textwrap.dedent(inspect.getsource(target)).encode()
        except (OSError, TypeError):
            code = getattr(target, "__code__", None)
            text = code.co_code if code is not None else repr(target).encode()
        digest.update(text)
    return digest.hexdigest()[:16]


@dataclass
class Backfill:
    """A declared backfill: how to read pages, how to process them, how fast."""

    name: str
    read: Reader
    process: Processor
    total: Callable[..., int | None] | None
    page_size: int
    rate: float
    max_attempts: int
    retry: Backoff
    clock: Clock
    code_hash: str
    app: BackfillHost = field(repr=False)

    def runner_row(self, run_id: int) -> _enq.Row:
        return runner_row(run_id, self.name, RUNNER_QUEUE, self.max_attempts,
                          json.dumps(self.retry.to_json()))


def runner_row(run_id: int, name: str, queue: str, max_attempts: int, retry: str | None) -> _enq.Row:
    """The job that carries a run (built from a definition row, so no app is needed)."""
    return _enq.Row(
        queue=queue, kind=RUNNER_KIND, args=json.dumps({"run": run_id}), priority=0,
        max_attempts=max_attempts, at=None, delay=0.0, unique_key=None, tags=[],
        meta=json.dumps({"backfill": name, "run": run_id}), retry=retry,
    )


def declare(
    app: BackfillHost,
    name: str,
    target: Any,
    *,
    read: Reader | None,
    total: Callable[..., int | None] | None,
    page_size: int,
    rate: float,
    max_attempts: int,
    retry: Backoff | None,
    clock: Clock | None,
) -> Backfill:
    """Register a backfill (``app.backfill``): ``target`` is the process function, or a class
    (instantiated without arguments) or object with ``read`` and ``process`` (and optionally
    ``total``) methods, and optionally ``declaration()``: a JSON-able description of what it
    was declared with, part of the code hash (a change shows as "code changed")."""
    check_name(name, "backfill", field="name")
    if name in app.backfills:
        raise ConfigError(f"backfill {name!r} is already declared")
    if page_size < 1:
        raise ConfigError(f"page_size must be at least 1, not {page_size}")
    if max_attempts < 1:
        raise ConfigError(f"max_attempts must be at least 1, not {max_attempts}")
    try:
        check_rate(rate)
    except InvalidRate as exc:
        raise ConfigError(exc.message) from None
    obj = target() if inspect.isclass(target) else target
    hashed: tuple[Any, ...]
    if callable(obj) and not hasattr(obj, "process"):
        if read is None:
            raise ConfigError(f"backfill {name!r}: give read= with a process function")
        process, hashed = obj, (read, obj, total)
    else:
        read = read or getattr(obj, "read", None)
        process = getattr(obj, "process", None)
        total = total or getattr(obj, "total", None)
        if read is None or process is None:
            raise ConfigError(f"backfill {name!r} needs read(cursor, limit) and process(items, conn)")
        hashed = (target, read, process, total) if inspect.isclass(target) else (read, process, total)
        # What the object was declared with (a reindex's table and columns) changes what a run
        # does as much as its code: an object that says so has it in the hash too.
        declaration = getattr(obj, "declaration", None)
        if callable(declaration):
            hashed += (json.dumps(declaration(), sort_keys=True, default=str),)
    for fn in (read, process, total):
        if fn is not None and inspect.iscoroutinefunction(fn):
            raise ConfigError(
                f"backfill {name!r}: read, process and total are plain functions (they run in"
                " a worker thread, inside the page's transaction)"
            )
    definition = Backfill(
        name=name, read=read, process=process, total=total, page_size=page_size,
        rate=float(rate), max_attempts=max_attempts,
        retry=retry or Backoff(kind="exponential", base=1.0, max=60.0),
        clock=clock or SystemClock(), code_hash=code_hash(*hashed), app=app,
    )
    app.backfills[name] = definition
    return definition




SYNC_SQL = """
INSERT INTO {s}.backfills AS t (name, code_hash, page_size, rate, queue, kind, max_attempts, retry)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s::jsonb)
ON CONFLICT (name) DO UPDATE SET
    code_hash = excluded.code_hash, page_size = excluded.page_size, rate = excluded.rate,
    queue = excluded.queue, kind = excluded.kind, max_attempts = excluded.max_attempts,
    retry = excluded.retry, updated_at = now()
WHERE (t.code_hash, t.page_size, t.rate, t.queue, t.kind, t.max_attempts, t.retry)
    IS DISTINCT FROM (excluded.code_hash, excluded.page_size, excluded.rate, excluded.queue,
                      excluded.kind, excluded.max_attempts, excluded.retry)
"""


def _sync_params(b: Backfill) -> tuple[Any, ...]:
    return (b.name, b.code_hash, b.page_size, b.rate, RUNNER_QUEUE, RUNNER_KIND, b.max_attempts,
            json.dumps(b.retry.to_json()))


def definition_steps(backfills: Iterable[Backfill], schema: str) -> Steps[None]:
    """Record backfill definitions (the leader, and ``--app`` on the CLI)."""
    for b in backfills:
        yield Query(render(SYNC_SQL, schema), _sync_params(b))


async def sync_definitions(
    conn: psycopg.AsyncConnection[Any], app: BackfillHost, schema: str
) -> None:
    await drive_async(conn, definition_steps(app.backfills.values(), schema))


def sync_definitions_now(
    conn: psycopg.Connection[Any], app: BackfillHost, schema: str, only: str | None = None
) -> None:
    chosen = [b for b in app.backfills.values() if only is None or b.name == only]
    drive(conn, definition_steps(chosen, schema))
