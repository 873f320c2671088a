"""Declaring kinds (payload and result types, handler shapes) and every refusal at enqueue.

A refusal is a typed error with a stable code, names the offending field where there is one,
and stores nothing: each refusal test counts the jobs table afterwards.
"""

from __future__ import annotations

import sys
import typing
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from apps import basic
from bound import count_jobs

from forklift import (
    ConfigError,
    EnqueueRefused,
    Forklift,
    ForkliftError,
    InvalidName,
    InvalidOption,
    InvalidPayload,
    JobContext,
    KindAlreadyDeclared,
    NotJSON,
    NulCharacter,
    PayloadTooLarge,
    UniqueConflict,
    UnknownKind,
)

# A DSN that is never dialled: declaring and validating must not touch the database.
NOWHERE = "postgresql://nobody@127.0.0.1:1/never"


@pytest.fixture
def app(dsn: str) -> Iterator[Forklift]:
    with basic.bound(dsn) as bound_app:
        yield bound_app


# -- declaring -------------------------------------------------------------------------------
def test_declaring_a_kind_twice_is_refused() -> None:
    app = Forklift(NOWHERE)

    @app.job(name="mail.send")
    def first(ctx: JobContext, args: dict[str, Any]) -> None: ...

    with pytest.raises(KindAlreadyDeclared) as refused:

        @app.job(name="mail.send", queue="other")
        def second(ctx: JobContext, args: dict[str, Any]) -> None: ...

    assert refused.value.code == "kind_already_declared"
    assert "mail.send" in refused.value.message
    assert app.kind("mail.send") is first
    assert app.kind("mail.send").queue == "default"


def test_a_kind_is_named_after_its_function_by_default() -> None:
    app = Forklift(NOWHERE)

    def handler(ctx: JobContext, args: dict[str, Any]) -> None: ...

    kind = app.job(handler)
    assert kind.name == f"{__name__}.test_a_kind_is_named_after_its_function_by_default.<locals>.handler"
    with pytest.raises(KindAlreadyDeclared):
        app.job(handler)


def test_sync_and_async_handlers_are_told_apart() -> None:
    assert basic.echo.is_async is False
    assert basic.order.is_async is True
    assert basic.invoice.is_async is False
    assert basic.noop.is_async is True


def test_declared_options_are_kept() -> None:
    kind = basic.app.kind("basic.flaky")
    assert (kind.queue, kind.priority, kind.max_attempts) == ("default", 0, 3)
    assert kind.retry.kind == "exponential" and kind.retry.base == 0.3
    assert basic.app.kind("basic.order").queue == "orders"
    assert basic.app.kind("basic.report").timeout == 60


def _declare(fn: Callable[..., Any], **options: Any) -> None:
    Forklift(NOWHERE).job(name="k", **options)(fn)


def _no_params() -> None: ...
def _one_param(ctx: JobContext) -> None: ...
def _three_required(ctx: JobContext, payload: dict[str, Any], extra: int) -> None: ...
def _keyword_payload(ctx: JobContext, *, payload: dict[str, Any]) -> None: ...
def _generator(ctx: JobContext, payload: dict[str, Any]) -> Iterator[int]:
    yield 1
def _unresolvable(ctx: JobContext, payload: NoSuchType) -> None: ...  # type: ignore[name-defined]  # noqa: F821


@pytest.mark.parametrize(
    "handler",
    [_no_params, _one_param, _three_required, _keyword_payload, _generator, _unresolvable],
    ids=["no-params", "one-param", "three-required", "keyword-payload", "generator", "unresolvable"],
)
def test_handler_signatures_are_checked_at_declaration(handler: Callable[..., Any]) -> None:
    with pytest.raises(ConfigError) as refused:
        _declare(handler)
    assert refused.value.code == "config_error"
    assert "k" in refused.value.message


def test_a_handler_may_take_extra_parameters_with_defaults() -> None:
    def handler(ctx: JobContext, payload: dict[str, Any], retries: int = 3) -> None: ...

    _declare(handler)


class _PlainTypedDict(typing.TypedDict):
    a: int


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="typing.TypedDict works on 3.12+")
def test_a_payload_type_pydantic_cannot_build_is_a_config_error() -> None:
    def handler(ctx: JobContext, payload: _PlainTypedDict) -> None: ...

    with pytest.raises(ConfigError, match="payload type"):
        _declare(handler)


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"priority": 40_000}, "priority"),
        ({"max_attempts": 0}, "max_attempts"),
        ({"queue": ""}, "queue"),
        ({"failure_codes": ["Not Snake"]}, None),
        ({"failure_codes": ["timeout"]}, None),
        ({"errors": "some"}, None),
    ],
)
def test_bad_declared_options_are_refused(options: dict[str, Any], field: str | None) -> None:
    def handler(ctx: JobContext, payload: dict[str, Any]) -> None: ...

    with pytest.raises(ForkliftError) as refused:
        _declare(handler, **options)
    if field is not None:
        assert refused.value.detail.get("field") == field


# -- payload and result types -------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kind", "given", "stored"),
    [
        (basic.echo, basic.Greeting("ada", 2), {"name": "ada", "times": 2}),
        (basic.echo, {"name": "ada"}, {"name": "ada", "times": 1}),
        (basic.echo, {"name": "ada", "times": "3"}, {"name": "ada", "times": 3}),
        (basic.order, {"sku": "A-1", "qty": 2}, {"sku": "A-1", "qty": 2}),
        (
            basic.invoice,
            basic.Invoice(number="7", lines=[basic.Line(sku="a", qty=1)]),
            {"number": "7", "lines": [{"sku": "a", "qty": 1}]},
        ),
        (basic.invoice, {"number": "8"}, {"number": "8", "lines": []}),
        (basic.anything, [1, "two", None, {"three": 3.5}], [1, "two", None, {"three": 3.5}]),
        (basic.anything, {"point": (1, 2)}, {"point": [1, 2]}),
    ],
    ids=["dataclass", "dict-to-dataclass", "coerced", "typeddict", "model", "dict-to-model",
         "any", "tuple"],
)
def test_payloads_are_validated_and_stored_as_json(
    app: Forklift, conn: psycopg.Connection[Any], kind: Any, given: Any, stored: Any
) -> None:
    job = kind.enqueue(given)
    assert job.args == stored
    row = conn.execute("SELECT args FROM forklift.jobs WHERE id = %s", (job.id,)).fetchone()
    assert row is not None and row[0] == stored
    # What a worker hands the handler validates again and stores the same way.
    again = kind.payload.validate(row[0], kind=kind.name)
    assert kind.payload.dump(again, kind=kind.name) == stored


def test_results_are_typed_too() -> None:
    assert basic.echo.result.dump(basic.Echoed("x"), kind="k") == {"text": "x"}
    assert basic.invoice.result.dump(basic.Paid(number="1", items=2), kind="k") == {
        "number": "1", "items": 2,
    }
    with pytest.raises(InvalidPayload) as refused:
        basic.echo.result.validate({"nope": 1}, kind="basic.echo")
    assert refused.value.detail["field"] == "text"
    assert "result for basic.echo" in refused.value.message


# -- refusals ---------------------------------------------------------------------------------
MiB = 1024 * 1024
AWARE = datetime(2030, 1, 1, tzinfo=UTC)

Refusal = tuple[str, Callable[[Forklift], Any], type[EnqueueRefused], str, str | None]

REFUSALS: list[Refusal] = [
    ("unknown-kind", lambda a: a.enqueue("basic.nope", {}), UnknownKind, "unknown_kind", None),
    ("missing-field", lambda a: a.enqueue("basic.echo", {"times": 2}),
     InvalidPayload, "invalid_payload", "name"),
    ("wrong-type", lambda a: a.enqueue("basic.echo", {"name": "x", "times": "many"}),
     InvalidPayload, "invalid_payload", "times"),
    ("nested-field",
     lambda a: a.enqueue("basic.invoice", {"number": "1", "lines": [{"sku": "a", "qty": "x"}]}),
     InvalidPayload, "invalid_payload", "lines.0.qty"),
    ("typeddict-field", lambda a: a.enqueue("basic.order", {"sku": "a"}),
     InvalidPayload, "invalid_payload", "qty"),
    ("set", lambda a: a.enqueue("basic.anything", {"ids": {1, 2}}), NotJSON, "not_json", "ids"),
    ("object", lambda a: a.enqueue("basic.anything", {"o": object()}), NotJSON, "not_json", None),
    ("nan", lambda a: a.enqueue("basic.anything", {"x": [1.0, float("nan")]}),
     NotJSON, "not_json", "x[1]"),
    ("infinity", lambda a: a.enqueue("basic.anything", float("inf")), NotJSON, "not_json", "(root)"),
    ("typed-nan", lambda a: a.enqueue("basic.measure", basic.Reading(float("nan"))),
     NotJSON, "not_json", "value"),
    ("too-large", lambda a: a.enqueue("basic.anything", {"blob": "x" * MiB}),
     PayloadTooLarge, "payload_too_large", None),
    ("nul", lambda a: a.enqueue("basic.echo", {"name": "a\x00b"}), NulCharacter, "nul_character", "name"),
    ("nul-deep", lambda a: a.enqueue("basic.anything", {"a": [{"b": "\x00"}]}),
     NulCharacter, "nul_character", "a[0].b"),
    ("nul-key", lambda a: a.enqueue("basic.anything", {"a": {"b\x00c": 1}}),
     NulCharacter, "nul_character", "a.b\x00c"),
    ("nul-meta", lambda a: a.enqueue("basic.noop", {}, meta={"who": "\x00"}),
     NulCharacter, "nul_character", "who"),
    ("negative-delay", lambda a: a.enqueue("basic.noop", {}, delay=-1), InvalidOption,
     "invalid_option", "delay"),
    ("negative-timedelta", lambda a: a.enqueue("basic.noop", {}, delay=timedelta(seconds=-5)),
     InvalidOption, "invalid_option", "delay"),
    ("delay-and-at", lambda a: a.enqueue("basic.noop", {}, delay=5, at=AWARE), InvalidOption,
     "invalid_option", "delay"),
    ("naive-at", lambda a: a.enqueue("basic.noop", {}, at=datetime(2030, 1, 1)), InvalidOption,
     "invalid_option", "at"),
    ("priority-high", lambda a: a.enqueue("basic.noop", {}, priority=32768), InvalidOption,
     "invalid_option", "priority"),
    ("priority-low", lambda a: a.enqueue("basic.noop", {}, priority=-32769), InvalidOption,
     "invalid_option", "priority"),
    ("max-attempts", lambda a: a.enqueue("basic.noop", {}, max_attempts=0), InvalidOption,
     "invalid_option", "max_attempts"),
    ("empty-queue", lambda a: a.enqueue("basic.noop", {}, queue=""), InvalidName,
     "invalid_name", "queue"),
    ("tags-string", lambda a: a.enqueue("basic.noop", {}, tags="urgent"), InvalidOption,
     "invalid_option", "tags"),
    ("meta-list", lambda a: a.enqueue("basic.noop", {}, meta=["x"]), InvalidOption,
     "invalid_option", "meta"),
    ("empty-unique-key", lambda a: a.enqueue("basic.noop", {}, unique_key=""), InvalidName,
     "invalid_name", "unique_key"),
    ("unknown-option", lambda a: a.enqueue("basic.noop", {}, priorty=1), None, "", None),  # type: ignore[list-item]
]


@pytest.mark.parametrize(
    ("make", "error", "code", "field"), [r[1:] for r in REFUSALS], ids=[r[0] for r in REFUSALS]
)
def test_refusals_have_a_stable_code_name_the_field_and_store_nothing(
    app: Forklift,
    conn: psycopg.Connection[Any],
    make: Callable[[Forklift], Any],
    error: type[EnqueueRefused] | None,
    code: str,
    field: str | None,
) -> None:
    if error is None:
        # A misspelt option is a programming error, refused by Python itself.
        with pytest.raises(TypeError):
            make(app)
        assert count_jobs(conn) == 0
        return
    with pytest.raises(error) as refused:
        make(app)
    exc = refused.value
    assert isinstance(exc, EnqueueRefused)
    assert exc.code == code
    assert exc.to_dict()["code"] == code
    assert exc.message and "\n" not in exc.message
    if field is not None:
        assert exc.detail["field"] == field
        assert repr(field) in exc.message or field in exc.message
    assert count_jobs(conn) == 0


def test_a_refused_row_refuses_the_whole_bulk(app: Forklift, conn: psycopg.Connection[Any]) -> None:
    good = {"name": "a"}
    with pytest.raises(InvalidPayload) as refused:
        basic.echo.enqueue_many([good, good, {"name": 5.5}, good])
    assert refused.value.detail["field"] == "name"
    with pytest.raises(UnknownKind):
        app.enqueue_many([("basic.echo", good), ("basic.missing", {})])
    assert count_jobs(conn) == 0


def test_the_payload_cap_is_one_mebibyte_by_default(app: Forklift, conn: psycopg.Connection[Any]) -> None:
    assert app.payload_limit == MiB
    # {"blob":"..."} is 11 bytes of JSON around the string.
    job = basic.anything.enqueue({"blob": "x" * (MiB - 11)})
    assert job.id
    with pytest.raises(PayloadTooLarge) as refused:
        basic.anything.enqueue({"blob": "x" * (MiB - 10)})
    assert refused.value.detail == {"kind": "basic.anything", "size": MiB + 1, "limit": MiB}
    assert count_jobs(conn) == 1


def test_the_payload_cap_is_configurable_per_app(dsn: str, conn: psycopg.Connection[Any]) -> None:
    small = Forklift(dsn, payload_limit=64)

    @small.job(name="small.kind")
    def handler(ctx: JobContext, args: dict[str, Any]) -> None: ...

    try:
        handler.enqueue({"text": "x" * 40})
        with pytest.raises(PayloadTooLarge) as refused:
            handler.enqueue({"text": "x" * 60})
        assert refused.value.detail["limit"] == 64
        # meta counts against the same cap
        with pytest.raises(PayloadTooLarge):
            handler.enqueue({}, meta={"note": "y" * 80})
    finally:
        small.close()
    assert count_jobs(conn) == 1


def test_unique_conflict_is_an_enqueue_refusal() -> None:
    assert issubclass(UniqueConflict, EnqueueRefused)
    assert UniqueConflict.code == "unique_conflict"


def test_error_codes_are_stable() -> None:
    import forklift

    expected = {
        "ForkliftError": "forklift_error",
        "ConfigError": "config_error",
        "DatabaseUnavailable": "database_unavailable",
        "SchemaOutdated": "schema_outdated",
        "KindAlreadyDeclared": "kind_already_declared",
        "EnqueueRefused": "enqueue_refused",
        "UnknownKind": "unknown_kind",
        "InvalidPayload": "invalid_payload",
        "NotJSON": "not_json",
        "PayloadTooLarge": "payload_too_large",
        "NulCharacter": "nul_character",
        "InvalidOption": "invalid_option",
        "UniqueConflict": "unique_conflict",
        "JobNotFound": "job_not_found",
    }
    assert {name: getattr(forklift, name).code for name in expected} == expected
