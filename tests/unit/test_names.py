"""Identifiers never hide characters (the library side; the console's is in tests/console).

Queue names, kinds, tags, schedule and backfill names, unique keys and batch callers/keys are
refused where they enter, by one checker, when they hold a control, format, line or paragraph
separator character (or a lone surrogate), have whitespace at either end, or exceed their cap.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from bound import bound_to, count_jobs

from forklift import ConfigError, Forklift, InvalidName, InvalidOption, JobContext
from forklift._base.names import CAPS, MAX_TAGS, check_name

NOWHERE = "postgresql://nobody@127.0.0.1:1/never"

HOSTILE = {
    "esc": "mail\x1b[0m",
    "nul": "mail\x00",
    "del": "mail\x7f",
    "newline": "mail\nfake",
    "c1": "mail\x85",
    "zero-width-space": "mail\u200b",
    "bidi-override": "\u202email",
    "bom": "\ufeffmail",
    "line-separator": "mail\u2028",
    "paragraph-separator": "mail\u2029",
    "surrogate": "mail\ud800",
    "leading-space": " mail",
    "trailing-space": "mail ",
    "trailing-nbsp": "mail\u00a0",
    "empty": "",
}


@pytest.mark.parametrize("value", list(HOSTILE.values()), ids=list(HOSTILE))
@pytest.mark.parametrize("sort", ["queue", "kind", "tag", "schedule", "backfill", "unique_key",
                                  "caller", "batch_key"])
def test_the_checker_refuses_hidden_characters_and_edge_whitespace(sort: str, value: str) -> None:
    with pytest.raises(InvalidName) as refused:
        check_name(value, sort)
    exc = refused.value
    assert exc.code == "invalid_name" and isinstance(exc, InvalidOption)
    assert exc.detail["field"] == sort
    # The message shows the value with every hidden character escaped.
    assert exc.message.isprintable() and "\u200b" not in exc.message
    if value:
        assert exc.detail["value"] == ascii(value) or exc.detail["value"] == repr(value)


@pytest.mark.parametrize("value", ["mail", "mail.v2", "reports daily", "ü-queue", "日本", "a" * 128,
                                   "emoji \U0001f600", "tab-free:colon/slash"])
def test_readable_names_pass(value: str) -> None:
    assert check_name(value, "queue") == value


@pytest.mark.parametrize("sort", sorted(CAPS))
def test_each_sort_has_a_cap(sort: str) -> None:
    cap = CAPS[sort]
    assert check_name("a" * cap, sort) == "a" * cap
    with pytest.raises(InvalidName, match="over the cap"):
        check_name("a" * (cap + 1), sort)


def test_keys_are_capped_in_bytes() -> None:
    fits = "é" * (CAPS["unique_key"] // 2)
    assert check_name(fits, "unique_key") == fits
    with pytest.raises(InvalidName, match="bytes"):
        check_name(fits + "é", "unique_key")


def test_a_name_must_be_a_string() -> None:
    with pytest.raises(InvalidName, match="string"):
        check_name(42, "queue")


# -- every door --------------------------------------------------------------------------------
app = Forklift()


@app.job(name="names.plain")
def plain(ctx: JobContext, args: dict[str, Any]) -> None: ...


@pytest.fixture
def bound(dsn: str) -> Iterator[Forklift]:
    with bound_to(app, dsn) as bound_app:
        yield bound_app


Door = Callable[[str], Any]
ENQUEUE_DOORS: dict[str, tuple[Door, str]] = {
    "queue": (lambda v: plain.enqueue({}, queue=v), "queue"),
    "tag": (lambda v: plain.enqueue({}, tags=["ok", v]), "tags[1]"),
    "unique_key": (lambda v: plain.enqueue({}, unique_key=v), "unique_key"),
    "bulk-queue": (lambda v: plain.enqueue_many([{}], queue=v), "queue"),
    "bulk-tag": (lambda v: plain.enqueue_many([{}], tags=[v]), "tags[0]"),
    "by-name": (lambda v: app.enqueue_many([("names.plain", {}, {"unique_key": v})]),
                "unique_key"),
    "batch-caller": (lambda v: app.batch(plain, [{}], caller=v), "caller"),
    "batch-key": (lambda v: app.batch(plain, [{}], caller="c", key=v), "key"),
}


@pytest.mark.parametrize("door", list(ENQUEUE_DOORS))
@pytest.mark.parametrize("value", ["mail\x1b[0m", "mail\u200b", "mail "], ids=["esc", "zwsp", "space"])
def test_every_enqueue_door_refuses_and_stores_nothing(
    bound: Forklift, conn: psycopg.Connection[Any], door: str, value: str
) -> None:
    make, field = ENQUEUE_DOORS[door]
    with pytest.raises(InvalidName) as refused:
        make(value)
    assert refused.value.detail["field"] == field
    assert count_jobs(conn) == 0


def test_too_many_tags_are_refused(bound: Forklift, conn: psycopg.Connection[Any]) -> None:
    with pytest.raises(InvalidOption, match=str(MAX_TAGS)):
        plain.enqueue({}, tags=[f"t{i}" for i in range(MAX_TAGS + 1)])
    assert plain.enqueue({}, tags=[f"t{i}" for i in range(MAX_TAGS)]).tags[-1] == f"t{MAX_TAGS - 1}"


@pytest.mark.parametrize("value", ["mail\x1b[0m", "mail\u200b", " mail"], ids=["esc", "zwsp", "space"])
def test_every_declaration_refuses(value: str) -> None:
    local = Forklift(NOWHERE)

    def handler(ctx: JobContext, args: dict[str, Any]) -> None: ...

    with pytest.raises(InvalidName):
        local.job(name=value)(handler)
    with pytest.raises(InvalidName):
        local.job(name="ok.queue", queue=value)(handler)
    kind = local.job(name="ok")(handler)
    with pytest.raises(InvalidName):
        local.schedule(kind, cron="* * * * *", name=value)
    with pytest.raises(InvalidName):
        local.backfill(value, read=lambda cursor, limit: ([], None))(lambda items, conn: None)
    assert list(local.schedules) == [] and list(local.backfills) == []
    # A refused declaration is a ForkliftError like any other bad declaration.
    assert not isinstance(InvalidName("x"), ConfigError)
