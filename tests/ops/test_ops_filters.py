"""Filters, sorts and cursors: operator input becomes parameters, never SQL or markup."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from apps.ops import insert_job

from forklift.ops import InvalidFilter, JobFilter, Operator, Sort
from forklift.ops.filters import Cursor, duration, like_pattern, moment


def test_durations() -> None:
    assert duration("90") == timedelta(seconds=90)
    assert duration("1h30m") == timedelta(minutes=90)
    assert duration("7d") == timedelta(days=7)
    assert duration("250ms") == timedelta(milliseconds=250)
    for bad in ("soon", "-5m", "5 parsecs", ""):
        with pytest.raises(InvalidFilter):
            duration(bad)


def test_moments() -> None:
    now = datetime(2024, 5, 1, 12, tzinfo=UTC)
    assert moment("2h", now=now) == now - timedelta(hours=2)
    assert moment("2024-05-01T10:00:00") == datetime(2024, 5, 1, 10, tzinfo=UTC)  # naive: UTC
    assert moment("2024-05-01T10:00:00+02:00").utcoffset() == timedelta(hours=2)
    with pytest.raises(InvalidFilter, match="ISO 8601"):
        moment("yesterday-ish")


def test_like_patterns_escape_wildcards() -> None:
    assert like_pattern("100%_a\\b") == "%100\\%\\_a\\\\b%"


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"states": "runing"}, "state"),
        ({"id_min": 10, "id_max": 5}, "id_range"),
        ({"after": "2024-05-02T00:00:00", "before": "2024-05-01T00:00:00"}, "time_range"),
        ({"time_field": "updated_at", "after": "1h"}, "time_field"),
        ({"text": "a\x00b"}, "text"),
        ({"queues": "ma\x00il"}, "queue"),
        ({"id_min": 2**70}, "id"),
    ],
)
def test_bad_filters_are_refused_with_the_field(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidFilter) as info:
        JobFilter.build(**kwargs)
    assert info.value.detail["field"] == field
    assert info.value.code == "invalid_filter"


def test_nul_message_says_what_to_do() -> None:
    with pytest.raises(InvalidFilter, match=r"NUL character.*remove it"):
        JobFilter.build(text="x\x00")


def test_comma_separated_and_repeated_values() -> None:
    f = JobFilter.build(states=["dead,completed", "dead"], queues="a, b")
    assert f.states == ("dead", "completed")
    assert f.queues == ("a", "b")
    assert f.to_json() == {"states": ["dead", "completed"], "queues": ["a", "b"]}


def test_sorts_come_from_an_allow_list() -> None:
    assert Sort.parse("-created_at") == Sort("created_at", True)
    assert Sort.parse("run_at:asc") == Sort("run_at", False)
    for bad in ("args", "id; DROP TABLE jobs", "created_at:sideways"):
        with pytest.raises(InvalidFilter):
            Sort.parse(bad)
    with pytest.raises(InvalidFilter):
        Sort("id; DROP TABLE jobs")


def test_cursors_round_trip_and_refuse_tampering() -> None:
    s = Sort("finished_at", True)
    at = datetime(2024, 5, 1, tzinfo=UTC)
    c = Cursor("finished_at", True, at, 42)
    assert Cursor.decode(c.encode(), s) == c
    with pytest.raises(InvalidFilter, match="belongs to a list sorted by"):
        Cursor.decode(c.encode(), Sort("id", True))
    for bad in ("not-a-cursor", "eyJ4IjoxfQ", c.encode()[:-3] + "zzz"):
        with pytest.raises(InvalidFilter):
            Cursor.decode(bad, s)


HOSTILE = ["O'Brien", "100%", "a_b", "x'; DROP TABLE forklift.jobs; --", "[red]alert[/red]",
           "back\\slash", '"quoted"']


def test_hostile_strings_are_data(dsn: str, conn: psycopg.Connection[Any]) -> None:
    ids = {text: insert_job(conn, args={"note": text}, queue=text, kind=text, tags=[text])
           for text in HOSTILE}
    decoy = insert_job(conn, args={"note": "100 percent, ab, OBrien"})
    with Operator(dsn) as op:
        for text, job_id in ids.items():
            for flt in (JobFilter.build(text=text), JobFilter.build(queues=[text]),
                        JobFilter.build(kinds=[text]), JobFilter.build(tags=[text])):
                if "," in text:
                    continue
                page = op.jobs(flt)
                got = [j.id for j in page.jobs]
                assert job_id in got, (text, flt)
                assert decoy not in got, (text, flt)
        assert op.jobs(JobFilter.build(text="%")).count == 1  # only the row holding a literal %
    # the table is still there, with every row
    row = conn.execute("SELECT count(*) FROM forklift.jobs").fetchone()
    assert row is not None and row[0] == len(HOSTILE) + 1


def test_keyset_pages_cover_every_job_once(dsn: str, conn: psycopg.Connection[Any]) -> None:
    base = datetime.now(UTC) - timedelta(hours=1)
    ids = []
    for i in range(23):
        finished = base + timedelta(minutes=i // 3) if i % 4 else None  # ties and nulls
        state = "completed" if finished else "available"
        ids.append(insert_job(conn, state=state, finished_at=finished))
    with Operator(dsn) as op:
        for sort in ("-id", "id", "finished_at", "-finished_at", "priority"):
            seen: list[int] = []
            cursor = None
            while True:
                page = op.jobs(sort=sort, limit=5, cursor=cursor)
                seen += [j.id for j in page.jobs]
                cursor = page.next_cursor
                if cursor is None:
                    break
            assert sorted(seen) == sorted(ids), sort
            assert len(seen) == len(set(seen)), sort
        page = op.jobs(sort="-finished_at", limit=50)
        finished = [j.finished_at for j in page.jobs]
        tail = finished[finished.index(None):]
        assert all(f is None for f in tail)  # NULLS LAST in both directions


def test_count_is_capped(dsn: str, conn: psycopg.Connection[Any]) -> None:
    from forklift.ops import jobs as ops_jobs

    for _ in range(12):
        insert_job(conn)
    with Operator(dsn) as op:
        n, capped = ops_jobs.capped_count(op.conn, op.schema, JobFilter(), cap=10)
        assert (n, capped) == (10, True)
        page = op.jobs(limit=5)
        assert (page.count, page.count_capped) == (12, False)
        assert page.next_cursor is not None


def test_a_tenant_filter_reads_by_its_index(dsn: str, conn: psycopg.Connection[Any]) -> None:
    """`jobs list --tenant` and the console's `tenant:` filter on a large table: the page and
    its count read the tenant's jobs by jobs_tenant_idx (migration 0024), never every job; a
    tenant's oldest jobs behind many newer ones of other tenants and of none."""
    from forklift._db.sqltext import render
    from forklift.ops import jobs as ops_jobs

    conn.execute("INSERT INTO forklift.jobs (queue, kind, state, tenant, created_at)"
                 " SELECT 'q', 'k', 'available', 'acme', now() - interval '1 day'"
                 " FROM generate_series(1, 5)")
    conn.execute("INSERT INTO forklift.jobs (queue, kind, state, attempt, finished_at, tenant)"
                 " SELECT 'q', 'k', 'completed', 1, now(), CASE WHEN i % 2 = 0 THEN 'big' END"
                 " FROM generate_series(1, 40000) AS i")
    conn.execute("VACUUM ANALYZE forklift.jobs")
    for states in (None, "available"):
        flt = JobFilter.build(tenants="acme", states=states)
        where, params = flt.where()
        for sql, args in (
            (f"SELECT {ops_jobs.LIST_COLUMNS} FROM {{s}}.jobs t WHERE {where}"
             " ORDER BY t.id DESC LIMIT %s", [*params, 51]),
            (f"SELECT count(*) FROM (SELECT 1 FROM {{s}}.jobs t WHERE {where} LIMIT %s) x",
             [*params, ops_jobs.COUNT_CAP + 1]),
        ):
            plan = "\n".join(r[0] for r in conn.execute(
                render("EXPLAIN (ANALYZE, COSTS OFF) " + sql, "forklift"), args).fetchall())
            assert "Seq Scan" not in plan, plan
            # with a live state the claim's index may do as well; with none, only this one
            assert states or "jobs_tenant_idx" in plan, plan
            removed = [int(n) for n in re.findall(r"Rows Removed by Filter: (\d+)", plan)]
            assert sum(removed) < 100, plan
    with Operator(dsn) as op:
        page = op.jobs.list(JobFilter.build(tenants="acme"), limit=3)
    assert [j.tenant for j in page.jobs] == ["acme"] * 3 and page.count == 5
