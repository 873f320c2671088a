"""Partition upkeep on real range-partitioned tables: across a month boundary at explicit
instants, back to an old row with ``from``, idempotent at one instant, and under a lock held
by another transaction (fails fast under its lock timeout, retries, queues nothing)."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest
from apps.basic import running_worker
from helpers import wait_until

from forklift import Forklift
from forklift.partitions import (
    PartitionChange,
    PartitionedTable,
    PartitionedTableInvalid,
    PartitionLockTimeout,
    PartitionUpkeep,
    apply,
    partitions,
)


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


@pytest.fixture
def app(dsn: str) -> Iterator[Forklift]:
    fl = Forklift(dsn)
    try:
        yield fl
    finally:
        fl.close()


@pytest.fixture
def events(conn: psycopg.Connection[Any]) -> str:
    conn.execute("CREATE TABLE public.events (id bigint NOT NULL, at timestamptz NOT NULL)"
                 " PARTITION BY RANGE (at)")
    return "public.events"


def partitions_of(conn: psycopg.Connection[Any], table: str) -> list[tuple[str, str]]:
    """Every partition of ``table`` and its bound, as the server shows them in UTC."""
    with conn.transaction():
        conn.execute("SET LOCAL TimeZone = 'UTC'")
        rows = conn.execute(
            "SELECT c.relname, pg_get_expr(c.relpartbound, c.oid) FROM pg_inherits i"
            " JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = %s::regclass"
            " ORDER BY 1", (table,)).fetchall()
    return [(str(r[0]), str(r[1])) for r in rows]


def names(conn: psycopg.Connection[Any], table: str) -> list[str]:
    return [n for n, _ in partitions_of(conn, table)]


def upkeep(app: Forklift, *tables: PartitionedTable, **options: Any) -> PartitionUpkeep:
    options.setdefault("cron", None)
    return partitions(app, tables, **options)


# -- across a month boundary --------------------------------------------------------------------
def test_upkeep_across_a_month_boundary_creates_ahead_and_drops_past_retention(
        app: Forklift, events: str, conn: psycopg.Connection[Any]) -> None:
    keeper = upkeep(app, PartitionedTable(events, interval="month", ahead=2, retain=1))
    [report] = keeper.run(now=at("2026-01-31T23:59:59.999999"))
    assert report.created == ("public.events_p202601", "public.events_p202602",
                              "public.events_p202603")
    assert partitions_of(conn, events)[0] == (
        "events_p202601",
        "FOR VALUES FROM ('2026-01-01 00:00:00+00') TO ('2026-02-01 00:00:00+00')")
    # The last instant of January and the first of February land on either side of the bound.
    conn.execute("INSERT INTO public.events VALUES (1, '2026-01-31 23:59:59.999999+00'),"
                 " (2, '2026-02-01 00:00:00+00')")
    assert conn.execute("SELECT id, tableoid::regclass::text FROM public.events ORDER BY id"
                        ).fetchall() == [(1, "events_p202601"), (2, "events_p202602")]

    [report] = keeper.run(now=at("2026-02-01T00:00:00"))
    assert (report.created, report.dropped) == (("public.events_p202604",), ())
    [report] = keeper.run(now=at("2026-03-01T00:00:00"))
    assert (report.created, report.dropped) == (("public.events_p202605",),
                                                ("public.events_p202601",))
    assert names(conn, events) == ["events_p202602", "events_p202603", "events_p202604",
                                   "events_p202605"]
    assert conn.execute("SELECT id FROM public.events").fetchall() == [(2,)]


def test_a_second_run_at_one_instant_changes_nothing(
        app: Forklift, events: str, conn: psycopg.Connection[Any]) -> None:
    keeper = upkeep(app, PartitionedTable(events, ahead=3, retain=2))
    now = at("2026-06-15T12:00:00")
    keeper.run(now=now, from_=at("2026-01-20T00:00:00"))
    first = partitions_of(conn, events)
    [report] = keeper.run(now=now)  # the drops of retention: January, February and March
    assert len(report.dropped) == 3
    after = partitions_of(conn, events)
    [again] = keeper.run(now=now)
    assert (again.created, again.dropped, again.lock_timeouts) == ((), (), 0)
    assert keeper.plan(now=now)[0].changes == ()
    assert partitions_of(conn, events) == after != first


def test_a_run_stopped_half_way_is_finished_by_the_next(
        app: Forklift, events: str, conn: psycopg.Connection[Any]) -> None:
    keeper = upkeep(app, PartitionedTable(events, ahead=3))
    now = at("2026-05-05T05:05:05")
    [whole] = keeper.plan(now=now)
    apply(conn, dataclasses.replace(whole, changes=whole.changes[:2]))  # then the run died
    assert names(conn, events) == ["events_p202605", "events_p202606"]
    [report] = keeper.run(now=now)
    assert report.created == ("public.events_p202607", "public.events_p202608")


def test_bounds_are_read_back_whatever_the_sessions_time_zone(
        app: Forklift, events: str, dsn: str, conn: psycopg.Connection[Any]) -> None:
    keeper = upkeep(app, PartitionedTable(events, ahead=1))
    keeper.run(now=at("2026-01-31T23:00:00"))
    with psycopg.connect(dsn, autocommit=True) as elsewhere:
        elsewhere.execute("SET TimeZone = 'Pacific/Kiritimati'")  # UTC+14: January 31st is February 1st
        [plan] = keeper.plan(now=at("2026-01-31T23:00:00"), conn=elsewhere)
        assert (plan.changes, plan.existing) == ((), ("events_p202601", "events_p202602"))
        [report] = keeper.run(now=at("2026-02-01T00:00:00"), conn=elsewhere)
    assert report.created == ("public.events_p202603",)
    assert partitions_of(conn, events)[-1][1] == (
        "FOR VALUES FROM ('2026-03-01 00:00:00+00') TO ('2026-04-01 00:00:00+00')")


def test_from_creates_back_to_an_old_row_and_drops_nothing_that_run(
        app: Forklift, events: str, conn: psycopg.Connection[Any]) -> None:
    keeper = upkeep(app, PartitionedTable(events, ahead=1, retain=1))
    now = at("2026-03-10T08:00:00")
    [plan] = keeper.plan(now=now, from_=at("2025-11-15T00:00:00"))
    assert [c.action for c in plan.changes] == ["create"] * 6
    assert plan.changes[0].sql == (
        'CREATE TABLE IF NOT EXISTS "public"."events_p202511" PARTITION OF "public"."events"'
        " FOR VALUES FROM ('2025-11-01 00:00:00+00') TO ('2025-12-01 00:00:00+00')")
    keeper.run(now=now, from_=at("2025-11-15T00:00:00"))
    conn.execute("INSERT INTO public.events VALUES (1, '2025-11-15 00:00:00+00')")  # the backfill
    assert names(conn, events) == [f"events_p{m}" for m in (
        "202511", "202512", "202601", "202602", "202603", "202604")]
    [report] = keeper.run(now=now)  # the next scheduled run applies the retention
    assert report.dropped == ("public.events_p202511", "public.events_p202512",
                              "public.events_p202601")


def test_daily_partitions_on_a_date_key_cross_the_month(
        app: Forklift, conn: psycopg.Connection[Any]) -> None:
    conn.execute("CREATE TABLE public.visits (day date NOT NULL, n int) PARTITION BY RANGE (day)")
    keeper = upkeep(app, PartitionedTable("visits", interval="day", ahead=2, retain=0))
    keeper.run(now=at("2026-01-31T10:00:00"))
    assert partitions_of(conn, "public.visits") == [
        ("visits_p20260131", "FOR VALUES FROM ('2026-01-31') TO ('2026-02-01')"),
        ("visits_p20260201", "FOR VALUES FROM ('2026-02-01') TO ('2026-02-02')"),
        ("visits_p20260202", "FOR VALUES FROM ('2026-02-02') TO ('2026-02-03')"),
    ]
    [report] = keeper.run(now=at("2026-02-01T00:00:00"))
    assert (report.created, report.dropped) == (("public.visits_p20260203",),
                                                ("public.visits_p20260131",))


def test_partitions_made_by_hand_are_respected(
        app: Forklift, events: str, conn: psycopg.Connection[Any]) -> None:
    conn.execute("CREATE TABLE public.events_q1 PARTITION OF public.events FOR VALUES FROM"
                 " ('2026-01-01 00:00:00+00') TO ('2026-04-01 00:00:00+00')")
    conn.execute("CREATE TABLE public.events_rest PARTITION OF public.events DEFAULT")
    [report] = upkeep(app, PartitionedTable(events, ahead=3)).run(now=at("2026-02-10T00:00:00"))
    assert report.created == ("public.events_p202604", "public.events_p202605")


@pytest.mark.parametrize(("ddl", "table", "reason"), [
    (None, "public.missing", "missing"),
    ("CREATE TABLE public.plain (at timestamptz)", "public.plain", "not_range_partitioned"),
    ("CREATE TABLE public.by_id (id bigint) PARTITION BY RANGE (id)", "public.by_id", "key_type"),
    ("CREATE TABLE public.by_list (at date) PARTITION BY LIST (at)", "public.by_list",
     "not_range_partitioned"),
])
def test_a_table_upkeep_cannot_keep_is_refused_naming_it(
        app: Forklift, conn: psycopg.Connection[Any], ddl: str | None, table: str,
        reason: str) -> None:
    if ddl:
        conn.execute(ddl)
    with pytest.raises(PartitionedTableInvalid) as caught:
        upkeep(app, PartitionedTable(table)).plan(now=at("2026-01-01T00:00:00"))
    assert caught.value.code == "partitions_table_invalid"
    assert (caught.value.detail["table"], caught.value.detail["reason"]) == (table, reason)


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"table": "a.b.c"}, "table"), ({"table": "events", "interval": "week"}, "interval"),
    ({"table": "events", "ahead": -1}, "ahead"), ({"table": "events", "retain": 1.5}, "retain"),
    ({"table": "x" * 60}, "table"),
])
def test_bad_settings_are_refused_naming_the_field(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(PartitionedTableInvalid) as caught:
        PartitionedTable(**kwargs)
    assert caught.value.detail["field"] == field


# -- under a held lock ----------------------------------------------------------------------------
@pytest.fixture
def held(dsn: str, events: str) -> Iterator[psycopg.Connection[Any]]:
    """A long transaction that has read the table: it holds ACCESS SHARE until it ends."""
    with psycopg.connect(dsn) as blocker:
        blocker.execute("SELECT count(*) FROM public.events")
        yield blocker
        blocker.rollback()


def waiting_locks(conn: psycopg.Connection[Any]) -> int:
    """Lock requests waiting in this test's database (the server is shared by other tests)."""
    row = conn.execute("SELECT count(*) FROM pg_locks WHERE NOT granted AND database ="
                       " (SELECT oid FROM pg_database WHERE datname = current_database())"
                       ).fetchone()
    return int(row[0]) if row else 0


def test_under_a_held_lock_ddl_fails_fast_retries_and_queues_nothing(
        app: Forklift, events: str, held: psycopg.Connection[Any],
        conn: psycopg.Connection[Any]) -> None:
    keeper = upkeep(app, PartitionedTable(events, ahead=1), lock_timeout=0.05, attempts=3,
                    pause=0.0)
    timed_out: list[tuple[str, int]] = []
    with pytest.raises(PartitionLockTimeout) as caught:
        keeper.run(now=at("2026-01-15T00:00:00"),
                   on_lock_timeout=lambda c, n: timed_out.append((c.partition, n)))
    assert caught.value.code == "partitions_lock_timeout"
    assert caught.value.detail["attempts"] == 3
    assert timed_out == [("public.events_p202601", 1), ("public.events_p202601", 2),
                         ("public.events_p202601", 3)]
    assert names(conn, events) == []
    assert waiting_locks(conn) == 0  # gave up: nobody is left queued behind a DDL
    # The long transaction goes on reading undisturbed, and so does everyone else.
    assert held.execute("SELECT count(*) FROM public.events").fetchone() == (0,)
    conn.execute("INSERT INTO public.events SELECT 1, now() WHERE false")


def test_a_statement_that_timed_out_succeeds_on_its_retry_once_the_lock_is_free(
        app: Forklift, events: str, held: psycopg.Connection[Any],
        conn: psycopg.Connection[Any]) -> None:
    keeper = upkeep(app, PartitionedTable(events, ahead=1), lock_timeout=0.05, attempts=3,
                    pause=0.0)

    def release(change: PartitionChange, attempt: int) -> None:
        held.rollback()  # the long transaction ends after the first attempt gave up

    [report] = keeper.run(now=at("2026-01-15T00:00:00"), on_lock_timeout=release)
    assert (report.created, report.lock_timeouts) == (
        ("public.events_p202601", "public.events_p202602"), 1)


def test_while_a_statement_waits_for_its_lock_other_sessions_wait_at_most_its_timeout(
        app: Forklift, events: str, held: psycopg.Connection[Any], dsn: str,
        conn: psycopg.Connection[Any]) -> None:
    # A writer that arrives while the DDL waits queues behind it, but only until the DDL's
    # lock timeout: then the DDL leaves the queue and the writer proceeds, though the long
    # transaction still holds its lock.
    keeper = upkeep(app, PartitionedTable(events, ahead=0), lock_timeout=2.0, attempts=1)
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            keeper.run(now=at("2026-01-15T00:00:00"))
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)

    ddl = threading.Thread(target=run)
    ddl.start()
    wait_until(lambda: waiting_locks(conn) == 1, timeout=10, message="the DDL waits for its lock")
    with psycopg.connect(dsn, autocommit=True) as writer:
        writer.execute("SET lock_timeout = '30s'")
        writer.execute("SELECT count(*) FROM public.events")  # queued, then let through
    ddl.join(30)
    assert isinstance(outcome[0], PartitionLockTimeout)
    assert waiting_locks(conn) == 0


# -- as a job, run by a worker ----------------------------------------------------------------------
def test_the_upkeep_job_runs_with_its_now_and_from_and_a_second_run_changes_nothing(
        app: Forklift, events: str, conn: psycopg.Connection[Any]) -> None:
    keeper = upkeep(app, PartitionedTable(events, ahead=1), cron="17 3 * * *")
    assert keeper.schedule is not None and keeper.schedule.cron == "17 3 * * *"
    args = {"now": "2026-02-01T00:00:00+00:00", "from": "2025-12-31T00:00:00+00:00"}
    first = keeper.kind.enqueue(args)
    with running_worker(app, concurrency=2):
        def done(job_id: int) -> Any:
            row = conn.execute("SELECT state, result FROM forklift.jobs WHERE id = %s",
                               (job_id,)).fetchone()
            return row if row and row[0] in ("completed", "dead") else None

        state, result = wait_until(lambda: done(first.id), timeout=30, message="upkeep ran")
        second = keeper.kind.enqueue(args)
        state2, result2 = wait_until(lambda: done(second.id), timeout=30, message="again")
    assert (state, state2) == ("completed", "completed")
    assert result == [{"table": "public.events", "created": [
        "public.events_p202512", "public.events_p202601", "public.events_p202602",
        "public.events_p202603"], "dropped": [], "lock_timeouts": 0}]
    assert result2 == [{"table": "public.events", "created": [], "dropped": [],
                        "lock_timeouts": 0}]


def test_a_job_without_now_plans_for_the_kinds_clock(
        app: Forklift, events: str, conn: psycopg.Connection[Any]) -> None:
    keeper = upkeep(app, PartitionedTable(events, ahead=0),
                    clock=lambda: at("2026-07-04T12:00:00"))
    job = keeper.kind.enqueue({})
    with running_worker(app, concurrency=1):
        wait_until(lambda: conn.execute("SELECT state FROM forklift.jobs WHERE id = %s",
                                        (job.id,)).fetchone() == ("completed",),
                   timeout=30, message="upkeep ran")
    assert names(conn, events) == ["events_p202607"]


def test_an_upkeep_job_held_off_by_a_lock_is_retried_and_a_missing_table_is_terminal(
        app: Forklift, events: str, held: psycopg.Connection[Any],
        conn: psycopg.Connection[Any]) -> None:
    keeper = upkeep(app, PartitionedTable(events, ahead=0), lock_timeout=0.05, attempts=2,
                    pause=0.0)
    job = keeper.kind.enqueue({"now": "2026-01-15T00:00:00+00:00"})
    bad = upkeep(app, PartitionedTable("public.nowhere"), name="bad.upkeep")
    missing = bad.kind.enqueue({})
    with running_worker(app, concurrency=2):
        def state(job_id: int) -> tuple[str, list[dict[str, Any]]]:
            row = conn.execute("SELECT state, errors FROM forklift.jobs WHERE id = %s",
                               (job_id,)).fetchone()
            assert row is not None
            return row[0], row[1]

        wait_until(lambda: state(job.id)[0] == "retryable", timeout=30,
                   message="the held-off attempt failed and waits for its retry")
        wait_until(lambda: state(missing.id)[0] == "dead", timeout=30, message="refused")
    entry = state(job.id)[1][0]
    assert "PartitionLockTimeout" in str(entry) and "events_p202601" in str(entry)
    assert [e["code"] for e in state(missing.id)[1]] == ["partitions_table_invalid"]
    assert names(conn, events) == []
