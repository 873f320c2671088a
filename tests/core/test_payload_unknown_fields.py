"""A refused payload names every field no type declares, beside the fields it left missing."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import psycopg
import pytest
from bound import bound_to, count_jobs
from pydantic import BaseModel

from forklift import Forklift, InvalidPayload, JobContext

app = Forklift()


@dataclass
class Email:
    to: str
    subject: str


class Address(BaseModel):
    street: str
    zip: str


class Customer(BaseModel):
    name: str
    address: Address
    previous: list[Address] = []


@app.job(name="unknown.email")
def send(ctx: JobContext, email: Email) -> None: ...


@app.job(name="unknown.customer")
def customer(ctx: JobContext, c: Customer) -> None: ...


@pytest.fixture
def bound(dsn: str) -> Iterator[Forklift]:
    with bound_to(app, dsn) as bound_app:
        yield bound_app


def refusal(kind: Any, payload: Any) -> InvalidPayload:
    with pytest.raises(InvalidPayload) as refused:
        kind.enqueue(payload)
    with pytest.raises(InvalidPayload):
        kind.enqueue_many([payload])
    return refused.value


def test_a_misspelt_required_field_is_named_as_unknown_and_the_missing_one_too(
    bound: Forklift, conn: psycopg.Connection[Any]
) -> None:
    exc = refusal(send, {"to": "x@example.com", "subjcet": "hi"})
    assert "subjcet: unknown field" in exc.message
    assert "subject: Field required" in exc.message
    assert exc.detail["field"] == "subjcet" and exc.detail["reason"] == "unknown_field"
    assert exc.detail["unknown"] == ["subjcet"]
    assert exc.detail["problems"] == [{"field": "subject", "message": "Field required"}]
    assert "\n" not in exc.message
    assert count_jobs(conn) == 0


def test_nested_unknown_fields_are_named_with_their_paths(
    bound: Forklift, conn: psycopg.Connection[Any]
) -> None:
    exc = refusal(customer, {"name": "a", "address": {"street": "s", "zpi": "1"},
                             "previous": [{"street": "t", "zip": "2", "flat": 3}]})
    assert exc.detail["unknown"] == ["address.zpi", "previous[0].flat"]
    for named in ("address.zpi: unknown field", "previous[0].flat: unknown field",
                  "address.zip: Field required"):
        assert named in exc.message
    assert count_jobs(conn) == 0


def test_every_unknown_field_of_a_valid_payload_is_named(bound: Forklift) -> None:
    exc = refusal(send, {"to": "a", "subject": "s", "cc": "b", "bcc": "c"})
    assert exc.detail["unknown"] == ["cc", "bcc"] and exc.detail["field"] == "cc"
    assert "cc: unknown field" in exc.message and "bcc: unknown field" in exc.message


def test_a_payload_with_no_unknown_field_names_only_its_problems(bound: Forklift) -> None:
    exc = refusal(customer, {"name": 5, "address": {"street": "s"}})
    assert "unknown field" not in exc.message and "reason" not in exc.detail
    assert exc.detail["field"] == "name"
    assert [p["field"] for p in exc.detail["problems"]] == ["name", "address.zip"]
    assert "address.zip: Field required" in exc.message
