"""Declaring a consumer: the kind that runs it, the schedule that supervises it.

``app.consumer(name, source=..., ...)`` over ``process(items, conn)`` declares, from forklift's
own primitives:

- a job kind named ``name`` whose run reads batches from the source and processes them, each
  batch in one transaction with the cursor it moves (:mod:`forklift._features.consumers.run`);
  the kind has a per-key concurrency limit of one, so across the fleet at most one run of a
  consumer is ever running, whatever was enqueued;
- a cron schedule ``<name>.supervisor`` (every minute by default) whose job starts a run unless
  the consumer is paused: an enqueue under the unique key ``consumer:<name>``, so while a run
  is live (running, snoozing between slices, waiting for its retry) it starts nothing more.

A run that finds nothing new ends; the next supervisor tick starts another. A run that fails
backs off: the consumer's failure streak sets the delay (its ``retry`` backoff), and a
supervisor tick while it backs off starts the next run no sooner than that.
"""

from __future__ import annotations

import inspect
import json
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

import psycopg

from forklift._base.errors import ConfigError
from forklift._base.names import check_name
from forklift._base.retry import Backoff, Fail
from forklift._db.sqltext import render
from forklift._features.consumers.source import Source
from forklift._features.flow.keys import Key
from forklift._features.host import Host, Kind
from forklift._jobs.attempt import Attempt  # the handlers' annotations are read at declaration

if TYPE_CHECKING:
    from psycopg_pool import ConnectionPool

    from forklift._jobs.job import Job

__all__ = [
    "DEFAULT_EVERY", "DEFAULT_QUEUE", "DEFAULT_RETRY", "MAX_BATCH", "SLICE", "SUPERVISE_KIND",
    "Consumer", "ConsumerHost", "Processor", "declare", "unique_key",
]

DEFAULT_QUEUE = "consumers"
DEFAULT_EVERY = "* * * * *"
#: A failing consumer's delays: 1 s doubling to 5 minutes, the streak counting across runs.
DEFAULT_RETRY = Backoff(kind="exponential", base=1.0, max=300.0, jitter="equal")
MAX_BATCH = 10_000
#: A run gives its worker slot back (snoozes, not an attempt) after this many seconds of
#: batches, so a draining worker is not held and a busy consumer does not hog one slot.
SLICE = 5.0
SUPERVISE_KIND = "forklift.consumers.supervise"

Processor = Callable[[list[Any], psycopg.Connection[Any]], Any]

DEFINE_SQL = """
INSERT INTO {s}.consumers AS t (name, kind, queue, supervisor, batch_size)
VALUES (%s, %s, %s, %s, %s)
ON CONFLICT (name) DO UPDATE SET
    kind = excluded.kind, queue = excluded.queue, supervisor = excluded.supervisor,
    batch_size = excluded.batch_size, updated_at = now()
WHERE (t.kind, t.queue, t.supervisor, t.batch_size)
    IS DISTINCT FROM (excluded.kind, excluded.queue, excluded.supervisor, excluded.batch_size)
"""
STATE_SQL = "SELECT paused, retry_at FROM {s}.consumers WHERE name = %s"


class RunKind(Kind, Protocol):
    """The kind a consumer's runs are jobs of, as far as the supervisor needs it."""

    def enqueue(self, args: Any, **options: Any) -> Job: ...


class ConsumerHost(Host, Protocol):
    """What consumers need from an app: where its database is, and how to declare kinds and
    schedules (``Forklift`` is one)."""

    @property
    def dsn(self) -> str: ...

    @property
    def job(self) -> Callable[..., Callable[[Callable[..., Any]], Any]]: ...

    @property
    def schedule(self) -> Callable[..., Any]: ...

    def pool(self) -> ConnectionPool[Any]: ...


def unique_key(name: str) -> str:
    """The unique key every run of consumer ``name`` is enqueued under."""
    return f"consumer:{name}"


@dataclass
class Consumer:
    """A declared consumer: its source, what processes a batch, how it runs and backs off."""

    name: str
    source: Source
    process: Processor
    batch_size: int
    queue: str
    retry: Backoff
    max_attempts: int
    slice: float
    app: ConsumerHost = field(repr=False)
    #: The kind of its runs (named like the consumer) and the schedule that supervises it.
    kind: RunKind = field(init=False, repr=False)
    supervisor: Any = field(init=False, repr=False)

    def define(self, conn: psycopg.Connection[Any]) -> None:
        """Record (or refresh) the consumer's row, on ``conn`` and in its transaction."""
        conn.execute(render(DEFINE_SQL, self.app.schema), (
            self.name, self.kind.name, self.queue, getattr(self.supervisor, "name", None),
            self.batch_size))

    def start(self) -> Job | None:
        """Start a run now unless one is live or the consumer is paused (what each supervisor
        tick does); the live or new run's job, or None when paused. A consumer backing off
        after failures starts no sooner than its back-off allows."""
        with self.app.pool().connection() as conn, conn.transaction():
            self.define(conn)
            row = conn.execute(render(STATE_SQL, self.app.schema), (self.name,)).fetchone()
            paused, retry_at = row if row is not None else (False, None)
            if paused:
                return None
            at = retry_at if retry_at is not None and retry_at > datetime.now(UTC) else None
            return self.kind.enqueue({}, conn=conn, unique_key=unique_key(self.name), at=at)


#: Each app's consumers by name, for the one supervisor kind the app declares.
_CONSUMERS: weakref.WeakKeyDictionary[object, dict[str, Consumer]] = weakref.WeakKeyDictionary()


def _check_int(value: object, what: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ConfigError(f"{what} must be a whole number {low} to {high:,}, not {value!r}",
                          field=what)
    return value


def declare(
    app: ConsumerHost,
    name: str,
    process: Processor,
    *,
    source: Source,
    batch_size: int = 100,
    queue: str = DEFAULT_QUEUE,
    every: str = DEFAULT_EVERY,
    retry: Backoff | None = None,
    max_attempts: int = 10,
    slice_seconds: float = SLICE,
) -> Consumer:
    """Validate and register a consumer (``app.consumer``)."""
    check_name(name, "kind", field="name")
    if not isinstance(source, Source):
        raise ConfigError(f"consumer {name!r}: source must have read(cursor, limit, conn), not"
                          f" {source!r}", field="source")
    if not callable(process) or inspect.iscoroutinefunction(process):
        raise ConfigError(f"consumer {name!r}: process(items, conn) must be a plain function (it"
                          " runs in a worker thread, inside the batch's transaction)",
                          field="process")
    if inspect.iscoroutinefunction(getattr(source, "read", None)):
        raise ConfigError(f"consumer {name!r}: source.read must be a plain function",
                          field="source")
    _check_int(batch_size, "batch_size", 1, MAX_BATCH)
    _check_int(max_attempts, "max_attempts", 1, 1000)
    if retry is not None and not isinstance(retry, Backoff):
        raise ConfigError(f"consumer {name!r}: retry must be a Backoff", field="retry")
    if isinstance(slice_seconds, bool) or not isinstance(slice_seconds, (int, float)) or not (
            0 < slice_seconds <= 3600):
        raise ConfigError(f"consumer {name!r}: slice_seconds must be above 0 and at most 3600",
                          field="slice_seconds")
    consumer = Consumer(
        name=name, source=source, process=process, batch_size=batch_size, queue=queue,
        retry=retry or DEFAULT_RETRY, max_attempts=max_attempts, slice=float(slice_seconds),
        app=app,
    )

    def run(ctx: Attempt, args: dict[str, Any]) -> dict[str, Any]:
        from forklift._features.consumers.run import Runner

        return Runner(consumer, ctx).run()

    run.__qualname__ = run.__name__ = "consume"
    consumer.kind = app.job(
        name=name, queue=queue, max_attempts=max_attempts, retry=consumer.retry,
        concurrency=[Key(lambda _args: name, limit=1, name=f"consumer:{name}")],
    )(run)
    registry = _CONSUMERS.setdefault(app, {})
    registry[name] = consumer
    if SUPERVISE_KIND not in app.kinds:
        _declare_supervisor_kind(app)
    consumer.supervisor = app.schedule(app.kind(SUPERVISE_KIND), cron=every,
                                       name=f"{name}.supervisor", args={"consumer": name})
    return consumer


def _declare_supervisor_kind(app: ConsumerHost) -> None:
    def supervise(ctx: Attempt, args: dict[str, Any]) -> dict[str, Any]:
        wanted = args.get("consumer")
        consumer = _CONSUMERS.get(app, {}).get(wanted) if isinstance(wanted, str) else None
        if consumer is None:
            raise Fail("unknown_consumer", f"this worker's app declares no consumer {wanted!r}")
        job = consumer.start()
        if job is None:
            return {"consumer": consumer.name, "paused": True}
        return {"consumer": consumer.name, "job": job.id, "state": job.state}

    app.job(name=SUPERVISE_KIND, queue=DEFAULT_QUEUE, max_attempts=3,
            failure_codes=["unknown_consumer"])(supervise)


def cursor_text(cursor: Any) -> str:
    """A cursor as stored (JSON), or a ConfigError naming the field."""
    try:
        return json.dumps(cursor)
    except (TypeError, ValueError):
        raise ConfigError(f"a consumer's cursor must be JSON, not {type(cursor).__name__}",
                          field="cursor") from None
