"""A declared consumer: its source, its processing, how it runs and backs off, and how a run
is started.

Declared by ``app.consumer`` (:mod:`forklift._features.consumers.declare`, which says how the
pieces fit); :meth:`Consumer.start` is what each supervisor tick does."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import psycopg

from forklift._base.errors import ConfigError
from forklift._base.retry import Backoff
from forklift._db.sqltext import render
from forklift._features.consumers.source import Source
from forklift._features.host import Host, Kind

if TYPE_CHECKING:
    from psycopg_pool import ConnectionPool

    from forklift._jobs.job import Job

__all__ = [
    "DEFAULT_EVERY", "DEFAULT_QUEUE", "DEFAULT_RETRY", "MAX_BATCH", "SLICE", "SUPERVISE_KIND",
    "Consumer", "ConsumerHost", "Processor", "RunKind", "cursor_text", "unique_key",
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
DEFINED_SQL = "SELECT kind, queue, supervisor, batch_size FROM {s}.consumers WHERE name = %s"
# The back-off's end on the database's clock (None once it passed), like every other time.
STATE_SQL = """
SELECT paused, CASE WHEN retry_at > now() THEN retry_at END FROM {s}.consumers WHERE name = %s
"""


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
        """Record (or refresh) the consumer's row, on ``conn`` and in its transaction. A row
        that already says the same is only read: the upsert would wait for a batch in flight,
        which holds the row."""
        wanted = (self.kind.name, self.queue, getattr(self.supervisor, "name", None),
                  self.batch_size)
        got = conn.execute(render(DEFINED_SQL, self.app.schema), (self.name,)).fetchone()
        if got is None or tuple(got) != wanted:
            conn.execute(render(DEFINE_SQL, self.app.schema), (self.name, *wanted))

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
            return self.kind.enqueue({}, conn=conn, unique_key=unique_key(self.name), at=retry_at)


def cursor_text(cursor: Any) -> str:
    """A cursor as stored (JSON), or a ConfigError naming the field."""
    try:
        return json.dumps(cursor)
    except (TypeError, ValueError):
        raise ConfigError(f"a consumer's cursor must be JSON, not {type(cursor).__name__}",
                          field="cursor") from None
