"""A job's tenant and who enqueued it: stored by every enqueue path, derived from the payload by
a kind that says how, refused with a stable code when required and missing or when the payload
names another tenant, and checked like every other name (no hidden characters, a cap)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import psycopg
import pytest
from apps import basic

from forklift import (
    ConfigError,
    EnqueueRefused,
    Forklift,
    InvalidName,
    InvalidOption,
    Key,
    TenantMismatch,
    TenantRequired,
)
from forklift._base.names import CAPS
from forklift._jobs.insert import INSERT_NOW_SQL, _fresh_insert


@dataclass
class Order:
    org: str
    item: str = "x"


app = Forklift()


@app.job(name="tenant.plain")
def plain(ctx: Any, payload: Order) -> None:
    """A kind that says nothing of tenants."""


@app.job(name="tenant.required", tenant_required=True)
def required(ctx: Any, payload: Order) -> None:
    """Refuses an enqueue that names no tenant."""


@app.job(name="tenant.by_field", tenant="org", tenant_required=True)
def by_field(ctx: Any, payload: Order) -> None:
    """Its payload's ``org`` is its tenant."""


@app.job(name="tenant.by_fn", tenant=lambda p: p.org or None)
def by_fn(ctx: Any, payload: Order) -> None:
    """Its tenant is computed; an empty org names none."""


@app.job(name="tenant.keyed", tenant="org", concurrency=[Key(lambda p: p.item, limit=1)])
def keyed(ctx: Any, payload: Order) -> None:
    """Keys and a derived tenant together."""


@app.job(name="tenant.dict", tenant="org")
def by_dict(ctx: Any, payload: dict[str, Any]) -> None:
    """A dict payload: the tenant is one of its keys."""


@pytest.fixture
def bound(dsn: str) -> Iterator[Forklift]:
    app.use(dsn)
    try:
        yield app
    finally:
        app.close()


def stored(conn: psycopg.Connection[Any], ids: list[int]) -> list[tuple[Any, Any]]:
    rows = conn.execute("SELECT id, tenant, enqueued_by FROM forklift.jobs WHERE id = ANY(%s)"
                        " ORDER BY id", (ids,)).fetchall()
    by_id = {r[0]: (r[1], r[2]) for r in rows}
    return [by_id[i] for i in ids]


def count(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute("SELECT count(*) FROM forklift.jobs").fetchone()
    assert row is not None
    return int(row[0])


def test_enqueue_stores_tenant_and_actor(bound: Forklift, conn: psycopg.Connection[Any]) -> None:
    job = plain.enqueue(Order("acme"), tenant="acme", enqueued_by="user:42")
    assert (job.tenant, job.enqueued_by) == ("acme", "user:42")
    assert stored(conn, [job.id]) == [("acme", "user:42")]
    assert bound.get_job(job.id) == job
    assert job.to_json()["tenant"] == "acme"
    none = plain.enqueue(Order("acme"))
    assert (none.tenant, none.enqueued_by) == (None, None)
    assert stored(conn, [none.id]) == [(None, None)]


def test_every_path_writes_both(bound: Forklift, conn: psycopg.Connection[Any]) -> None:
    delayed = plain.enqueue(Order("a"), tenant="t1", enqueued_by="cron", delay=60)
    unique = plain.enqueue(Order("a"), tenant="t2", enqueued_by="api", unique_key="u1")
    after = plain.enqueue(Order("a"), tenant="t3", enqueued_by="me", after=[delayed])
    many = plain.enqueue_many([Order("a"), Order("b")], tenant="t4", enqueued_by="import")
    keyed_many = plain.enqueue_many([Order("a")], tenant="t5", unique_key="u2")
    by_name = bound.enqueue_many([("tenant.plain", Order("a"), {"tenant": "t6"}),
                                  ("tenant.plain", Order("b"))])
    jobs = [delayed.id, unique.id, after.id, *many, *keyed_many, *by_name]
    assert stored(conn, jobs) == [
        ("t1", "cron"), ("t2", "api"), ("t3", "me"), ("t4", "import"), ("t4", "import"),
        ("t5", None), ("t6", None), (None, None)]
    assert (unique.tenant, after.tenant, after.enqueued_by) == ("t2", "t3", "me")


def test_async_paths_write_both(bound: Forklift, conn: psycopg.Connection[Any]) -> None:
    async def go() -> list[int]:
        one = await plain.enqueue_async(Order("a"), tenant="async", enqueued_by="loop")
        more = await by_field.enqueue_many_async([Order("o1"), Order("o2")], enqueued_by="loop")
        await app.aclose()
        return [one.id, *more]

    ids = asyncio.run(go())
    assert stored(conn, ids) == [("async", "loop"), ("o1", "loop"), ("o2", "loop")]


def test_required_tenant_refused_with_its_code(bound: Forklift,
                                               conn: psycopg.Connection[Any]) -> None:
    before = count(conn)
    with pytest.raises(TenantRequired) as err:
        required.enqueue(Order("acme"))
    assert err.value.code == "tenant_required" and isinstance(err.value, EnqueueRefused)
    assert err.value.detail["field"] == "tenant" and "tenant.required" in err.value.message
    with pytest.raises(TenantRequired):
        required.enqueue_many([Order("a"), Order("b")])
    with pytest.raises(TenantRequired):
        bound.enqueue_many([("tenant.plain", Order("a")), ("tenant.required", Order("b"))])
    assert count(conn) == before  # nothing stored, not even the bulk's other rows
    assert required.enqueue(Order("acme"), tenant="acme").tenant == "acme"


def test_tenant_derived_from_a_field_or_a_function(bound: Forklift,
                                                    conn: psycopg.Connection[Any]) -> None:
    assert by_field.enqueue(Order("acme")).tenant == "acme"
    assert by_field.enqueue(Order("acme"), tenant="acme").tenant == "acme"
    assert by_fn.enqueue(Order("globex")).tenant == "globex"
    assert by_fn.enqueue(Order(""), tenant="given").tenant == "given"  # the payload names none
    assert by_fn.enqueue(Order("")).tenant is None
    assert by_dict.enqueue({"org": 7}).tenant == "7"  # a numeric id is its text
    ids = by_field.enqueue_many([Order("a"), Order("b"), Order("a")])
    assert [t for t, _ in stored(conn, ids)] == ["a", "b", "a"]
    kj = keyed.enqueue(Order("acme", item="i1"))
    row = basic.job_row(conn, kj.id)
    assert row["tenant"] == "acme" and row["keys"] is not None
    kids = keyed.enqueue_many([Order("o1", item="i1"), Order("o2", item="i2")])
    rows = conn.execute("SELECT tenant, keys[1] FROM forklift.jobs WHERE id = ANY(%s)"
                        " ORDER BY id", (kids,)).fetchall()
    assert [r[0] for r in rows] == ["o1", "o2"] and rows[0][1] != rows[1][1]


def test_payload_naming_another_tenant_is_refused(bound: Forklift,
                                                  conn: psycopg.Connection[Any]) -> None:
    before = count(conn)
    with pytest.raises(TenantMismatch) as err:
        by_field.enqueue(Order("acme"), tenant="globex")
    assert err.value.code == "tenant_mismatch"
    assert err.value.detail == {"field": "tenant", "kind": "tenant.by_field", "given": "globex",
                                "derived": "acme"}
    with pytest.raises(TenantMismatch):
        by_field.enqueue_many([Order("globex"), Order("acme")], tenant="globex")
    assert count(conn) == before


@pytest.mark.parametrize("value", ["", " acme", "ac\u200bme", "a\x1bb", "x" * 201])
@pytest.mark.parametrize("field", ["tenant", "enqueued_by"])
def test_hidden_characters_and_length_refused(bound: Forklift, field: str, value: str) -> None:
    with pytest.raises(InvalidName) as err:
        plain.enqueue(Order("a"), **{field: value})
    assert err.value.detail["field"] == field
    assert err.value.code == "invalid_name"


def test_caps_and_derived_values_checked(bound: Forklift) -> None:
    assert CAPS["tenant"] == 200 and CAPS["enqueued_by"] == 200
    plain.enqueue(Order("a"), tenant="t" * 200, enqueued_by="é" * 200)
    with pytest.raises(InvalidName) as err:
        by_field.enqueue(Order("ac\u202eme"))
    assert err.value.detail["field"] == "tenant"
    with pytest.raises(InvalidOption) as bad:
        by_dict.enqueue({"org": ["a"]})
    assert bad.value.detail["field"] == "tenant" and "list" in bad.value.message


def test_bad_declarations_refused() -> None:
    other = Forklift()
    with pytest.raises(ConfigError) as err:
        other.job(name="bad.tenant", tenant=3)(plain.fn)  # type: ignore[call-overload]
    assert err.value.detail["field"] == "tenant"
    with pytest.raises(ConfigError) as err:
        other.job(name="bad.required", tenant_required="yes")(plain.fn)  # type: ignore[call-overload]
    assert err.value.detail["field"] == "tenant_required"


def test_a_job_without_tenant_sends_the_same_statement() -> None:
    """No tenant and no actor: the default enqueue's statement and parameters are unchanged."""
    row = plain.row(Order("a"))
    assert (row.tenant, row.enqueued_by) == (None, None)
    assert _fresh_insert(row) == (INSERT_NOW_SQL, (row.queue, row.kind, row.args))
    sql, params = _fresh_insert(plain.row(Order("a"), tenant="acme"))
    assert "tenant" in sql and "acme" in params


def test_batch_targets_carry_their_derived_tenant(bound: Forklift,
                                                  conn: psycopg.Connection[Any]) -> None:
    batch, _ = bound.batch(by_field, [Order("acme"), Order("globex")], caller="test")
    rows = conn.execute("SELECT tenant FROM forklift.jobs WHERE batch_id = %s"
                        " ORDER BY batch_index", (batch.id,)).fetchall()
    assert [r[0] for r in rows] == ["acme", "globex"]
    plain_batch, _ = bound.batch(plain, [Order("a")], caller="test2")
    rows = conn.execute("SELECT tenant FROM forklift.jobs WHERE batch_id = %s",
                        (plain_batch.id,)).fetchall()
    assert rows == [(None,)]
    with pytest.raises(TenantRequired) as err:
        bound.batch(required, [Order("a")], caller="test3")
    assert err.value.detail["target"] == 0


def test_replace_takes_the_new_payloads_tenant(bound: Forklift) -> None:
    first = by_field.enqueue(Order("acme"), unique_key="r1", delay=60, enqueued_by="me")
    again = by_field.enqueue(Order("globex"), unique_key="r1", delay=60, on_conflict="replace")
    assert again.id == first.id and again.replaced
    assert (again.tenant, again.enqueued_by) == ("globex", "me")
    kept = plain.enqueue(Order("a"), unique_key="r2", delay=60, tenant="acme")
    same = plain.enqueue(Order("b"), unique_key="r2", delay=60, on_conflict="replace")
    assert same.id == kept.id and same.tenant == "acme"  # none named: the holder's stays


def test_an_acting_as_scope_names_the_actor(bound: Forklift, conn: psycopg.Connection[Any]) -> None:
    """Every enqueue inside names the scope's actor, unless it gives its own; scopes nest and
    end; None names nobody."""
    with bound.acting_as("user:42"):
        assert bound.actor == "user:42"
        one = plain.enqueue(Order("a"))
        own = plain.enqueue(Order("a"), enqueued_by="api")
        many = plain.enqueue_many([Order("a"), Order("b")], tenant="t")
        by_name = bound.enqueue("tenant.plain", Order("a"))
        batch, _ = bound.batch(plain, [Order("a")], caller="scope")
        with bound.acting_as("import-2026-05"):
            inner = plain.enqueue(Order("a"))
        with bound.acting_as(None):
            nobody = plain.enqueue(Order("a"))
        back = plain.enqueue(Order("a"))
    after = plain.enqueue(Order("a"))
    target = conn.execute("SELECT id FROM forklift.jobs WHERE batch_id = %s",
                          (batch.id,)).fetchone()
    assert target is not None and bound.actor is None
    ids = [one.id, own.id, *many, by_name.id, target[0], inner.id, nobody.id, back.id, after.id]
    assert [a for _, a in stored(conn, ids)] == [
        "user:42", "api", "user:42", "user:42", "user:42", "user:42", "import-2026-05", None,
        "user:42", None]
    assert one.enqueued_by == "user:42"


def test_acting_as_holds_for_its_own_task_or_thread(bound: Forklift,
                                                    conn: psycopg.Connection[Any]) -> None:
    """Two requests served side by side each attribute their own jobs; a thread that did not
    enter the scope names nobody."""
    import threading

    async def request(actor: str) -> int:
        with bound.acting_as(actor):
            await asyncio.sleep(0)  # the other request runs here, inside its own scope
            return (await plain.enqueue_async(Order("a"))).id

    async def both() -> list[int]:
        ids = list(await asyncio.gather(request("user:1"), request("user:2")))
        await app.aclose()
        return ids

    ids = asyncio.run(both())
    outside: list[int] = []
    with bound.acting_as("user:3"):
        t = threading.Thread(target=lambda: outside.append(plain.enqueue(Order("a")).id))
        t.start()
        t.join()
    assert [a for _, a in stored(conn, [*ids, *outside])] == ["user:1", "user:2", None]


@pytest.mark.parametrize("value", ["", "a\x1bb", "x" * 201, 42])
def test_a_bad_actor_is_refused_where_the_scope_opens(bound: Forklift,
                                                      conn: psycopg.Connection[Any],
                                                      value: Any) -> None:
    before = count(conn)
    with pytest.raises(InvalidName) as err, bound.acting_as(value):
        plain.enqueue(Order("a"))
    assert err.value.detail["field"] == "enqueued_by" and count(conn) == before
    assert bound.actor is None
