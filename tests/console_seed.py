"""A seeded forklift database for the console's snapshot and Pilot tests.

Everything is placed relative to one instant, ``now``: jobs finished over the last half hour,
dead letters in a few groups, a paused queue, a lagging queue, a draining worker with jobs in
flight, a worker gone quiet with a lease that expired, a hostile payload, audit rows. In a
fresh database the ids come out the same every time.

Snapshot tests also freeze the database's clock: :func:`freeze_db_clock` makes ``now()`` in
every new session of that database return the instant (a ``now()`` function in a schema that
precedes ``pg_catalog`` on the search path), so stats windows, ages and countdowns computed by
the server agree with the console's frozen clock. Only test databases are ever touched.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from helpers import wait_until_async
from psycopg import sql

from forklift_console.screens.base import ConsoleScreen

FROZEN = datetime(2026, 3, 14, 9, 26, 53, tzinfo=UTC)
SCHEMA = "forklift"


def freeze_db_clock(conn: psycopg.Connection[Any], at: datetime = FROZEN) -> None:
    """From the next session on, ``now()`` in this database returns ``at``."""
    dbname = conn.info.dbname
    conn.execute("CREATE SCHEMA IF NOT EXISTS faketime")
    conn.execute(
        sql.SQL(
            "CREATE OR REPLACE FUNCTION faketime.now() RETURNS timestamptz"
            " LANGUAGE sql STABLE AS {}"
        ).format(sql.Literal(f"SELECT {sql.Literal(at.isoformat()).as_string(None)}::timestamptz"))
    )
    conn.execute(
        sql.SQL("ALTER DATABASE {} SET search_path = faketime, pg_catalog, public").format(
            sql.Identifier(dbname)
        )
    )


@dataclass
class Seeded:
    now: datetime
    ids: dict[str, int] = field(default_factory=dict)


class _Seeder:
    def __init__(self, conn: psycopg.Connection[Any], now: datetime) -> None:
        self.conn = conn
        self.now = now
        self.fence = 0
        self.out = Seeded(now)

    def ago(self, seconds: float) -> datetime:
        return self.now - timedelta(seconds=seconds)

    def job(
        self,
        kind: str,
        queue: str,
        state: str,
        *,
        args: Any = None,
        created: float = 600,
        run_at: float | None = None,
        attempted: float | None = None,
        finished: float | None = None,
        attempt: int = 0,
        max_attempts: int = 20,
        errors: list[dict[str, Any]] | None = None,
        worker: str | None = None,
        lease: float | None = None,
        result: Any = None,
        progress: dict[str, Any] | None = None,
        tags: list[str] | None = None,
        priority: int = 0,
        name: str | None = None,
    ) -> int:
        fence = None
        if worker is not None:
            self.fence += 1
            fence = self.fence
        row = self.conn.execute(
            f"""INSERT INTO {SCHEMA}.jobs (queue, kind, args, state, priority, attempt,
                max_attempts, run_at, created_at, attempted_at, finished_at, worker_id, fence,
                lease_expires_at, errors, result, progress, tags)
            VALUES (%s, %s, %s::jsonb, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s::jsonb,
                %s::jsonb, %s::jsonb, %s) RETURNING id""",
            (
                queue, kind, json.dumps(args if args is not None else {"n": 1}), state, priority,
                attempt, max_attempts,
                self.ago(run_at if run_at is not None else created), self.ago(created),
                self.ago(attempted) if attempted is not None else None,
                self.ago(finished) if finished is not None else None,
                worker, fence, self.ago(lease) if lease is not None else None,
                json.dumps(errors or []),
                json.dumps(result) if result is not None else None,
                json.dumps(progress) if progress is not None else None,
                tags or [],
            ),
        ).fetchone()
        assert row is not None
        if name:
            self.out.ids[name] = int(row[0])
        return int(row[0])

    def error(
        self, code: str, message: str | None, attempt: int, seconds_ago: float,
        type_: str | None = "RuntimeError", worker: str = "web-1:4242:a1",
    ) -> dict[str, Any]:
        return {
            "code": code,
            "type": type_,
            "message": message,
            "traceback": [
                {"file": "app/tasks.py", "line": 88, "func": "deliver"},
                {"file": "app/mailer.py", "line": 140, "func": "send"},
            ],
            "attempt": attempt,
            "worker": worker,
            "at": self.ago(seconds_ago).isoformat(),
        }


def seed(conn: psycopg.Connection[Any], now: datetime = FROZEN) -> Seeded:
    """Fill a fresh, migrated database (schema ``forklift``); returns named ids."""
    s = _Seeder(conn, now)
    with conn.transaction():
        _workers(s)
        _history(s)
        _dead(s)
        _live(s)
        _queues(s)
        _audit(s)
        _quiet_health(s)
    return s.out


def _workers(s: _Seeder) -> None:
    rows = [
        # id, host, pid, queues, slots, in_use, state, started, beat, drain deadline
        ("web-1:4242:a1", "web-1", 4242, ["default", "mail", "reports"], 10, 3, "running",
         7200, 3, None),
        ("web-2:5151:b2", "web-2", 5151, ["default", "reports"], 8, 3, "draining",
         5400, 2, -25),
        ("batch-7:919:c3", "batch-7", 919, ["slow"], 4, 1, "running", 9000, 95, None),
    ]
    for wid, host, pid, queues, slots, in_use, state, started, beat, deadline in rows:
        s.conn.execute(
            f"""INSERT INTO {SCHEMA}.workers (id, host, pid, queues, slots, in_use, state,
                started_at, heartbeat_at, drain_deadline, version)
            VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, '0.1.0')""",
            (wid, host, pid, queues, slots, in_use, state, s.ago(started), s.ago(beat),
             s.ago(deadline) if deadline is not None else None),
        )
    s.conn.execute(
        f"INSERT INTO {SCHEMA}.leader (name, worker_id, elected_at, expires_at)"
        " VALUES ('leader', 'web-1:4242:a1', %s, %s)",
        (s.ago(7000), s.ago(-20)),
    )


def _history(s: _Seeder) -> None:
    # Completed jobs over the last 30 minutes: a daytime curve with a dip, so sparklines show.
    shape = [3, 4, 6, 8, 9, 11, 12, 12, 10, 7, 5, 3, 2, 2, 3, 5, 8, 11, 13, 14, 14, 13, 11, 9,
             8, 7, 6, 6, 5, 4]
    for minute, n in enumerate(shape):
        base = (29 - minute) * 60 + 50
        for i in range(n):
            queue = "default" if i % 3 else "reports"
            kind = "demo.fast" if queue == "default" else "demo.report"
            run = 0.4 + (i % 5) * 0.3 if queue == "default" else 6.0 + i % 4
            finished = base - i * (45 / max(n, 1))
            s.job(kind, queue, "completed", args={"n": minute * 100 + i}, created=finished + run + 2,
                  attempted=finished + run, finished=finished, attempt=1,
                  result={"n": minute * 100 + i, "note": "ok"})
    # Retries that succeeded: failed attempts inside the window.
    for i, ago in enumerate((1500, 1100, 700, 420, 300, 200, 130, 70)):
        s.job("demo.flaky", "default", "completed", args={"n": 9000 + i}, created=ago + 20,
              attempted=ago - 5, finished=ago - 6, attempt=2, max_attempts=4,
              errors=[s.error("error", "upstream said 503 (try https://user:***@api.example/)",
                              1, ago, "ConnectionError")])


def _dead(s: _Seeder) -> None:
    # mail: the mailbox_full group (Fail, terminal at once) and an SMTP refusal group.
    for i, ago in enumerate((3000, 2400, 1500, 900, 620, 540, 400, 180, 95)):
        s.job("demo.failing", "mail", "dead", args={"n": 2 * i + 1, "to": f"user{i}@example.com"},
              created=ago + 30, attempted=ago + 1, finished=ago, attempt=1, max_attempts=3,
              errors=[s.error("mailbox_full", "the mailbox is full", 1, ago, "forklift.Fail")],
              name="dead_mailbox" if i == 8 else None)
    for i, ago in enumerate((86000, 40000, 5000, 2000, 700)):
        errs = [
            s.error("error", f"SMTP server refused message {4400 + i * 7 + a} for user {90 + i}",
                    a + 1, ago + (2 - a) * 5)
            for a in range(3)
        ]
        s.job("demo.failing", "mail", "dead", args={"n": 2 * i, "to": f"ops{i}@example.com"},
              created=ago + 60, attempted=ago + 1, finished=ago, attempt=3, max_attempts=3,
              errors=errs, name="dead_smtp" if i == 4 else None)
    # A hostile payload and error: markup and terminal escapes must show literally.
    s.job("demo.flaky", "default", "dead",
          args={"note": "[bold red]boom[/] \x1b[31mred\x1b[0m \u202eevil", "n": 666},
          created=4000, attempted=3601, finished=3600, attempt=4, max_attempts=4,
          errors=[s.error("error", "[blink]ValueError[/blink] \x1b[2Jcleared? no", a + 1,
                          3600 + (3 - a) * 10, "ValueError") for a in range(4)],
          name="hostile")


def _live(s: _Seeder) -> None:
    # Waiting work: default flows, reports lags behind its concurrency limit, mail is paused.
    for i in range(14):
        s.job("demo.fast", "default", "available", args={"n": 500 + i}, created=20 - i)
    for i in range(6):
        s.job("demo.report", "reports", "available", args={"n": 600 + i}, created=250 - i * 30,
              name="lagging" if i == 0 else None)
    for i in range(23):
        s.job("demo.failing", "mail", "available", args={"n": 700 + i}, created=280 - i * 10)
    for i in range(4):
        s.job("demo.slow", "slow", "scheduled", args={"n": 800 + i}, created=60,
              run_at=-(600 + i * 300), name="scheduled" if i == 0 else None)
    s.job("demo.flaky", "default", "retryable", args={"n": 901}, created=90, run_at=-12,
          attempt=2, max_attempts=4,
          errors=[s.error("error", "upstream said 503", a + 1, 80 - a * 40, "ConnectionError")
                  for a in range(2)], name="backing_off")
    # Running: web-1 healthy, web-2 draining, batch-7 silent with a lease that expired.
    s.job("demo.report", "reports", "running", args={"n": 1001}, created=40, attempted=12,
          attempt=1, worker="web-1:4242:a1", lease=-18,
          progress={"done": 3, "total": 5, "note": "section 3 of 5"}, name="progress")
    s.job("demo.fast", "default", "running", args={"n": 1002}, created=3, attempted=1, attempt=1,
          worker="web-1:4242:a1", lease=-29)
    s.job("demo.flaky", "default", "running", args={"n": 1003}, created=5, attempted=2,
          attempt=2, max_attempts=4, worker="web-1:4242:a1", lease=-28,
          errors=[s.error("error", "upstream said 503", 1, 30, "ConnectionError")])
    s.job("demo.report", "reports", "running", args={"n": 1101}, created=70, attempted=61,
          attempt=1, worker="web-2:5151:b2", lease=-25, name="interrupted",
          progress={"done": 1, "total": 5, "note": "section 1 of 5"})
    s.job("demo.fast", "default", "running", args={"n": 1102}, created=3, attempted=1,
          attempt=1, worker="web-2:5151:b2", lease=-29)
    s.job("demo.report", "reports", "running", args={"n": 1103}, created=9, attempted=4,
          attempt=1, worker="web-2:5151:b2", lease=-26)
    s.job("demo.slow", "slow", "running", args={"n": 1201}, created=400, attempted=300,
          attempt=1, worker="batch-7:919:c3", lease=70, name="expired")


def _queues(s: _Seeder) -> None:
    s.conn.execute(
        f"""UPDATE {SCHEMA}.queues SET paused = true, paused_by = 'alice', paused_at = %s,
            pause_reason = 'SMTP provider outage, INC-4242', pause_expires_at = %s
        WHERE name = 'mail'""",
        (s.ago(300), s.ago(-1500)),
    )
    s.conn.execute(f"UPDATE {SCHEMA}.queues SET concurrency = 2 WHERE name = 'reports'")


def _quiet_health(s: _Seeder) -> None:
    # The overview shows the database's health alerts. Connections, lock waits, the xmin
    # horizon and the NOTIFY queue are the whole server's, which other tests share: in a
    # seeded scene they never alert (a test of those alerts sets its own thresholds).
    for name, value in (("connections_ratio", 1.0), ("lock_wait_seconds", 86_400.0),
                        ("horizon_seconds", 30 * 86_400.0), ("horizon_xids", 2e9),
                        ("notify_queue_usage", 1.0)):
        s.conn.execute(f"INSERT INTO {SCHEMA}.settings (name, value, updated_by)"
                       " VALUES (%s, %s, 'seed')", (f"health.{name}", value))


def _audit(s: _Seeder) -> None:
    rows = [
        (5400, "bob", "requeue_many", {"filter": {"states": ["dead"], "queues": ["default"]},
                                        "batch": 1}, 12, None, "requeued: 12"),
        (1900, "carol", "cancel", {"job": 41}, 0, None, "refused: not_cancellable"),
        (300, "alice", "pause", {"queue": "mail"}, 1, "SMTP provider outage, INC-4242", "done"),
    ]
    for ago, actor, action, target, count, reason, outcome in rows:
        s.conn.execute(
            f"""INSERT INTO {SCHEMA}.audit (at, actor, action, target, count, reason, outcome)
            VALUES (%s, %s, %s, %s::jsonb, %s, %s, %s)""",
            (s.ago(ago), actor, action, json.dumps(target), count, reason, outcome),
        )


# -- batches, schedules and backfills (screens 7 to 9) ---------------------------------------
def seed_long_runs(conn: psycopg.Connection[Any], now: datetime = FROZEN) -> Seeded:
    """Batches, cron schedules and backfills in every state their screens show, relative to
    ``now`` (kept apart from :func:`seed`: their target and runner jobs would change what the
    other screens count)."""
    s = _Seeder(conn, now)
    with conn.transaction():
        _batches(s)
        _schedules(s)
        _backfills(s)
    return s.out


def _batch(s: _Seeder, kind: str, caller: str, *, state: str, total: int, completed: int = 0,
           failed: int = 0, cancelled: int = 0, in_flight: int = 0, created: float,
           finished: float | None = None, mode: str = "parallel", max_parallel: int | None = None,
           rate: tuple[int, int, int] = (0, 0, 0)) -> int:
    """``rate``: (minutes before ``now``'s minute of the rate bucket, settled in it, in the
    minute before it)."""
    bucket = int(s.now.timestamp() // 60) - rate[0]
    row = s.conn.execute(
        f"""INSERT INTO {SCHEMA}.batches (caller, key, kind, mode, max_parallel, state, total,
            completed, failed, cancelled, in_flight, created_at, updated_at, ttl, expires_at,
            finished_at, settlements, rate_bucket, rate_n, rate_prev)
        VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, interval '24 hours',
            %s, %s, %s, %s, %s, %s) RETURNING id""",
        (caller, f"{caller}-{kind}", kind, mode, max_parallel, state, total, completed, failed,
         cancelled, in_flight, s.ago(created), s.ago(finished if finished is not None else 5),
         s.ago((finished if finished is not None else 5) - 86400),
         s.ago(finished) if finished is not None else None, 0 if finished is None else 1,
         bucket, rate[1], rate[2]),
    ).fetchone()
    assert row is not None
    return int(row[0])


def _target(s: _Seeder, batch: int, index: int, kind: str, state: str, **kw: Any) -> None:
    job = s.job(kind, "images", state, args={"image": f"img_{index:04d}.png"}, **kw)
    s.conn.execute(f"UPDATE {SCHEMA}.jobs SET batch_id = %s, batch_index = %s WHERE id = %s",
                   (batch, index, job))


def _batches(s: _Seeder) -> None:
    _batch(s, "thumbs.make", "catalog-sync", state="done", total=120, completed=120,
           created=7500, finished=7200)
    _batch(s, "export.rows", "nightly-export", state="cancelled", total=80, completed=20,
           cancelled=60, created=5400, finished=5000, mode="serial")
    _batch(s, "invoice.send", "billing-run-0314", state="partial", total=50, completed=47,
           failed=3, created=1500, finished=900)
    _batch(s, "report.section", "board-pack", state="running", total=40, completed=12,
           in_flight=1, created=300, mode="serial", rate=(1, 9, 3))
    images = _batch(s, "images.resize", "upload-7731", state="running", total=240,
                    completed=131, failed=3, in_flight=8, created=95, max_parallel=8,
                    rate=(0, 40, 70))
    for i in range(3):
        _target(s, images, 131 + i, "images.resize", "running", created=95, attempted=4 + i,
                attempt=1, worker="web-1:4242:a1", lease=-26)
    _target(s, images, 57, "images.resize", "retryable", created=95, run_at=-20, attempt=1,
            max_attempts=3, errors=[s.error("error", "decoder: truncated PNG chunk", 1, 40,
                                            "ValueError")])
    for i, index in enumerate((12, 88)):
        _target(s, images, index, "images.resize", "dead", created=95, attempted=60 - i,
                finished=59 - i, attempt=3, max_attempts=3,
                errors=[s.error("invalid_payload", "width must be at most 8192", 3, 59 - i,
                                "forklift.Fail")])
    for index in (140, 141):
        _target(s, images, index, "images.resize", "available", created=95)


def _schedules(s: _Seeder) -> None:
    rows = [
        # name, kind, cron, tz, policy, last tick (UTC, before now), paused by, reason
        ("cleanup.sessions", "sessions.purge", "*/5 * * * *", "UTC", "skip",
         datetime(2026, 3, 14, 9, 25, tzinfo=UTC), None, None),
        ("digest.hourly", "mail.digest", "0 * * * *", "UTC", "catch_up",
         datetime(2026, 3, 14, 9, 0, tzinfo=UTC), None, None),
        ("report.nightly", "report.nightly", "30 2 * * *", "Europe/Berlin", "skip",
         datetime(2026, 3, 14, 1, 30, tzinfo=UTC), None, None),
        ("sync.crm", "crm.sync", "15 6 * * 1-5", "America/New_York", "skip",
         datetime(2026, 3, 13, 10, 15, tzinfo=UTC), "alice", "CRM API migration, CHG-118"),
    ]
    outcomes = {"cleanup.sessions": "completed", "digest.hourly": "dead",
                "report.nightly": "completed", "sync.crm": "completed"}
    for name, kind, expr, tz, policy, tick, paused_by, reason in rows:
        s.conn.execute(
            f"""INSERT INTO {SCHEMA}.schedules (name, kind, cron, tz, policy, max_catch_up, queue,
                args, paused, paused_by, paused_at, pause_reason, last_tick_at, created_at,
                updated_at)
            VALUES (%s, %s, %s, %s, %s, %s, 'default', %s::jsonb, %s, %s, %s, %s, %s, %s, %s)""",
            (name, kind, expr, tz, policy, 3 if policy == "catch_up" else 1,
             json.dumps({"source": "cron"}), paused_by is not None, paused_by,
             s.ago(5400) if paused_by else None, reason, tick, s.ago(30 * 86400), tick),
        )
        seconds = (s.now - tick).total_seconds()
        state = outcomes[name]
        job = s.job(kind, "default", state, args={"source": "cron"}, created=seconds,
                    attempted=seconds - 1, finished=seconds - 3, attempt=1 if state != "dead" else 3,
                    max_attempts=3,
                    errors=[s.error("error", "SMTP relay timed out", 3, seconds - 3,
                                    "TimeoutError")] if state == "dead" else None)
        s.conn.execute(
            f"""INSERT INTO {SCHEMA}.schedule_ticks (schedule, tick_at, job_id, manual, actor,
                enqueued_at) VALUES (%s, %s, %s, false, NULL, %s)""",
            (name, tick, job, tick),
        )


def _backfills(s: _Seeder) -> None:
    epoch = float(int(s.now.timestamp()))
    for name in ("backfill_tags", "migrate_avatars", "purge_sessions", "reindex_orders",
                 "rehash_passwords"):
        s.conn.execute(
            f"""INSERT INTO {SCHEMA}.backfills (name, code_hash, page_size, rate, queue, kind,
                max_attempts, declared_at, updated_at)
            VALUES (%s, 'c0ffee', 500, 4.0, 'backfills', 'forklift.backfill', 5, %s, %s)""",
            (name, s.ago(86400), s.ago(86400)),
        )
    # Pages of 500 items, about four a second over the last minute, with a dip.
    pattern = [4, 4, 3, 4, 4, 2, 4, 4, 4, 3, 1, 2, 4, 4, 4]
    pace = [[epoch - k, float(pattern[k % 15]), float(pattern[k % 15] * 500)]
            for k in range(60)]
    runs = [
        # name, state, job state, items done, total, rate, pace, created, finished, error
        ("migrate_avatars", "completed", "completed", 42_000, 42_000, 8.0, [], 9000, 7200, None),
        ("reindex_orders", "running", "running", 31_500, 120_000, 4.0, pace, 1200, None, None),
        ("backfill_tags", "paused", "scheduled", 8_000, 50_000, 2.0, [], 3000, None, None),
        ("rehash_passwords", "failed", "retryable", 1_200, 9_000, 1.0, [], 2400, None,
         s.error("error", "deadlock detected while updating users", 5, 1800,
                 "psycopg.errors.DeadlockDetected")),
    ]
    for name, state, job_state, done, total, rate, samples, created, finished, err in runs:
        job = s.job("forklift.backfill", "backfills", job_state, args={"run": name},
                    created=created, attempted=30 if job_state == "running" else None,
                    finished=finished, attempt=1,
                    worker="web-1:4242:a1" if job_state == "running" else None,
                    lease=-25 if job_state == "running" else None)
        s.conn.execute(
            f"""INSERT INTO {SCHEMA}.backfill_runs (name, state, cursor, start_cursor, rate,
                page_size, pages_done, items_done, total, pace, last_error, error_count,
                code_hash, job_id, started_by, paused_by, paused_at, created_at, updated_at,
                finished_at)
            VALUES (%s, %s, %s::jsonb, 'null'::jsonb, %s, 500, %s, %s, %s, %s::jsonb, %s::jsonb,
                %s, 'c0ffee', %s, 'bob', %s, %s, %s, %s, %s)""",
            (name, state, json.dumps(done), rate, done // 500, done, total, json.dumps(samples),
             json.dumps(err) if err else None, 5 if err else 0, job,
             "alice" if state == "paused" else None, s.ago(600) if state == "paused" else None,
             s.ago(created), s.ago(finished if finished is not None else 1),
             s.ago(finished) if finished is not None else None),
        )


def make_app(
    dsn: str,
    *,
    read_only: bool = False,
    actor: str = "tester",
    interval: float = 3600.0,
    start: str = "overview",
    now: datetime = FROZEN,
) -> Any:
    """The console on ``dsn`` with its clock frozen at ``now``; refresh ticks are rare unless
    ``interval`` says otherwise (tests trigger loads themselves)."""
    from forklift_console.app import ConsoleApp
    from forklift_console.backend import Backend

    # A fixed label: the test database's real name and socket path differ on every run.
    backend = Backend.open(
        dsn, schema=SCHEMA, actor=actor, read_only=read_only, label="db.example:5432/app"
    )
    return ConsoleApp(backend, clock=lambda: now, interval=interval, start=start)


# -- driving the console in tests ------------------------------------------------------------
Scenario = Callable[[Any, Any], Awaitable[None]]


def drive(app: Any, scenario: Scenario, size: tuple[int, int] = (120, 36)) -> None:
    async def main() -> None:
        async with app.run_test(size=size) as pilot:
            await scenario(app, pilot)

    asyncio.run(main())


async def loaded(app: Any, screen: Any = None) -> None:
    """Wait until the screen shows a snapshot fetched after this call.

    ``reload()`` guarantees one: while a load is on its way another follows it. A load that
    fails ends the wait at once with the error the banner shows.
    """
    target = screen or app.screen
    assert isinstance(target, ConsoleScreen)
    before, failed = target.loads, target.failures
    target.reload()
    await wait_until_async(
        lambda: not target._loading and (target.loads > before or target.failures > failed),
        timeout=20,
        message=lambda: f"{type(target).__name__} did not load (status {app.status})",
    )
    assert target.loads > before, f"{type(target).__name__} failed to load: {app.status.error}"


async def on_screen(app: Any, kind: type[Any]) -> Any:
    """The active screen once it is a ``kind`` and mounted: a pushed screen is active before
    its widgets are composed (on a loaded machine a query for them then found none)."""
    # A dialog that asks the database first (a batch's running targets) opens after a read
    # that waits its turn behind the screen's refresh: under load that takes seconds.
    await wait_until_async(lambda: isinstance(app.screen, kind) and app.screen.is_mounted,
                           timeout=30,
                           message=lambda: f"expected {kind.__name__}, on {app.screen!r}")
    return app.screen




# -- the seeded scenes the snapshot tests take ------------------------------------------------
@dataclass(frozen=True)
class Scene:
    name: str
    start: str
    size: tuple[int, int] = (120, 36)
    #: A row key to put the cursor on (the lower pane then describes that row).
    highlight: str | None = None
    #: A seeded job (by name) whose detail screen is opened.
    detail: str | None = None
    #: Keys pressed last, with the list focused.
    keys: tuple[str, ...] = ()
    read_only: bool = False
    no_color: bool = False
    #: What the scene shows, in words (the docs' screenshots are of the live demo:
    #: scripts/screenshots.py).
    alt: str | None = None

    def app(self, dsn: str) -> Any:
        return make_app(dsn, start=self.start, read_only=self.read_only)

    def before(self, seeded: Seeded) -> Callable[[Any], Awaitable[None]]:
        async def run_before(pilot: Any) -> None:
            from forklift_console.screens.job import JobScreen
            from forklift_console.widgets.table import LiveTable

            app = pilot.app
            screen = await settled(app)
            tables = screen.query(LiveTable)
            if tables:
                tables.first().focus()
                if self.highlight is not None:
                    assert tables.first().move_to_key(self.highlight)
                    await pilot.pause()  # the highlight message is handled...
                    await loaded(app, screen)  # ...and what the screen fetches for it is in
            if self.detail is not None:
                app.push_screen(JobScreen(seeded.ids[self.detail]))
                await on_screen(app, JobScreen)
                await settled(app)
            await pilot.pause()
            if self.keys:
                await pilot.press(*self.keys)

        return run_before


SCENES: tuple[Scene, ...] = (
    Scene("overview", "overview", alt="Overview: totals by state, throughput and failures over"
          " the last 30 minutes, alerts (an expired lease, dead letters growing, a silent"
          " worker, a paused queue, a lagging queue) and the queues by backlog"),
    Scene("overview-80x24", "overview", (80, 24)),
    Scene("queues", "queues", highlight="mail", alt="Queues: state, depth by state, running"
          " against the concurrency limit, pickup lag and a throughput sparkline; the paused"
          " queue's reason and expiry below"),
    Scene("queues-80x24", "queues", (80, 24), highlight="mail"),
    Scene("jobs", "jobs", alt="Jobs: the filter bar, a keyset-paged list with state glyphs,"
          " attempts, ages and each job's last error"),
    Scene("jobs-80x24", "jobs", (80, 24)),
    Scene("job", "jobs", detail="progress", alt="One job: why it is running, its progress bar,"
          " lease holder, timeline, errors, args and result"),
    Scene("job-80x24", "jobs", (80, 24), detail="progress"),
    Scene("job-hostile", "jobs", detail="hostile", alt="A dead job whose payload and errors"
          " hold markup and terminal escape codes: shown literally, with every attempt's error"),
    Scene("dead", "dead", alt="Dead letters grouped by kind, error code and message shape,"
          " with counts for the last hour, day and week and the newest error"),
    Scene("dead-80x24", "dead", (80, 24)),
    Scene("dead-requeue", "dead", keys=("r",), alt="Requeueing a dead-letter group: the dialog"
          " names the verb, the count and the ids, shows the CLI equivalent, and wants the"
          " count typed"),
    Scene("dead-requeue-80x24", "dead", (80, 24), keys=("r",)),
    Scene("workers", "workers", highlight="web-2:5151:b2", alt="Workers: a draining worker's"
          " cutoff countdown and which of its in-flight jobs will be interrupted"),
    Scene("workers-80x24", "workers", (80, 24), highlight="web-2:5151:b2"),
    Scene("audit", "audit", alt="Audit: every operator action, newest first, refusals"
          " included"),
    Scene("audit-80x24", "audit", (80, 24)),
    Scene("help", "jobs", keys=("question_mark",), alt="Help (?): the screen's keys, disabled"
          " ones marked, and the legend of state glyphs"),
    Scene("read-only-80x24", "queues", (80, 24), highlight="mail", read_only=True),
    Scene("no-color", "overview", no_color=True, alt="The overview with NO_COLOR set: every"
          " state still reads as a glyph and a word"),
)


async def settled(app: Any) -> Any:
    """The current console screen once it has shown its first snapshot."""
    await wait_until_async(
        lambda: isinstance(app.screen, ConsoleScreen) and app.screen.loads > 0
        and not app.screen._loading,
        timeout=30,
        message=lambda: f"{app.screen!r} never loaded",
    )
    return app.screen
