"""Strict payloads and the unique-key conflict policies.

An unknown or misspelt payload field is refused at enqueue, naming it (a kind may opt out with
``extra="ignore"``); at run time unknown fields are ignored, so jobs queued before a deploy
that removed a field still run. ``on_conflict`` is checked, and ``replace`` gives a live job
that is not running the new args, priority and run_at in one statement.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from bound import bound_to, count_jobs
from pydantic import BaseModel, ConfigDict
from typing_extensions import TypedDict

from forklift import Forklift, InvalidOption, InvalidPayload, JobContext, UniqueConflict

app = Forklift()


@dataclass
class Email:
    to: str
    subject: str = "(none)"


class Line(BaseModel):
    sku: str
    qty: int = 1


class Order(BaseModel):
    number: str
    lines: list[Line] = []


class Loose(BaseModel):
    model_config = ConfigDict(extra="allow")
    a: int


class Tree(BaseModel):
    value: int
    kids: list[Tree] = []


class Point(TypedDict):
    x: int
    y: int


@dataclass
class Wrapper:
    points: list[Point]
    email: Email | None = None


@app.job(name="strict.email")
def send(ctx: JobContext, email: Email) -> None: ...


@app.job(name="strict.order")
def order(ctx: JobContext, o: Order) -> None: ...


@app.job(name="strict.loose")
def loose(ctx: JobContext, o: Loose) -> None: ...


@app.job(name="strict.wrapper")
def wrapper(ctx: JobContext, w: Wrapper) -> None: ...


@app.job(name="strict.tree")
def tree(ctx: JobContext, t: Tree) -> None: ...


@app.job(name="strict.point")
def point(ctx: JobContext, p: Point) -> None: ...


@app.job(name="strict.lenient", extra="ignore")
def lenient(ctx: JobContext, email: Email) -> None: ...


@app.job(name="strict.free")
def free(ctx: JobContext, args: dict[str, Any]) -> None: ...


@pytest.fixture
def bound(dsn: str) -> Iterator[Forklift]:
    with bound_to(app, dsn) as bound_app:
        yield bound_app


@pytest.mark.parametrize(("kind", "payload", "field"), [
    (send, {"to": "x@example.com", "subjcet": "hi"}, "subjcet"),
    (order, {"number": "1", "lines": [{"sku": "a"}, {"sku": "b", "qtty": 2}]}, "lines[1].qtty"),
    (wrapper, {"points": [{"x": 1, "y": 2, "z": 3}]}, "points[0].z"),
    (wrapper, {"points": [], "email": {"to": "a", "cc": "b"}}, "email.cc"),
    (wrapper, {"points": [], "extra": 1}, "extra"),
    (tree, {"value": 1, "kids": [{"value": 2, "kids": [{"value": 3, "kidz": []}]}]},
     "kids[0].kids[0].kidz"),
    (point, {"x": 1, "y": 2, "z": 3}, "z"),
    (loose, {"a": 1, "nested": {"ok": 1}}, None),
], ids=["dataclass", "nested-model", "typeddict", "nested-dataclass", "top", "recursive",
        "flat-typeddict", "model-allows-extra"])
def test_an_unknown_field_is_refused_at_enqueue_naming_it(
    bound: Forklift, conn: psycopg.Connection[Any], kind: Any, payload: Any, field: str | None
) -> None:
    if field is None:  # the type chose to allow extra fields
        assert kind.enqueue(payload).args == payload
        return
    with pytest.raises(InvalidPayload) as refused:
        kind.enqueue(payload)
    assert refused.value.code == "invalid_payload"
    assert refused.value.detail["field"] == field
    assert refused.value.detail["reason"] == "unknown_field"
    assert repr(field) in refused.value.message
    with pytest.raises(InvalidPayload):
        kind.enqueue_many([payload])
    assert count_jobs(conn) == 0


def test_declared_fields_and_own_choices_are_kept(bound: Forklift, conn: psycopg.Connection[Any]) -> None:
    assert send.enqueue({"to": "a"}).args == {"to": "a", "subject": "(none)"}
    assert order.enqueue({"number": "1", "lines": [{"sku": "a", "qty": 2}]}).args == {
        "number": "1", "lines": [{"sku": "a", "qty": 2}]}
    # A model that allows extra fields keeps them; a free-form dict keeps everything.
    assert loose.enqueue({"a": 1, "b": 2}).args == {"a": 1, "b": 2}
    assert free.enqueue({"anything": [1]}).args == {"anything": [1]}
    # A typed object carries only its fields.
    assert send.enqueue(Email("b", "s")).args == {"to": "b", "subject": "s"}


def test_extra_ignore_drops_unknown_fields(bound: Forklift) -> None:
    assert lenient.enqueue({"to": "a", "subjcet": "hi"}).args == {"to": "a", "subject": "(none)"}


def test_unknown_fields_are_ignored_at_run_time() -> None:
    # A job stored before a deploy that removed a field must still run.
    assert send.payload.validate({"to": "a", "gone": 1}, kind=send.name) == Email("a")


def test_a_bad_extra_setting_is_a_config_error() -> None:
    from forklift import ConfigError

    with pytest.raises(ConfigError, match="extra"):
        Forklift("postgresql://nobody@127.0.0.1:1/never").job(name="k", extra="allow")(  # type: ignore[call-overload]
            lambda ctx, p: None)


# -- on_conflict ------------------------------------------------------------------------------
def test_an_unknown_on_conflict_is_refused(bound: Forklift, conn: psycopg.Connection[Any]) -> None:
    for value in ("replce", "", None, "RAISE"):
        with pytest.raises(InvalidOption) as refused:
            send.enqueue({"to": "a"}, unique_key="k", on_conflict=value)  # type: ignore[arg-type]
        assert refused.value.detail["field"] == "on_conflict"
    assert count_jobs(conn) == 0


def state(conn: psycopg.Connection[Any], job_id: int) -> tuple[Any, ...]:
    row = conn.execute(
        "SELECT args, priority, state, run_at, attempt, queue FROM forklift.jobs WHERE id = %s",
        (job_id,),
    ).fetchone()
    assert row is not None
    return tuple(row)


def test_replace_updates_a_waiting_holder_in_place(bound: Forklift, conn: psycopg.Connection[Any]) -> None:
    first = send.enqueue({"to": "a", "subject": "v1"}, unique_key="digest", delay=3600, priority=5)
    assert (first.replaced, first.reused, first.state) == (False, False, "scheduled")
    later = datetime.now(UTC) + timedelta(hours=2)
    second = send.enqueue({"to": "a", "subject": "v2"}, unique_key="digest", at=later, priority=1,
                          on_conflict="replace")
    assert second.id == first.id
    assert (second.replaced, second.reused) == (True, True)
    assert second.args == {"to": "a", "subject": "v2"}
    args, priority, st, run_at, attempt, _ = state(conn, first.id)
    assert (args, priority, st, attempt) == ({"to": "a", "subject": "v2"}, 1, "scheduled", 0)
    assert abs((run_at - later).total_seconds()) < 0.001
    # Due now: it becomes available, and workers are told (the insert trigger does not see it).
    with psycopg.connect(conn.info.dsn, autocommit=True) as listener:
        listener.execute("LISTEN forklift_wake")
        third = send.enqueue({"to": "a", "subject": "v3"}, unique_key="digest",
                             on_conflict="replace")
        assert third.state == "available" and third.replaced
        woke = [n.payload for n in listener.notifies(timeout=5, stop_after=1)]
    assert woke == ["default"]
    assert count_jobs(conn) == 1


def test_replace_without_a_holder_inserts(bound: Forklift) -> None:
    job = send.enqueue({"to": "a"}, unique_key="fresh", on_conflict="replace")
    assert (job.replaced, job.reused, job.state) == (False, False, "available")


def test_replace_leaves_a_running_holder_alone_and_says_so(
    bound: Forklift, conn: psycopg.Connection[Any]
) -> None:
    first = send.enqueue({"to": "a", "subject": "v1"}, unique_key="busy")
    conn.execute(
        "UPDATE forklift.jobs SET state = 'running', attempt = 1, attempted_at = now(),"
        " worker_id = 'w', fence = 1, lease_expires_at = now() + interval '1 minute'"
        " WHERE id = %s", (first.id,))
    again = send.enqueue({"to": "a", "subject": "v2"}, unique_key="busy", on_conflict="replace")
    assert again.id == first.id
    assert (again.reused, again.replaced, again.state) == (True, False, "running")
    assert state(conn, first.id)[0] == {"to": "a", "subject": "v1"}
    assert count_jobs(conn) == 1


def test_return_existing_and_raise_are_unchanged(bound: Forklift, conn: psycopg.Connection[Any]) -> None:
    first = send.enqueue({"to": "a", "subject": "v1"}, unique_key="k")
    same = send.enqueue({"to": "a", "subject": "v2"}, unique_key="k")
    assert (same.id, same.reused, same.replaced) == (first.id, True, False)
    assert state(conn, first.id)[0]["subject"] == "v1"
    with pytest.raises(UniqueConflict):
        send.enqueue({"to": "a"}, unique_key="k", on_conflict="raise")


def test_replace_async(bound: Forklift, conn: psycopg.Connection[Any]) -> None:
    import asyncio

    async def go() -> tuple[int, int, bool]:
        try:
            a = await send.enqueue_async({"to": "a", "subject": "1"}, unique_key="ak", delay=60)
            b = await send.enqueue_async({"to": "a", "subject": "2"}, unique_key="ak", delay=60,
                                         on_conflict="replace")
            return a.id, b.id, b.replaced
        finally:
            await app.aclose()

    a, b, replaced = asyncio.run(go())
    assert a == b and replaced
    assert state(conn, a)[0]["subject"] == "2"
