"""Reading a stats snapshot the way an on-call person would: what is wrong, where, since when.

Pure functions of operator-API results and the console's clock, so they are tested without a
terminal and both the overview and the queues screen say the same thing.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from rich.text import Text

from forklift.ops.dead import DeadGroup
from forklift.ops.health import Alert as HealthAlert
from forklift.ops.health import Health
from forklift.ops.jobs import JobSummary
from forklift.ops.stats import LAG_SECONDS, QueueStats, Stats
from forklift_console.widgets.filterbar import quote
from forklift_console.widgets.text import (
    age,
    duration,
    ident,
    idents,
    one_line,
    plural,
    style_of,
)

#: The oldest available job of a queue waiting longer than this raises an alert.
LAG_ALERT_SECONDS = LAG_SECONDS
#: Dead letters in the most recent buckets that count as "growing".
DEAD_RECENT_BUCKETS = 10


def queue_state(q: QueueStats) -> str:
    """paused, no_worker, failing, lagging, active or idle: decided by the operator API
    (forklift.ops.stats.queue_state), so the CLI, the console and scripts agree."""
    return q.state


def window_span(stats: Stats) -> str:
    """``30 min``: how far back the stats reach, for a sentence (an alert) to say."""
    window = stats.window_seconds
    return f"{window / 60:g} min" if window < 7200 else f"{window / 3600:g} h"


def window_label(stats: Stats) -> str:
    """``last 30 min, 1 point per minute``: the window a sparkline covers, named (a chart's
    caption: a sentence says :func:`window_span` instead)."""
    bucket = stats.bucket_seconds
    step = "minute" if bucket == 60 else duration(bucket)
    return f"last {window_span(stats)}, 1 point per {step}"


@dataclass(frozen=True)
class Alert:
    glyph: str
    style: str
    text: Text
    #: A filter for the jobs screen that shows what the alert is about (enter follows it).
    jobs_filter: str | None = None
    #: Or the screen (a mode: "health") that shows it.
    screen: str | None = None
    #: Or the queue it is about: enter opens the Queues screen on its row (p there resumes a
    #: paused queue).
    queue: str | None = None


def worker_lost_alerts(groups: list[DeadGroup]) -> list[Alert]:
    """Jobs that died worker_lost in the last hour: their worker vanished mid-attempt (killed,
    out of memory, a host gone) as many times in a row as the kind allows. Enter: the group."""
    out = []
    for g in groups:
        if g.code != "worker_lost" or not g.last_hour:
            continue
        text = Text(f"{plural(g.last_hour, 'job')} of ")
        text.append_text(ident(g.kind, limit=40))
        text.append(
            f" died worker_lost in the last hour ({g.count:,} in all): their worker vanished"
            " mid-attempt (killed, out of memory, host lost); check the workers' logs and"
            " exits (press 5)"
        )
        out.append(Alert("✖", style_of("state-dead"), text, f"group:{g.id}"))
    return out


def health_alerts(health: Health | None, error: str | None = None) -> list[Alert]:
    """The database's health alerts (forklift.ops.health), one line each; enter: Health."""
    if error is not None:
        return [Alert("?", style_of("state-warn"),
                      Text("database health unknown: ").append_text(one_line(error, limit=160)),
                      screen="health")]
    out = []
    for a in health.alerts if health is not None else []:
        if a.code == "starvation" and health is not None:
            out.append(starvation_alert(a, health))
            continue
        # The level in a word and a symbol too: a critical alert reads so without colour.
        critical = a.level == "critical"
        text = Text(f"database: {a.code.replace('_', ' ')}: {a.level}, ")
        text.append_text(one_line(a.message, limit=120))
        text.append(" — press enter for Health")
        out.append(Alert("✖" if critical else "▲",
                         style_of("state-dead" if critical else "state-warn"), text,
                         screen="health"))
    return out


def starvation_alert(a: HealthAlert, health: Health) -> Alert:
    """A queue whose oldest job of some priority has waited past the health threshold: the
    wait and what to do (turn on aging, add capacity), short enough for one line. Enter: the
    queue's waiting jobs."""
    critical = a.level == "critical"
    mine = [w for w in health.oldest_waits if w.queue == a.subject]
    text = Text("queue ")
    text.append_text(ident(a.subject, limit=40))
    if not mine:  # the report's own words, should its waits be missing
        text.append(" starving: ")
        text.append_text(one_line(a.message, limit=100))
    else:
        worst = max(mine, key=lambda w: w.wait_seconds)
        text.append(f" starving: a priority {worst.priority} job has waited"
                    f" {duration(worst.wait_seconds)}")
        if worst.aging_seconds is None:
            text.append(f" — turn on aging (forklift queues aging {quote(a.subject)} 30s) or"
                        " add capacity")
        else:
            text.append(f" — aging is on (every {duration(worst.aging_seconds)}): add capacity")
    return Alert("✖" if critical else "▲", style_of("state-dead" if critical else "state-warn"),
                 text, f"queue:{quote(a.subject)} state:available")


def alerts(stats: Stats, running: list[JobSummary], now: datetime) -> list[Alert]:
    """The alerts strip, most urgent first."""
    out: list[Alert] = []
    live = {w.id for w in stats.workers if not w.stale}
    orphans = [j for j in running if j.worker_id not in live]
    if orphans:
        queues = sorted({j.queue for j in orphans})
        text = Text(f"{plural(len(orphans), 'running job')} (queue ")
        text.append_text(idents(queues, sep=", ", limit=60))
        text.append(
            ") held by workers that stopped heartbeating: when the lease expires the leader"
            " rescues it"
        )
        out.append(Alert("⚠", style_of("state-dead"), text, "state:running"))
    recent = sum(stats.totals.series.dead[-DEAD_RECENT_BUCKETS:])
    if recent:
        minutes = DEAD_RECENT_BUCKETS * stats.bucket_seconds / 60
        total = stats.totals.counts.get("dead", 0)
        out.append(
            Alert(
                "✖",
                style_of("state-dead"),
                Text(
                    f"dead letters growing: {recent:,} in the last {minutes:g} min"
                    f" ({total:,} dead in all) — press 4"
                ),
                "state:dead",
            )
        )
    for w in stats.workers:
        if w.stale:
            text = Text("worker ")
            text.append_text(one_line(f"{w.host}:{w.pid}", limit=40))
            text.append(
                f" has not sent a heartbeat for {duration(w.heartbeat_age_seconds)}"
                f" ({plural(w.in_use, 'job')} in flight)"
            )
            out.append(Alert("⚠", style_of("state-warn"), text))
    for q in stats.queues:
        if q.paused:
            text = Text("queue ")
            text.append_text(ident(q.name, limit=40))
            text.append(" paused")
            if q.paused_by:
                text.append(" by ")
                text.append_text(ident(q.paused_by, limit=30))
            if q.paused_at is not None:
                text.append(f" {age(q.paused_at, now)} ago")
            if q.pause_reason:
                text.append(": ")
                text.append_text(one_line(q.pause_reason, limit=80))
            waiting = q.counts.get("available", 0)
            text.append(f" — {waiting:,} waiting")
            text.append(" — p resumes", style="dim")
            out.append(Alert("‖", style_of("state-paused"), text, queue=q.name))
        elif q.state == "no_worker":
            text = Text("queue ")
            text.append_text(ident(q.name, limit=40))
            waiting = q.counts.get("available", 0) + q.counts.get("retryable", 0)
            text.append(f": {plural(waiting, 'job')} waiting and no live worker listens on it"
                        f" (start one with `forklift worker --queues {quote(q.name)}`)")
            out.append(Alert("∅", style_of("state-warn"), text, f"queue:{quote(q.name)}"))
        elif q.state == "failing":
            text = Text("queue ")
            text.append_text(ident(q.name, limit=40))
            text.append(f" failing: {plural(q.failed, 'failed attempt')} and"
                        f" {q.completed:,} completed in the last {window_span(stats)}")
            out.append(Alert("✖", style_of("state-dead"), text,
                             f"queue:{quote(q.name)} state:dead,retryable"))
        elif q.pickup_lag_seconds is not None and q.pickup_lag_seconds > LAG_ALERT_SECONDS:
            text = Text("queue ")
            text.append_text(ident(q.name, limit=40))
            text.append(
                f": oldest available job has waited {duration(q.pickup_lag_seconds)}"
                f" ({q.counts.get('available', 0):,} waiting, {plural(q.workers, 'worker')}"
                f" listening, {plural(q.free_slots, 'free slot')})"
            )
            out.append(
                Alert("⚠", style_of("state-warn"), text, f"queue:{quote(q.name)} state:available")
            )
    return out
