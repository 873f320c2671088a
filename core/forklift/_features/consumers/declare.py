"""Declaring a consumer (``app.consumer``): the kind that runs it and the schedule that
supervises it, both from forklift's own primitives.

- a job kind named like the consumer, whose run reads batches from the source and processes
  them, each batch in one transaction with the cursor it moves
  (:mod:`forklift._features.consumers.run`); the kind has a per-key concurrency limit of one,
  so across the fleet at most one run of a consumer is ever running, whatever was enqueued;
- a cron schedule ``<name>.supervisor`` (every minute by default) whose job starts a run unless
  the consumer is paused: an enqueue under the unique key ``consumer:<name>``, so while a run
  is live (running, snoozing between slices, waiting for its retry) it starts nothing more.

A run that finds nothing new ends; the next supervisor tick starts another. A run that fails
backs off: the consumer's failure streak sets the delay (its ``retry`` backoff), and a
supervisor tick while it backs off starts the next run no sooner than that.
"""

from __future__ import annotations

import inspect
import weakref
from typing import Any

from forklift._base.errors import ConfigError
from forklift._base.names import check_name
from forklift._base.retry import Backoff, Fail
from forklift._features.consumers.consumer import (
    DEFAULT_EVERY,
    DEFAULT_QUEUE,
    DEFAULT_RETRY,
    MAX_BATCH,
    SLICE,
    SUPERVISE_KIND,
    Consumer,
    ConsumerHost,
    Processor,
)
from forklift._features.consumers.run import Runner
from forklift._features.consumers.source import Source
from forklift._features.flow.keys import Key
from forklift._jobs.attempt import Attempt  # the handlers' annotations are read at declaration

__all__ = ["declare"]


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


