"""The autoscaling signal: one number per queue from demand, rate and concurrency; zero when
idle; never below what the running jobs need; the SQL function and the Python reads agree."""

from __future__ import annotations

import math
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from apps.ops import insert_job, register_worker

from forklift.ops import scale as sc
from forklift.ops.context import OpsContext
from forklift.ops.errors import InvalidFilter

CTX = OpsContext()


def jobs(conn: psycopg.Connection[Any], n: int, *, state: str, queue: str = "mail",
         run_at: datetime | None = None) -> None:
    for _ in range(n):
        insert_job(conn, queue=queue, state=state, run_at=run_at,
                   worker_id="w1" if state == "running" else None)


def sql_answer(conn: psycopg.Connection[Any], queue: str, *args: Any) -> int:
    marks = ", ".join(["%s"] * (1 + len(args)))
    row = conn.execute(f"SELECT forklift.desired_workers({marks})", (queue, *args)).fetchone()
    assert row is not None
    return int(row[0])


def completions_last_minute(conn: psycopg.Connection[Any], queue: str, completed: int) -> None:
    minute = math.floor(time.time() / 60) - 1
    conn.execute("INSERT INTO forklift.stats_minutes (minute, queue, completed) VALUES (%s, %s, %s)",
                 (minute, queue, completed))


def test_an_idle_queue_needs_no_worker(conn: psycopg.Connection[Any]) -> None:
    jobs(conn, 3, state="completed")
    jobs(conn, 2, state="scheduled", run_at=datetime.now(UTC) + timedelta(hours=1))
    assert sql_answer(conn, "mail") == 0
    assert sc.desired_workers(conn, CTX, "mail") == 0
    assert sc.desired_workers(conn, CTX, "never-seen") == 0


def test_waiting_jobs_without_a_known_rate_take_a_slot_each(conn: psycopg.Connection[Any]) -> None:
    jobs(conn, 25, state="available")
    assert sql_answer(conn, "mail", 10) == 3
    assert sc.desired_workers(conn, CTX, "mail", per_worker=5) == 5
    assert sc.desired_workers(conn, CTX, "mail", per_worker=10, max_workers=2) == 2


def test_due_scheduled_and_retryable_jobs_wake_a_queue_from_zero(
    conn: psycopg.Connection[Any],
) -> None:
    # No worker is left to stage them: the signal counts them, or they would wait for ever.
    past = datetime.now(UTC) - timedelta(seconds=5)
    jobs(conn, 1, state="scheduled", run_at=past)
    assert sc.desired_workers(conn, CTX, "mail") == 1
    jobs(conn, 11, state="retryable", run_at=past)
    assert sc.desired_workers(conn, CTX, "mail", per_worker=4) == 3


def test_never_below_what_the_running_jobs_need(conn: psycopg.Connection[Any]) -> None:
    # Scale-in only removes idle capacity: 30 running jobs at 10 a worker keep 3 workers, even
    # when the rate says the (empty) backlog needs nothing more.
    jobs(conn, 30, state="running")
    completions_last_minute(conn, "mail", 60_000)
    assert sc.desired_workers(conn, CTX, "mail", per_worker=10) == 3


def test_a_known_rate_sizes_the_backlog_by_what_a_slot_gets_through(
    conn: psycopg.Connection[Any],
) -> None:
    jobs(conn, 10, state="running")
    jobs(conn, 600, state="available")
    # 6,000 a minute over 10 busy slots: 10 jobs a second a slot; 600 waiting cleared in 30 s
    # take 2 more slots: 12 slots, 2 workers of 10 (one slot each would ask for 61).
    completions_last_minute(conn, "mail", 6_000)
    got = sc.scale(conn, CTX, ["mail"], per_worker=10)
    assert got == [sc.QueueScale(queue="mail", desired=2, per_worker=10, running=10,
                                 waiting=600, rate=100.0)]
    # Asked to clear it within 3 s instead: 10 + 600 / (10 * 3) = 30 slots, 3 workers.
    assert sc.desired_workers(conn, CTX, "mail", per_worker=10, target=3) == 3


def test_per_worker_defaults_to_the_live_workers_concurrency(conn: psycopg.Connection[Any]) -> None:
    jobs(conn, 9, state="available")
    register_worker(conn, "w1", ["mail"], slots=4)
    register_worker(conn, "w-old", ["mail"], slots=50, heartbeat_age=3600)  # not live
    (got,) = sc.scale(conn, CTX, ["mail"])
    assert (got.per_worker, got.desired) == (4, 3)
    register_worker(conn, "w2", ["sms"], slots=2)
    assert sc.desired_workers(conn, CTX, "sms") == 0


def test_every_read_of_the_signal_gives_the_same_number(conn: psycopg.Connection[Any]) -> None:
    jobs(conn, 7, state="running")
    jobs(conn, 40, state="available")
    jobs(conn, 3, state="available", queue="sms")
    completions_last_minute(conn, "mail", 1_200)
    for queue in ("mail", "sms"):
        through_sql = sql_answer(conn, queue, 3, 100, 30.0)
        literal = conn.execute(sc.scaler_query(queue, schema="forklift", per_worker=3)).fetchone()
        assert literal is not None
        by_queue = {s.queue: s.desired for s in sc.scale(conn, CTX, per_worker=3)}
        assert through_sql == int(literal[0]) == by_queue[queue] == sc.desired_workers(
            conn, CTX, queue, per_worker=3)
    assert set(by_queue) >= {"mail", "sms"}


def test_the_scaler_query_quotes_the_queue(conn: psycopg.Connection[Any]) -> None:
    jobs(conn, 2, state="available", queue="o'brien")
    query = sc.scaler_query("o'brien", schema="forklift")
    assert "'o''brien'" in query
    row = conn.execute(query).fetchone()
    assert row is not None and row[0] == 1


@pytest.mark.parametrize(("options", "field"), [
    ({"per_worker": 0}, "per_worker"), ({"max_workers": -1}, "max"), ({"target": 0.0}, "target"),
])
def test_out_of_range_options_are_refused_naming_them(
    conn: psycopg.Connection[Any], options: dict[str, Any], field: str,
) -> None:
    with pytest.raises(InvalidFilter) as err:
        sc.desired_workers(conn, CTX, "mail", **options)
    assert err.value.detail["field"] == field
    with pytest.raises(psycopg.errors.InvalidParameterValue):
        conn.execute("SELECT forklift.desired_workers('mail', 0)")


def test_a_backlog_past_the_cap_asks_for_the_cap(conn: psycopg.Connection[Any]) -> None:
    # Every count stops at max * per_worker rows, so a deep backlog costs the same to read.
    conn.execute("""INSERT INTO forklift.jobs (queue, kind, args, state)
                    SELECT 'mail', 'ops.noop', '{}', 'available' FROM generate_series(1, 5000)""")
    (got,) = sc.scale(conn, CTX, ["mail"], per_worker=10, max_workers=5)
    assert (got.desired, got.waiting) == (5, 50)
