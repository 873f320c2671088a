"""The unicode and JSON family at enqueue and in results.

Every value is either refused with a typed error that names the field, storing nothing, or
stored exactly as sent: never altered on the way in, never stored and then refused.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import psycopg
import pytest
from apps import basic
from bound import count_jobs
from helpers import wait_until

from forklift import EnqueueRefused, Forklift, JobContext, NotJSON, NulCharacter
from forklift._jobs.payload import MAX_DEPTH, MAX_INT_DIGITS, result_text, to_json_text


@pytest.fixture
def app(dsn: str) -> Iterator[Forklift]:
    with basic.bound(dsn) as bound_app:
        yield bound_app


def nested(depth: int, leaf: Any = 1) -> Any:
    """``depth`` lists, one inside the other, around ``leaf``."""
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


@dataclass
class Note:
    text: str
    tags: dict[str, int]


HUGE = 10**5000
SURROGATE = "\ud800"

Case = tuple[str, Callable[[Forklift], Any], type[EnqueueRefused], str]

REFUSED: list[Case] = [
    ("surrogate", lambda a: a.enqueue("basic.anything", {"a": ["ok", SURROGATE]}), NotJSON, "a[1]"),
    ("surrogate-low", lambda a: a.enqueue("basic.anything", {"x": "a\udc00b"}), NotJSON, "x"),
    ("surrogate-key", lambda a: a.enqueue("basic.anything", {"k": {SURROGATE: 1}}), NotJSON,
     "k.\ud800"),
    ("surrogate-typed", lambda a: a.enqueue("basic.echo", basic.Greeting(SURROGATE)), NotJSON,
     "name"),
    ("surrogate-dict-to-typed", lambda a: a.enqueue("basic.echo", {"name": "x" + SURROGATE}),
     NotJSON, "name"),
    ("surrogate-meta", lambda a: a.enqueue("basic.noop", {}, meta={"who": SURROGATE}), NotJSON,
     "who"),
    ("nan-meta", lambda a: a.enqueue("basic.noop", {}, meta={"n": float("nan")}), NotJSON, "n"),
    ("inf-nested", lambda a: a.enqueue("basic.anything", {"a": {"b": [float("-inf")]}}), NotJSON,
     "a.b[0]"),
    ("int-key", lambda a: a.enqueue("basic.anything", {"m": {1: "a", "1": "b"}}), NotJSON, "m"),
    ("none-key", lambda a: a.enqueue("basic.anything", {None: 1}), NotJSON, "(root)"),
    ("bool-key", lambda a: a.enqueue("basic.anything", {"x": [{True: 1}]}), NotJSON, "x[0]"),
    ("int-key-meta", lambda a: a.enqueue("basic.noop", {}, meta={"m": {2: "b"}}), NotJSON, "m"),
    ("huge-int", lambda a: a.enqueue("basic.anything", {"n": HUGE}), NotJSON, "n"),
    ("huge-negative", lambda a: a.enqueue("basic.anything", [1, -HUGE]), NotJSON, "[1]"),
    ("huge-int-meta", lambda a: a.enqueue("basic.noop", {}, meta={"n": HUGE}), NotJSON, "n"),
    ("huge-int-typed", lambda a: a.enqueue("basic.echo", basic.Greeting("a", HUGE)), NotJSON,
     "times"),
    ("deep", lambda a: a.enqueue("basic.anything", {"d": nested(MAX_DEPTH)}), NotJSON,
     "d" + "[0]" * (MAX_DEPTH - 1)),
    ("deep-meta", lambda a: a.enqueue("basic.noop", {}, meta={"d": nested(MAX_DEPTH)}), NotJSON,
     "d" + "[0]" * (MAX_DEPTH - 1)),
    ("very-deep", lambda a: a.enqueue("basic.anything", nested(100_000)), NotJSON,
     "[0]" * MAX_DEPTH),
    ("nul-in-key-meta", lambda a: a.enqueue("basic.noop", {}, meta={"a\x00": 1}), NulCharacter,
     "a\x00"),
]


@pytest.mark.parametrize(("make", "error", "field"), [c[1:] for c in REFUSED],
                         ids=[c[0] for c in REFUSED])
def test_what_json_storage_would_alter_is_refused_naming_the_field(
    app: Forklift, conn: psycopg.Connection[Any], make: Callable[[Forklift], Any],
    error: type[EnqueueRefused], field: str,
) -> None:
    with pytest.raises(error) as refused:
        make(app)
    exc = refused.value
    assert type(exc) is error and exc.code == error.code
    assert exc.detail["field"] == field
    assert "\n" not in exc.message
    assert count_jobs(conn) == 0


def test_the_same_refusals_hold_for_enqueue_many(app: Forklift, conn: psycopg.Connection[Any]) -> None:
    for bad in ({"s": SURROGATE}, {"n": HUGE}, {3: "x"}, nested(MAX_DEPTH + 5)):
        with pytest.raises(NotJSON):
            basic.anything.enqueue_many([{"ok": 1}, bad])
    assert count_jobs(conn) == 0


@pytest.mark.parametrize("value", [
    {"n": 10**MAX_INT_DIGITS - 1},
    {"n": -(10**MAX_INT_DIGITS - 1)},
    {"deep": nested(MAX_DEPTH - 1, "leaf")},
    {"astral": "\U0001f600 \u00e9 \u2028 \ufeff", "\U0001f600": "key"},
    {"tiny": 5e-324, "frac": 123.456, "small": 1e-7},
    [True, False, None, 0, "", [], {}],
], ids=["big-int", "big-negative", "deepest", "unicode", "floats", "scalars"])
def test_values_at_the_limits_are_stored_exactly_as_sent(
    app: Forklift, conn: psycopg.Connection[Any], value: Any
) -> None:
    job = basic.anything.enqueue(value)
    assert job.args == value
    stored = conn.execute("SELECT args::text FROM forklift.jobs WHERE id = %s", (job.id,)).fetchone()
    assert stored is not None and json.loads(stored[0]) == value
    [again] = basic.anything.enqueue_many([value])
    other = conn.execute("SELECT args::text FROM forklift.jobs WHERE id = %s", (again,)).fetchone()
    assert other is not None and json.loads(other[0]) == value


def test_a_huge_integer_is_refused_before_anything_is_stored(
    app: Forklift, conn: psycopg.Connection[Any]
) -> None:
    # Before: the row was written (pydantic serialises any int) and only reading it back
    # raised ValueError, so the caller was told "failed" about a job that existed.
    with pytest.raises(NotJSON) as refused:
        basic.anything.enqueue({"n": 10**MAX_INT_DIGITS})
    assert str(MAX_INT_DIGITS) in refused.value.message
    assert count_jobs(conn) == 0


def test_typed_int_keys_still_round_trip_through_the_declared_type() -> None:
    app = Forklift("postgresql://nobody@127.0.0.1:1/never")

    @app.job(name="k")
    def handler(ctx: JobContext, note: Note) -> None: ...

    # A declared dict[str, int] gets its keys as sent; a typed object's own fields are its type's.
    text = handler.row({"text": "t", "tags": {"a": 1}}).args
    assert json.loads(text) == {"text": "t", "tags": {"a": 1}}
    with pytest.raises(NotJSON) as refused:
        handler.row({"text": "t", "tags": {1: 1}})
    assert refused.value.detail["field"] == "tags"


def test_no_check_hits_the_recursion_limit() -> None:
    deep: Any = {}
    cursor = deep
    for _ in range(50_000):
        cursor["a"] = {}
        cursor = cursor["a"]
    with pytest.raises(NotJSON) as refused:
        to_json_text(deep, what="meta", kind="k", limit=1 << 30)
    assert refused.value.detail["field"] == ".".join(["a"] * MAX_DEPTH)
    assert "nested deeper than" in refused.value.message


# -- results ----------------------------------------------------------------------------------
results = Forklift()


@results.job(name="json.surrogate", max_attempts=3)
def return_surrogate(ctx: JobContext, args: dict[str, Any]) -> Any:
    return {"text": "a" + SURROGATE}


@results.job(name="json.int_key", max_attempts=3)
def return_int_key(ctx: JobContext, args: dict[str, Any]) -> Any:
    return {1: "one", "1": "uno"}


def test_result_text_refuses_what_it_cannot_store_exactly() -> None:
    codec = return_surrogate.result
    with pytest.raises(NotJSON) as refused:
        result_text(codec, {"text": SURROGATE}, kind="k", limit=1 << 20)
    assert refused.value.detail["field"] == "text"
    with pytest.raises(NotJSON):
        result_text(codec, {"n": HUGE}, kind="k", limit=1 << 20)
    assert result_text(codec, None, kind="k", limit=1 << 20) == "null"
    assert result_text(codec, {"ok": [1, "é"]}, kind="k", limit=1 << 20) == '{"ok":[1,"é"]}'


def test_a_result_that_cannot_be_stored_fails_as_invalid_result_not_retried(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    results.use(dsn)
    try:
        ids = [return_surrogate.enqueue({}).id, return_int_key.enqueue({}).id]
        with basic.running_worker(results, queues=["default"]):
            wait_until(lambda: conn.execute(
                "SELECT count(*) = 2 FROM forklift.jobs WHERE id = ANY(%s) AND state = 'dead'",
                (ids,)).fetchone()[0], timeout=30, message="the jobs did not end dead")  # type: ignore[index]
        rows = conn.execute(
            "SELECT attempt, errors FROM forklift.jobs WHERE id = ANY(%s) ORDER BY id", (ids,)
        ).fetchall()
    finally:
        results.close()
    for attempt, errors in rows:
        assert attempt == 1  # terminal at once, not retried as an "error"
        assert [e["code"] for e in errors] == ["invalid_result"]
    assert "text" in rows[0][1][0]["message"]
