"""The database's health as forklift depends on it, with alerts that say what to do.

One call (:func:`health`) reads, all from PostgreSQL's statistics views and never from the job
rows themselves (so its cost does not grow with retained history): per forklift table the dead
row ratio and the last (auto)vacuum and analyze; the jobs table's HOT update ratio; index sizes;
the NOTIFY queue's fill; connections by forklift purpose against ``max_connections``; sessions
waiting on locks of forklift tables; and the holders of the xmin horizon
(:mod:`forklift.ops.horizon`); the retention backlog, finished jobs older than their window
that the leader has not pruned (a bounded count on the finished-jobs index); and starvation,
the oldest waiting job of each queue and priority (:mod:`forklift.ops.starvation`, a loose
index scan of the claim index). Thresholds have
documented defaults and are changed with :func:`set_threshold` (``forklift health set NAME
VALUE``), stored in ``{schema}.settings``.

Every report also carries :attr:`Health.checks`: one verdict per area (the horizon,
connections, locks, the NOTIFY queue, bloat, retention), each with its level and the same
advice as its alerts, so the CLI, the console and scripts say the same thing in the same words.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

import psycopg

from forklift._db.sqltext import render
from forklift.ops import horizon as _horizon
from forklift.ops import retention as _retention
from forklift.ops import settings as _settings
from forklift.ops import starvation as _starvation
from forklift.ops.context import OpsContext
from forklift.ops.horizon import HorizonHolder
from forklift.ops.queues import QueueInfo, list_queues
from forklift.ops.replica import ReplicaStatus
from forklift.ops.settings import InvalidSetting, Setting
from forklift.ops.shape import Shape
from forklift.ops.starvation import OldestWait

__all__ = [
    "CRITICAL_FACTOR",
    "LEVELS",
    "PREFIX",
    "THRESHOLDS",
    "Alert",
    "Blocker",
    "Check",
    "Connections",
    "Health",
    "IndexHealth",
    "LockWait",
    "TableHealth",
    "alerts",
    "checks",
    "health",
    "lock_advice",
    "replica_check",
    "set_threshold",
    "starvation_alerts",
    "threshold",
    "thresholds",
]

PREFIX = "health."

#: Every threshold: name, default, bounds, meaning (the production guide lists them).
THRESHOLDS: dict[str, Setting] = {s.name: s for s in (
    Setting("dead_tuple_ratio", 0.2, 0.0, 1.0,
            "alert when dead rows are more than this fraction of a table's rows"),
    Setting("dead_tuple_min", 10_000, 0, 1e12,
            "...and there are at least this many dead rows"),
    Setting("hot_ratio_min", 0.5, 0.0, 1.0,
            "alert when fewer of the jobs table's updates than this fraction are HOT"),
    Setting("hot_min_updates", 10_000, 0, 1e12,
            "...counted once the table has had this many updates"),
    Setting("notify_queue_usage", 0.5, 0.0, 1.0,
            "alert when the NOTIFY queue is fuller than this fraction"),
    Setting("connections_ratio", 0.8, 0.0, 1.0,
            "alert when client connections exceed this fraction of max_connections"),
    Setting("lock_wait_seconds", 5.0, 0.0, 86_400.0,
            "alert on a session waiting longer than this for a lock on a forklift table"),
    Setting("horizon_seconds", 300.0, 0.0, 30 * 86_400.0,
            "alert when the xmin horizon is held by a transaction older than this"),
    Setting("horizon_xids", 1_000_000, 0, 2e9,
            "...or held back by more than this many transactions (slots included)"),
    Setting("retention_backlog", 10_000, 0, 1e12,
            "alert when more finished jobs than this are an hour past their retention window"),
    Setting("starvation_seconds", 600.0, 1.0, 30 * 86_400.0,
            "alert when a queue's oldest waiting job of some priority has waited longer than"
            " this (seconds)"),
)}

#: The levels of a report, best first; ``forklift health --json`` exits with the index (0, 1, 2).
LEVELS = ("ok", "warning", "critical")
#: An alert is critical when what it measures is this many times past its threshold (a horizon
#: held or a lock waited on that long), and at once for the two that make enqueues or
#: connections fail: a NOTIFY queue 90% full, connections at 95% of the usable ones.
CRITICAL_FACTOR = 10.0
NOTIFY_CRITICAL = 0.9
CONNECTIONS_CRITICAL = 0.95

TABLES_SQL = """
SELECT relname::text, n_live_tup, n_dead_tup, n_tup_upd, n_tup_hot_upd, n_mod_since_analyze,
       last_vacuum, last_autovacuum, last_analyze, last_autoanalyze,
       vacuum_count + autovacuum_count, pg_relation_size(relid), pg_total_relation_size(relid)
FROM pg_stat_user_tables WHERE schemaname = %s ORDER BY relname
"""

INDEXES_SQL = """
SELECT t.relname::text, i.relname::text, pg_relation_size(i.oid), coalesce(s.idx_scan, 0)
FROM pg_index x
JOIN pg_class i ON i.oid = x.indexrelid
JOIN pg_class t ON t.oid = x.indrelid
JOIN pg_namespace n ON n.oid = t.relnamespace
LEFT JOIN pg_stat_user_indexes s ON s.indexrelid = x.indexrelid
WHERE n.nspname = %s
ORDER BY 1, 2
"""

# Server-wide client connections against the limit, and this database's forklift sessions by
# purpose: the last `:word` of an application_name holding `forklift:` anywhere (forklift
# appends its tag to an application_name the user set).
CONNECTIONS_SQL = """
SELECT current_setting('max_connections')::int,
       current_setting('superuser_reserved_connections')::int,
       (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend')::int,
       coalesce((
           SELECT jsonb_object_agg(purpose, n) FROM (
               SELECT regexp_replace(application_name, '^.*forklift:(.*:)?([a-z_]+).*$', '\\2')
                          AS purpose, count(*) AS n
               FROM pg_stat_activity
               WHERE datname = current_database() AND application_name LIKE '%%forklift:%%'
                 AND pid <> pg_backend_pid()
               GROUP BY 1) p), '{}'::jsonb),
       pg_notification_queue_usage()
"""

# Sessions waiting on a lock while they touch a forklift table (a waiter on a row holds its
# table's lock and waits on the holder's transaction, so both kinds are caught), and who blocks
# each: the session, its state and since when its transaction is open.
LOCK_WAITS_SQL = """
SELECT a.pid, a.application_name, a.wait_event,
       extract(epoch FROM now() - coalesce(
           (SELECT min(w.waitstart) FROM pg_locks w WHERE w.pid = a.pid AND NOT w.granted),
           a.state_change))::float8,
       pg_blocking_pids(a.pid),
       (SELECT array_agg(DISTINCT c.relname::text ORDER BY c.relname::text)
        FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
        WHERE l.pid = a.pid AND c.relnamespace = n.oid),
       left(a.query, 300),
       (SELECT coalesce(jsonb_agg(jsonb_build_object(
                   'pid', b.pid, 'application', b.application_name, 'state', b.state,
                   'since', b.xact_start, 'query', left(b.query, 300)) ORDER BY b.pid), '[]')
        FROM pg_stat_activity b WHERE b.pid = ANY(pg_blocking_pids(a.pid)))
FROM pg_stat_activity a, pg_namespace n
WHERE n.nspname = %s AND a.datname = current_database() AND a.wait_event_type = 'Lock'
  AND EXISTS (SELECT 1 FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
              WHERE l.pid = a.pid AND c.relnamespace = n.oid)
ORDER BY 4 DESC
"""


# Finished jobs of one state past its window by more than RETENTION_GRACE, counted up to a cap
# by an index-only walk of jobs_finished_idx (state, finished_at) that stops at the cap. Queues
# with a window of their own for the state are left out ({skip}; that needs the rows, so only
# when there are such queues).
RETENTION_BACKLOG_SQL = """
SELECT count(*) FROM (
    SELECT 1 FROM {s}.jobs
    WHERE state = %(state)s AND finished_at < now() - make_interval(secs => %(secs)s)
      {skip}
    LIMIT %(cap)s) x
"""
_SKIP_QUEUES = "AND queue <> ALL(%(skip)s::text[])"
#: The leader prunes in passes; a job this long past its window is overdue, not merely next.
RETENTION_GRACE = 3_600.0
#: Counted up to this many per state (or one past the threshold, if that is more): enough to
#: say "over the threshold", and a bound on the entries one health read may walk (the console
#: reads health every 10 s).
RETENTION_CAP = 20_000


@dataclass(frozen=True)
class TableHealth(Shape):
    table: str
    live_rows: int
    dead_rows: int
    #: dead / (live + dead); 0 for an empty table.
    dead_ratio: float
    updates: int
    hot_updates: int
    #: hot / updates; None before the first update.
    hot_ratio: float | None
    modified_since_analyze: int
    last_vacuum: datetime | None
    last_autovacuum: datetime | None
    last_analyze: datetime | None
    last_autoanalyze: datetime | None
    vacuums: int
    size_bytes: int
    total_bytes: int

    @classmethod
    def from_row(cls, r: tuple[Any, ...]) -> TableHealth:
        live, dead, upd, hot = int(r[1]), int(r[2]), int(r[3]), int(r[4])
        return cls(r[0], live, dead, dead / (live + dead) if live + dead else 0.0, upd, hot,
                   hot / upd if upd else None, *r[5:])


@dataclass(frozen=True)
class IndexHealth(Shape):
    table: str
    index: str
    size_bytes: int
    scans: int


@dataclass(frozen=True)
class Connections(Shape):
    max_connections: int
    superuser_reserved: int
    #: Client sessions on the whole server.
    in_use: int
    #: This database's forklift sessions by purpose (claim, complete, listen, ops...).
    forklift: dict[str, int]

    @property
    def ratio(self) -> float:
        usable = max(1, self.max_connections - self.superuser_reserved)
        return self.in_use / usable


@dataclass(frozen=True)
class Blocker(Shape):
    """A session holding a lock another one waits for."""

    pid: int
    application: str | None
    #: active, idle in transaction...
    state: str | None
    #: When its transaction began.
    since: datetime | None
    query: str | None


@dataclass(frozen=True)
class LockWait(Shape):
    pid: int
    application: str | None
    wait_event: str | None
    waiting_seconds: float
    blocked_by: list[int]
    tables: list[str]
    query: str | None
    #: The sessions in ``blocked_by``, as far as they are still there.
    blockers: list[Blocker] = field(default_factory=list)

    @property
    def action(self) -> str:
        return lock_advice(self)


@dataclass(frozen=True)
class Alert(Shape):
    #: Stable: dead_tuples, hot_updates, notify_queue, connections, lock_wait, horizon_held,
    #: retention_backlog, starvation, queue_full
    code: str
    #: The table, pid, slot or setting it is about.
    subject: str
    message: str
    #: What to do about it.
    action: str
    #: warning: worth a look; critical: forklift fails, or soon will, until someone acts.
    level: str = "warning"


@dataclass(frozen=True)
class Check(Shape):
    """One area's verdict: what was measured and, when something is wrong, what to do."""

    #: Stable: horizon, connections, locks, notify_queue, bloat, retention, starvation,
    #: backpressure, replica
    name: str
    #: ok, warning or critical (one of :data:`LEVELS`)
    level: str
    #: What was measured, in one line.
    summary: str
    #: What to do (the alert's advice, or the holder's); None when there is nothing to do.
    action: str | None = None

    @property
    def title(self) -> str:
        return CHECK_TITLES.get(self.name, self.name.replace("_", " "))


#: The areas a report judges, in the order a person on call reads them, and their names.
CHECK_TITLES = {
    "horizon": "xmin horizon",
    "locks": "blocking locks",
    "connections": "connections",
    "notify_queue": "NOTIFY queue",
    "bloat": "table bloat",
    "retention": "retention backlog",
    "starvation": "starvation",
    "backpressure": "backpressure",
    "replica": "replica",
}


@dataclass(frozen=True)
class Health(Shape):
    tables: list[TableHealth]
    indexes: list[IndexHealth]
    connections: Connections
    #: pg_notification_queue_usage(): 0..1
    notify_queue_usage: float
    lock_waits: list[LockWait]
    #: The oldest holders of the xmin horizon, the oldest first.
    horizon: list[HorizonHolder]
    thresholds: dict[str, float]
    #: The retention windows the leader prunes by (forklift retention show).
    retention: _retention.Retention
    alerts: list[Alert] = field(default_factory=list)
    #: The worst alert's level, or ``ok`` (one of :data:`LEVELS`).
    level: str = "ok"
    #: state -> finished jobs more than an hour past their retention window (not yet pruned).
    retention_backlog: dict[str, int] = field(default_factory=dict)
    #: One verdict per area, with what to do (:func:`checks`).
    checks: list[Check] = field(default_factory=list)
    #: Per queue and priority, the oldest waiting (available) job's wait.
    oldest_waits: list[OldestWait] = field(default_factory=list)
    #: Queues past their ceiling (forklift queues ceiling): their enqueues are refused, wait
    #: or shed.
    full_queues: list[QueueInfo] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.alerts

    @property
    def exit_code(self) -> int:
        """0 ok, 1 warning, 2 critical: what ``forklift health --json`` exits with."""
        return LEVELS.index(self.level)

    def table(self, name: str) -> TableHealth | None:
        return next((t for t in self.tables if t.table == name), None)


def thresholds(
    conn: psycopg.Connection[Any], ctx: OpsContext, overrides: dict[str, float] | None = None
) -> dict[str, float]:
    """Every threshold in force: defaults, then stored settings, then ``overrides``."""
    values = {name: s.default for name, s in THRESHOLDS.items()}
    for name, value in _settings.read(conn, ctx, PREFIX).items():
        short = name[len(PREFIX):]
        if short in values:
            values[short] = value
    for name, value in (overrides or {}).items():
        values[name] = threshold(name).check(float(value))
    return values


def threshold(name: str) -> Setting:
    found = THRESHOLDS.get(name)
    if found is None:
        raise InvalidSetting(
            f"{name!r} is not a health threshold; they are: {', '.join(THRESHOLDS)}",
            setting=name,
        )
    return found


def set_threshold(
    conn: psycopg.Connection[Any], ctx: OpsContext, name: str, value: float | None,
    *, reason: str | None = None,
) -> dict[str, float]:
    """Store a threshold (None: back to its default); audited. Returns the thresholds."""
    s = threshold(name)
    _settings.store(conn, ctx, replace(s, name=PREFIX + s.name), value, reason=reason)
    return thresholds(conn, ctx)


def health(
    conn: psycopg.Connection[Any], ctx: OpsContext, *, overrides: dict[str, float] | None = None
) -> Health:
    limits = thresholds(conn, ctx, overrides)
    tables = [TableHealth.from_row(r) for r in conn.execute(TABLES_SQL, (ctx.schema,))]
    indexes = [IndexHealth(*r) for r in conn.execute(INDEXES_SQL, (ctx.schema,))]
    row = conn.execute(CONNECTIONS_SQL).fetchone()
    assert row is not None
    connections = Connections(int(row[0]), int(row[1]), int(row[2]),
                              {str(k): int(v) for k, v in sorted(dict(row[3]).items())})
    waits = [LockWait(r[0], r[1], r[2], float(r[3]), list(r[4] or []), list(r[5] or []), r[6],
                      [_blocker(b) for b in r[7] or []])
             for r in conn.execute(LOCK_WAITS_SQL, (ctx.schema,))]
    holders = _horizon.holders(conn, ctx)
    windows = _retention.show(conn, ctx)
    h = Health(tables, indexes, connections, float(row[4]), waits, holders, limits, windows,
               retention_backlog=retention_backlog(
                   conn, ctx, windows, max(RETENTION_CAP, int(limits["retention_backlog"]) + 1)),
               oldest_waits=_starvation.oldest_waits(conn, ctx),
               full_queues=[q for q in list_queues(conn, ctx) if q.full_by is not None])
    found = alerts(h)
    h = replace(h, alerts=found, level=level(found))
    return replace(h, checks=checks(h))


def _blocker(b: dict[str, Any]) -> Blocker:
    since = b.get("since")
    return Blocker(int(b["pid"]), b.get("application"), b.get("state"),
                   datetime.fromisoformat(since) if isinstance(since, str) else None,
                   b.get("query"))


def retention_backlog(
    conn: psycopg.Connection[Any], ctx: OpsContext, windows: _retention.Retention,
    cap: int = RETENTION_CAP,
) -> dict[str, int]:
    """Finished jobs more than :data:`RETENTION_GRACE` past their state's window, per state
    (a state kept forever has none); at most :data:`RETENTION_CAP` each."""
    found: dict[str, int] = {}
    for state, seconds in windows.defaults.items():
        if seconds is None:
            continue
        skip = sorted({w.queue for w in windows.queues if w.state == state and w.queue})
        text = RETENTION_BACKLOG_SQL.replace("{skip}", _SKIP_QUEUES if skip else "")
        row = conn.execute(render(text, ctx.schema), {
            "state": state, "secs": seconds + RETENTION_GRACE, "skip": skip,
            "cap": cap}).fetchone()
        found[state] = int(row[0]) if row else 0
    return found


def level(found: list[Alert]) -> str:
    """The worst level among ``found``: ``ok`` when there is none."""
    return max((a.level for a in found), key=LEVELS.index, default="ok")


def alerts(h: Health) -> list[Alert]:
    """Each threshold crossed, as an alert naming the subject and what to do."""
    t = h.thresholds
    found: list[Alert] = []
    for holder in h.horizon:
        old = holder.age_seconds is not None and holder.age_seconds > t["horizon_seconds"]
        far = holder.xid_age is not None and holder.xid_age > t["horizon_xids"]
        if not (old or far):
            continue
        critical = ((holder.age_seconds or 0) > CRITICAL_FACTOR * t["horizon_seconds"]
                    or (holder.xid_age or 0) > CRITICAL_FACTOR * t["horizon_xids"])
        who = holder.name if holder.pid is None else f"pid {holder.pid}"
        age = f"{holder.age_seconds:,.0f}s, " if holder.age_seconds is not None else ""
        found.append(Alert(
            "horizon_held", f"{holder.kind} {who}",
            f"a {holder.kind.replace('_', ' ')} ({who}, {holder.application or holder.role or '?'},"
            f" {holder.state or '?'}) holds the xmin horizon: {age}{holder.xid_age or 0:,}"
            " transactions back; vacuum cannot remove dead jobs meanwhile",
            holder.action + " (details: forklift health horizon)",
            "critical" if critical else "warning",
        ))
    for tab in h.tables:
        if tab.dead_rows >= t["dead_tuple_min"] and tab.dead_ratio > t["dead_tuple_ratio"]:
            last = max((d for d in (tab.last_vacuum, tab.last_autovacuum) if d), default=None)
            found.append(Alert(
                "dead_tuples", tab.table,
                f"{tab.table}: {tab.dead_rows:,} dead rows ({tab.dead_ratio:.0%}), last vacuum"
                f" {last.isoformat(timespec='seconds') if last else 'never'}",
                "look for a horizon holder first (forklift health horizon); if there is none,"
                f" autovacuum is behind: VACUUM (VERBOSE) {tab.table}; and check"
                " autovacuum_max_workers and autovacuum_vacuum_cost_limit",
            ))
    jobs = h.table("jobs")
    if (jobs is not None and jobs.hot_ratio is not None and jobs.updates >= t["hot_min_updates"]
            and jobs.hot_ratio < t["hot_ratio_min"]):
        found.append(Alert(
            "hot_updates", "jobs",
            f"only {jobs.hot_ratio:.0%} of the jobs table's updates are HOT: heartbeats and"
            " claims are writing index entries",
            "pages are full: check the table's fillfactor (forklift sets 70) and that nothing"
            " added an index on a column heartbeats write (lease_expires_at, progress)",
        ))
    if h.notify_queue_usage > t["notify_queue_usage"]:
        found.append(Alert(
            "notify_queue", "pg_notify",
            f"the NOTIFY queue is {h.notify_queue_usage:.0%} full; at 100% every enqueue fails",
            "a session that LISTENs is not reading its notifications (often one stuck in a long"
            " transaction): find it in pg_stat_activity and end it",
            "critical" if h.notify_queue_usage >= NOTIFY_CRITICAL else "warning",
        ))
    c = h.connections
    if c.ratio > t["connections_ratio"]:
        mine = ", ".join(f"{k} {v}" for k, v in c.forklift.items()) or "none"
        found.append(Alert(
            "connections", "max_connections",
            f"{c.in_use} of {c.max_connections - c.superuser_reserved} usable connections in use"
            f" (forklift here: {mine})",
            "fewer worker processes (raise --concurrency instead), a pooler in front of the"
            " clients, or raise max_connections",
            "critical" if c.ratio >= CONNECTIONS_CRITICAL else "warning",
        ))
    for w in h.lock_waits:
        if w.waiting_seconds > t["lock_wait_seconds"]:
            found.append(Alert(
                "lock_wait", f"pid {w.pid}",
                f"pid {w.pid} ({w.application or '?'}) has waited {w.waiting_seconds:,.0f}s for"
                f" a lock on {', '.join(w.tables)}, blocked by {w.blocked_by or 'unknown'}",
                lock_advice(w),
                "critical" if w.waiting_seconds > CRITICAL_FACTOR * t["lock_wait_seconds"]
                else "warning",
            ))
    over = sum(h.retention_backlog.values())
    if over > t.get("retention_backlog", THRESHOLDS["retention_backlog"].default):
        found.append(Alert(
            "retention_backlog", "retention",
            f"{'at least ' if max(h.retention_backlog.values(), default=0) >= RETENTION_CAP else ''}"
            f"{over:,} finished jobs are more than {RETENTION_GRACE / 3600:g}h past their"
            f" retention window ({_by_state(h.retention_backlog)}); they stay in the jobs table"
            " and its indexes",
            RETENTION_ADVICE,
        ))
    found += starvation_alerts(h.oldest_waits, t.get(
        "starvation_seconds", THRESHOLDS["starvation_seconds"].default))
    found += [full_alert(q) for q in h.full_queues]
    return found


def full_alert(q: QueueInfo) -> Alert:
    """A queue past its ceiling: producers are refused, wait or shed until workers catch up."""
    if q.full_by == "depth":
        figure = f"{q.measured_depth or 0:,} jobs waiting, at its ceiling of {q.ceiling_depth:,}"
    else:
        figure = (f"its oldest job has waited {q.measured_age or 0:,.0f}s, past its ceiling of"
                  f" {q.ceiling_age or 0:g}s")
    name = shlex.quote(q.name)
    return Alert(
        "queue_full", q.name,
        f"queue {q.name} is full ({figure}): its enqueues are refused, wait or shed",
        f"add capacity so workers drain it (more workers on the queue or a higher --concurrency;"
        f" forklift queues explain {name} says what holds it), or, if producers may bury it for"
        f" good reason, raise the ceiling: forklift queues ceiling {name} --depth N (lift it:"
        " --off)",
    )


def starvation_alerts(waits: list[OldestWait], limit: float) -> list[Alert]:
    """One alert per queue whose oldest job of some priority has waited past ``limit``: the
    longest such wait, the priorities over it, and what to do (aging, or capacity)."""
    by_queue: dict[str, list[OldestWait]] = {}
    for w in waits:
        if w.wait_seconds > limit:
            by_queue.setdefault(w.queue, []).append(w)
    found = []
    for queue, over in by_queue.items():
        worst = max(over, key=lambda w: w.wait_seconds)
        others = [w.priority for w in over if w is not worst]
        also = f" (also over {limit:,.0f}s: priority {', '.join(map(str, others))})" if others else ""
        found.append(Alert(
            "starvation", queue,
            f"queue {queue}: the oldest job of priority {worst.priority} has waited"
            f" {worst.wait_seconds:,.0f}s{also}",
            starvation_advice(queue, worst),
            "critical" if worst.wait_seconds > CRITICAL_FACTOR * limit else "warning",
        ))
    return found


def starvation_advice(queue: str, w: OldestWait) -> str:
    """Aging first when it is off (higher priorities may be taking every slot), capacity
    always."""
    name = shlex.quote(queue)
    capacity = (f"add capacity: more workers on the queue or a higher --concurrency (forklift"
                f" queues explain {name} says what holds it)")
    if w.aging_seconds is None:
        return (f"if higher priorities take every slot, turn on priority aging: forklift queues"
                f" aging {name} 30s; else {capacity}")
    return f"priority aging is on (a step every {w.aging_seconds:g}s); {capacity}"


RETENTION_ADVICE = (
    "the elected leader prunes them: check that a worker runs this app (forklift workers) and"
    " its logs for the retention chore; to catch up now: forklift prune"
    " --completed-older-than 1d (a dry run first: --dry-run)"
)


def _by_state(counts: dict[str, int]) -> str:
    return ", ".join(f"{k} {v:,}" for k, v in counts.items() if v) or "none"


def lock_advice(w: LockWait) -> str:
    """What to do about a session waiting on a lock: find what its blocker does, end it."""
    if w.blockers:
        b = w.blockers[0]
        doing = (f"pid {b.pid} ({b.application or '?'}, {b.state or '?'}) holds the lock;"
                 f" if it must not: SELECT pg_terminate_backend({b.pid});")
        if b.state == "active":
            doing += f" or cancel its statement: SELECT pg_cancel_backend({b.pid});"
        return doing
    return ("find what the blocker does: SELECT pid, state, query FROM pg_stat_activity"
            f" WHERE pid = ANY(ARRAY{w.blocked_by or [0]}); end it with"
            " pg_terminate_backend(pid) if it must not hold the lock")


def checks(h: Health) -> list[Check]:
    """One verdict per area: its worst alert's level (``ok`` without one), what was measured,
    and the advice (the alert's, or the horizon holder's and the blocker's below the
    thresholds too: the way out is worth knowing before it is urgent)."""
    by_code: dict[str, list[Alert]] = {}
    for a in h.alerts:
        by_code.setdefault(a.code, []).append(a)

    def verdict(name: str, codes: tuple[str, ...], summary: str, action: str | None) -> Check:
        found = [a for c in codes for a in by_code.get(c, [])]
        return Check(name, level(found), summary, found[0].action if found else action)

    out: list[Check] = []
    if h.horizon:
        x = h.horizon[0]
        who = f"pid {x.pid}" if x.pid is not None else (x.name or "?")
        since = f" open since {x.since.isoformat(timespec='seconds')}" if x.since else ""
        age = f" ({x.age_seconds:,.0f}s)" if x.age_seconds is not None else ""
        summary = (f"held by {x.kind.replace('_', ' ')} {who} ({x.application or x.role or '?'},"
                   f" {x.state or '?'}){since}{age}, {x.xid_age or 0:,} transactions back")
        out.append(verdict("horizon", ("horizon_held",), summary, x.action))
    else:
        out.append(verdict("horizon", ("horizon_held",), "nothing holds it back", None))
    if h.lock_waits:
        w = h.lock_waits[0]
        more = f" (and {len(h.lock_waits) - 1} more)" if len(h.lock_waits) > 1 else ""
        summary = (f"pid {w.pid} ({w.application or '?'}) has waited {w.waiting_seconds:,.1f}s"
                   f" on {', '.join(w.tables) or '?'}, blocked by"
                   f" {', '.join(f'pid {p}' for p in w.blocked_by) or 'unknown'}{more}")
        out.append(verdict("locks", ("lock_wait",), summary, w.action))
    else:
        out.append(verdict("locks", ("lock_wait",), "no session waits on a forklift table", None))
    c = h.connections
    mine = ", ".join(f"{k} {v}" for k, v in c.forklift.items()) or "none"
    out.append(verdict(
        "connections", ("connections",),
        f"{c.in_use} of {c.max_connections - c.superuser_reserved} usable in use"
        f" ({c.ratio:.0%}; max_connections {c.max_connections}); forklift here: {mine}", None))
    out.append(verdict("notify_queue", ("notify_queue",),
                       f"{h.notify_queue_usage:.1%} full", None))
    worst = max(h.tables, key=lambda x: x.dead_ratio, default=None)
    bloat = (f"most dead rows: {worst.table} {worst.dead_rows:,} ({worst.dead_ratio:.0%})"
             if worst is not None and worst.dead_rows else "no dead rows to speak of")
    out.append(verdict("bloat", ("dead_tuples", "hot_updates"), bloat, None))
    out.append(verdict("retention", ("retention_backlog",),
                       f"overdue for pruning: {_by_state(h.retention_backlog)}", None))
    oldest = max(h.oldest_waits, key=lambda w: w.wait_seconds, default=None)
    out.append(verdict(
        "starvation", ("starvation",),
        f"oldest waiting job: queue {oldest.queue}, priority {oldest.priority},"
        f" {oldest.wait_seconds:,.0f}s" if oldest is not None else "no job waits", None))
    full = [q.name for q in h.full_queues]
    out.append(verdict(
        "backpressure", ("queue_full",),
        f"full (past their ceiling): {', '.join(full)}" if full else "no queue is full", None))
    return out


def replica_check(status: ReplicaStatus | None) -> Check | None:
    """The replica the reads go to, judged: None without one."""
    if status is None:
        return None
    lag = f"lag {status.lag_seconds:.1f}s" if status.lag_seconds is not None else "lag unknown"
    summary = (f"{status.target}: {status.state.replace('_', ' ')}, {lag}"
               f" (limit {status.max_lag_seconds:g}s); {status.reason}")
    if status.state in ("used", "not_asked"):
        return Check("replica", "ok", summary)
    action = REPLICA_ADVICE.get(status.state, REPLICA_ADVICE["unreachable"])
    return Check("replica", "warning", summary, action)


#: What to do when the replica cannot serve the reads (they go to the primary meanwhile).
REPLICA_ADVICE = {
    "lagging": "reads go to the primary until it catches up: on the primary, SELECT"
               " application_name, replay_lag FROM pg_stat_replication; look for a long"
               " query on the standby or a slow disk or network",
    "lag_unknown": "the standby replays nothing and is not streaming: check its connection"
                   " to the primary (primary_conninfo) and its log",
    "catching_up": "it has not yet replayed a change made here, or what the primary showed"
                   " while it was passed over: wait a moment",
    "read_failed": "a read conflicted with recovery: raise max_standby_streaming_delay on the"
                   " standby or turn on hot_standby_feedback",
    "not_standby": "that server is not a standby (promoted, or a primary given as the"
                   " replica): fix --replica-dsn",
    "unreachable": "check that the standby runs and that --replica-dsn points at it",
}
