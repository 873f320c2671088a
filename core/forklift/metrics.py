"""Prometheus metrics of a worker (extra ``metrics``: ``prometheus-client``).

``forklift worker --metrics-port 9464`` serves ``/metrics`` (beside the worker's ``/healthz`` and
``/readyz`` probes, one server for the three, unless ``--health-port`` moves the probes; the page
itself is :func:`exposition`); an app that runs its own worker or
web server calls :func:`enable` and exposes :data:`registry` itself (``asgi_app()`` for ASGI,
``prometheus_client.generate_latest(registry)`` anywhere else). Importing this module changes
nothing; a worker records metrics only when they were enabled before it started.

Label values are bounded: no job ids, no payload values, and at most :data:`MAX_LABELS`
distinct kinds and queues each (later ones are counted under ``other``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

from forklift._base.errors import ConfigError
from forklift._jobs import fullness, lifecycle

MAX_LABELS = 100
DEPTH_EVERY = 15.0  # seconds between the leader's queue depth samples

#: forklift's metrics; mount it, or pass it to prometheus_client's exposition helpers.
registry = CollectorRegistry(auto_describe=True)
_enabled = False

_DURATIONS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 1800, 3600)
_SIZES = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)

settled = Counter("forklift_jobs_settled", "Attempts settled by the worker, by outcome",
                  ["queue", "kind", "outcome"], registry=registry)
run_seconds = Histogram("forklift_job_run_seconds", "Attempt run time (start to outcome)",
                        ["queue", "kind"], buckets=_DURATIONS, registry=registry)
pickup_lag = Histogram("forklift_job_pickup_lag_seconds",
                       "From available (due) to started", ["queue"], buckets=_DURATIONS,
                       registry=registry)
claim_size = Histogram("forklift_claim_batch_size", "Jobs taken by one claim",
                       buckets=_SIZES, registry=registry)
flush_size = Histogram("forklift_flush_size", "Outcomes written by one settle statement",
                       buckets=_SIZES, registry=registry)
expired = Counter("forklift_jobs_expired",
                  "Jobs not started by their start-by deadline (dead, code expired): claimed past"
                  " it by a worker, or swept by the leader", ["queue", "kind"], registry=registry)
aged = Counter("forklift_jobs_aged",
               "Raises of a waiting job's priority by its queue's priority aging (the leader's; one"
               " raise may be several steps)", ["queue"], registry=registry)
oldest_wait = Gauge(
    "forklift_queue_oldest_wait_seconds",
    "Seconds the oldest available job of each queue and priority has waited (sampled by the"
    " leader with the depth; forklift health alerts past starvation_seconds)",
    ["queue", "priority"], registry=registry)
queue_full = Gauge(
    "forklift_queue_full",
    "1 while a queue is past its ceiling (forklift queues ceiling) and enqueues are refused,"
    " wait or shed; 0 while a ceilinged queue has room (sampled by the leader with the depth)",
    ["queue"], registry=registry)
depth = Gauge("forklift_queue_depth", "Jobs by queue and state (sampled by the leader)",
              ["queue", "state"], registry=registry)
desired_workers = Gauge(
    "forklift_queue_desired_workers",
    "Workers each queue needs now: the autoscaling signal, the SQL function desired_workers with"
    " its defaults (sampled by the leader with the depth)", ["queue"], registry=registry)


class _Bounded:
    """At most ``limit`` distinct label values; the rest become ``other``."""

    def __init__(self, limit: int = MAX_LABELS) -> None:
        self.limit = limit
        self.seen: set[str] = set()
        self.lock = threading.Lock()

    def __call__(self, value: str) -> str:
        if value in self.seen:
            return value
        with self.lock:
            if len(self.seen) < self.limit:
                self.seen.add(value)
                return value
        return "other"


_kinds = _Bounded()
_queues = _Bounded()
_priorities = _Bounded()


class _WorkerCounters(Collector):
    """Counters the worker keeps anyway (its stats), read at scrape time: free per job."""

    def __init__(self) -> None:
        self.workers: list[lifecycle.WorkerFacts] = []

    def collect(self) -> Iterable[Any]:
        fields = {
            "stale_writes": ("forklift_stale_writes", "Outcome or progress writes the fence refused"),
            "lease_lost": ("forklift_lease_renewals_lost", "Attempts whose lease was lost"),
            "rescued": ("forklift_rescued_jobs", "Jobs rescued by this worker as leader"),
            "claimed": ("forklift_claimed_jobs", "Jobs this worker claimed"),
        }
        for attr, (name, doc) in fields.items():
            family = CounterMetricFamily(name, doc, labels=["worker"])
            for w in self.workers:
                family.add_metric([w.id], float(getattr(w.stats, attr)))
            yield family
        from forklift import hooks

        calls = CounterMetricFamily("forklift_hook_problems", "Hook calls that raised, ran past"
                                    " their bound, or were dropped (queue full)", labels=["problem"])
        apps = {id(w.app): w.app for w in self.workers}
        stats = [h.stats for h in (hooks.of(a) for a in apps.values()) if h is not None]
        for problem in ("failures", "timeouts", "dropped"):
            calls.add_metric([problem], float(sum(getattr(st, problem) for st in stats)))
        yield calls


_counters = _WorkerCounters()
registry.register(_counters)


class _EnqueueRefusals(Collector):
    """Enqueues a full queue refused or shed in this process (the producer's, where enqueue
    runs), counted as they happen anyway and read at scrape time."""

    def collect(self) -> Iterable[Any]:
        family = CounterMetricFamily(
            "forklift_enqueue_refused",
            "Enqueues to a full queue (past its ceiling) not stored, by queue and reason:"
            " refused (QueueFull), timeout (a Wait ran out), shed (dropped by the kind's rule)",
            labels=["queue", "reason"])
        for (queue, reason), n in sorted(fullness.counts().items()):
            family.add_metric([_queues(queue), reason], float(n))
        yield family


registry.register(_EnqueueRefusals())


def enable() -> None:
    """Record metrics in every worker started from now on (in this process)."""
    global _enabled
    _enabled = True


def enabled() -> bool:
    return _enabled


def serve(port: int, host: str = "0.0.0.0") -> None:
    """Serve ``/metrics`` from :data:`registry` on ``host:port`` (a thread), and :func:`enable`.

    A port that cannot be had fails here, at start, naming it.
    """
    from prometheus_client import start_http_server

    try:
        start_http_server(port, addr=host, registry=registry)
    except OSError as exc:
        why = exc.strerror or str(exc)
        raise ConfigError(f"--metrics-port {port}: cannot listen on {host}:{port} ({why})",
                          port=port) from None
    enable()


def exposition() -> tuple[int, str, bytes]:
    """The ``/metrics`` page: (status, content type, body), for a server of one's own (the
    worker's probe server answers it beside ``/healthz`` and ``/readyz`` on one port)."""
    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

    return 200, CONTENT_TYPE_LATEST, generate_latest(registry)


def asgi_app() -> Callable[..., Any]:
    """An ASGI app serving :data:`registry` (mount it at ``/metrics``)."""
    from prometheus_client import make_asgi_app

    return make_asgi_app(registry=registry)


# -- the worker's side ----------------------------------------------------------------------------
def attach(life: lifecycle.Lifecycle) -> None:
    """Record this worker's attempts, claims and flushes; sample depth while it leads."""
    if not _enabled:
        return
    worker = life.worker
    _counters.workers.append(worker)
    started: dict[int, float] = {}

    def on_start(rec: lifecycle.Attempt) -> None:
        started[rec.job.fence] = time.monotonic()
        lag = rec.job.lag
        if lag is not None:
            pickup_lag.labels(_queues(rec.job.queue)).observe(max(0.0, lag))

    def on_settle(rec: lifecycle.Attempt, outcome: lifecycle.Settled) -> None:
        q, k = _queues(rec.job.queue), _kinds(rec.job.kind)
        settled.labels(q, k, outcome.next).inc()
        if outcome.code == "expired":
            expired.labels(q, k).inc()
        began = started.pop(rec.job.fence, None)
        if began is not None:
            run_seconds.labels(q, k).observe(time.monotonic() - began)

    def on_expired(jobs: Sequence[lifecycle.Rescued]) -> None:
        for job in jobs:
            expired.labels(_queues(job.queue), _kinds(job.kind)).inc()

    life.on_start.append(on_start)
    life.on_settle.append(on_settle)
    life.on_expired.append(on_expired)
    life.on_aged.append(lambda queue, n: aged.labels(_queues(queue)).inc(n))
    life.on_claim.append(claim_size.observe)
    life.on_flush.append(lambda written, refused: flush_size.observe(written))
    if worker.lead:
        life.leader_tasks.append(lifecycle.LeaderTask("metrics-depth", DEPTH_EVERY,
                                                      _sample_depth(worker.schema)))


def _sample_depth(schema: str) -> Callable[[Any], Any]:
    """The leader samples depth by queue and state, one statement for every queue; then the
    autoscaling signal of each queue, one statement for all of them (each count in it capped,
    at most MAX_LABELS queues): a bounded cost every DEPTH_EVERY seconds, none per job."""
    from forklift._db.sqltext import render
    from forklift._worker.maintenance.ceilings import CEILINGED_SQL
    from forklift.ops import scale
    from forklift.ops.starvation import MAX_GROUPS, OLDEST_SQL
    from forklift.ops.stats import COUNTS_SQL

    sql = render(COUNTS_SQL, schema)
    # The queues `forklift queues scale` lists, with the defaults it and op.queues.scale() use.
    oldest_sql = render(OLDEST_SQL, schema)
    full_sql = render(CEILINGED_SQL, schema)
    signal_sql = render(
        "SELECT name, {s}.desired_workers(name, NULL, %s, %s) FROM ("
        + scale.QUEUES_SQL + f") q ORDER BY name LIMIT {MAX_LABELS}", schema)

    async def sample(conn: Any) -> None:
        cur = await conn.execute(sql)
        rows = list(await cur.fetchall())
        seen: set[tuple[str, str]] = set()
        for queue, state, count, _ in rows:
            key = (_queues(str(queue)), str(state))
            seen.add(key)
            depth.labels(*key).set(float(count))
        for labels in _labels(depth, "queue", "state"):
            if labels not in seen:
                depth.labels(*labels).set(0.0)  # emptied since the last sample
        cur = await conn.execute(signal_sql, (scale.DEFAULT_MAX, scale.DEFAULT_TARGET))
        listed = {_queues(str(queue)): float(n) for queue, n in await cur.fetchall()}
        for queue, n in listed.items():
            desired_workers.labels(queue).set(n)
        for metric in desired_workers.collect():
            for sample_ in metric.samples:
                if sample_.labels["queue"] not in listed:
                    desired_workers.remove(sample_.labels["queue"])  # gone since the last sample
        cur = await conn.execute(oldest_sql, {"cap": MAX_GROUPS})
        waits = {(_queues(str(q)), _priorities(str(p))): float(w)
                 for q, p, w, _ in await cur.fetchall()}
        for labels, wait in waits.items():
            oldest_wait.labels(*labels).set(wait)
        for q, p in _labels(oldest_wait, "queue", "priority"):
            if (q, p) not in waits:
                oldest_wait.remove(q, p)  # none waits there since the last sample
        cur = await conn.execute(full_sql)
        fulls = {_queues(str(q)): float(by is not None) for q, d, a, by in await cur.fetchall()
                 if d is not None or a is not None or by is not None}
        for queue, flag in fulls.items():
            queue_full.labels(queue).set(flag)
        for metric in queue_full.collect():
            for sample_ in metric.samples:
                if sample_.labels["queue"] not in fulls:
                    queue_full.remove(sample_.labels["queue"])  # its ceiling was lifted

    return sample


def _labels(gauge: Gauge, first: str, second: str) -> list[tuple[str, str]]:
    return [(str(s.labels[first]), str(s.labels[second]))
            for metric in gauge.collect() for s in metric.samples]


# Enabled means imported: a worker started before this module was imported records nothing.
lifecycle.observe(attach)
