"""forklift's sessions keep the user's DSN settings, and the async enqueue pool is created once
however many tasks race for it. Real server, real backends."""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
import pytest
from helpers import wait_until
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from forklift import Forklift, JobContext
from forklift._db.connections import APPNAME_MAX, app_name, connect, connect_kwargs


def test_the_dsn_options_application_name_and_timeout_are_kept(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    conn.execute("CREATE SCHEMA IF NOT EXISTS mine")
    user = make_conninfo(dsn, options="-c search_path=mine,public -c work_mem=7MB",
                         application_name="myapp", connect_timeout=3)
    with connect(user, "claim", "w1") as session:
        got = session.execute(
            "SELECT current_setting('search_path'), current_setting('work_mem'),"
            " current_setting('application_name'), current_setting('statement_timeout'),"
            " current_setting('plan_cache_mode')"
        ).fetchone()
    assert got == ("mine,public", "7MB", "myapp:forklift:w1:claim", "10s", "force_generic_plan")
    assert conninfo_to_dict(connect_kwargs(user, "claim", "w1")["conninfo"])["connect_timeout"] == "3"


@pytest.mark.parametrize("lane", ["complete-flow", "complete-flow2", "complete-flow3"])
def test_every_outcome_lane_of_a_flow_worker_plans_once_and_keeps_the_complete_timeouts(
    dsn: str, lane: str
) -> None:
    with connect(dsn, lane, "w1") as session:
        got = session.execute(
            "SELECT current_setting('plan_cache_mode'), current_setting('statement_timeout'),"
            " current_setting('lock_timeout'), current_setting('application_name')").fetchone()
    assert got == ("force_generic_plan", "10s", "5s", f"forklift:w1:{lane}")
    with connect(dsn, "complete", "w1") as plain:  # a plain worker's writes choose their plans
        row = plain.execute("SELECT current_setting('plan_cache_mode')").fetchone()
    assert row == ("auto",)


def test_a_setting_the_user_names_wins_over_forklifts(dsn: str) -> None:
    user = make_conninfo(dsn, options="--statement_timeout=4000 -c lock_timeout=123")
    with connect(user, "claim", "w1") as session:
        got = session.execute(
            "SELECT current_setting('statement_timeout'), current_setting('lock_timeout'),"
            " current_setting('idle_in_transaction_session_timeout')"
        ).fetchone()
    assert got == ("4s", "123ms", "1min")


def test_the_environment_is_kept_too(dsn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # libpq reads PGOPTIONS/PGAPPNAME only when the conninfo names no options/application_name,
    # and forklift's conninfo always names them.
    monkeypatch.setenv("PGOPTIONS", "-c work_mem=9MB")
    monkeypatch.setenv("PGAPPNAME", "fromenv")
    with connect(dsn, "enqueue") as session:
        got = session.execute(
            "SELECT current_setting('work_mem'), current_setting('application_name')"
        ).fetchone()
    assert got == ("9MB", "fromenv:forklift:enqueue")


def test_without_user_settings_forklift_names_its_purpose_alone(dsn: str) -> None:
    with connect(dsn, "enqueue") as session:
        row = session.execute("SELECT current_setting('application_name')").fetchone()
    assert row == ("forklift:enqueue",)


def test_the_application_name_fits_postgresqls_63_bytes() -> None:
    tag = "forklift:host-1:4242:ab12:heartbeat"
    long = app_name("é" * 40, tag)
    assert len(long.encode()) <= APPNAME_MAX and long.endswith(":" + tag)
    assert long.startswith("é")  # cut on a character boundary
    huge_tag = "forklift:" + "w" * 80 + ":claim"
    assert app_name("myapp", huge_tag) == huge_tag[:APPNAME_MAX]
    assert app_name("", "forklift:ops") == "forklift:ops"


def test_the_users_application_name_reaches_pg_stat_activity(dsn: str, conn: psycopg.Connection[Any]) -> None:
    app = Forklift(make_conninfo(dsn, application_name="billing"))

    @app.job(name="conn.noop")
    def noop(ctx: JobContext, args: dict[str, Any]) -> None: ...

    try:
        noop.enqueue({})
        names = {r[0] for r in conn.execute(
            "SELECT application_name FROM pg_stat_activity WHERE datname = current_database()")}
    finally:
        app.close()
    assert "billing:forklift:enqueue" in names


# -- the async pool ---------------------------------------------------------------------------
def backends(conn: psycopg.Connection[Any], name: str) -> int:
    row = conn.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
        " AND application_name = %s", (name,)).fetchone()
    assert row is not None
    return int(row[0])


def test_concurrent_first_async_enqueues_open_one_pool(dsn: str, conn: psycopg.Connection[Any]) -> None:
    app = Forklift(make_conninfo(dsn, application_name="race"), pool_size=4)

    @app.job(name="conn.race")
    async def race(ctx: JobContext, args: dict[str, Any]) -> None: ...

    async def go() -> tuple[int, int, set[int]]:
        jobs = await asyncio.gather(*(race.enqueue_async({"i": i}) for i in range(30)))
        pools = {id(await app.async_pool()) for _ in range(3)}
        while_open = backends(conn, "race:forklift:enqueue")
        await app.aclose()
        return len({j.id for j in jobs}), while_open, pools

    enqueued, while_open, pools = asyncio.run(go())
    assert enqueued == 30 and len(pools) == 1
    assert 1 <= while_open <= app.pool_size  # one pool of at most pool_size connections
    # aclose left nothing open (a backend exits a moment after its client hangs up)
    wait_until(lambda: backends(conn, "race:forklift:enqueue") == 0, timeout=10,
               message=lambda: f"{backends(conn, 'race:forklift:enqueue')} backends left open")


def test_the_async_pool_works_again_from_a_second_event_loop(dsn: str) -> None:
    app = Forklift(dsn)

    @app.job(name="conn.loops")
    async def loops(ctx: JobContext, args: dict[str, Any]) -> None: ...

    async def once() -> int:
        try:
            return (await loops.enqueue_async({})).id
        finally:
            await app.aclose()

    first, second = asyncio.run(once()), asyncio.run(once())
    assert second > first
