"""A batch callback's summary is a dict with BatchSummary's keys, as the batches guide
(docs/how-to/batches.md) documents it."""

from __future__ import annotations

import re
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from apps import batches as bapp
from apps.basic import running_worker
from helpers import wait_until

from forklift import BatchSummary, Forklift

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "how-to" / "batches.md"
FAST = {"concurrency": 4, "lease": 5.0, "poll_interval": 0.2, "leader_interval": 0.1}


@pytest.fixture
def app(dsn: str, conn: psycopg.Connection[Any]) -> Iterator[Forklift]:
    with bapp.bound(dsn, conn) as bound_app:
        yield bound_app


def batches_guide() -> str:
    return GUIDE.read_text("utf-8")


def documented_summary_keys() -> list[str]:
    found = re.search(r"\(`BatchSummary`: ([^;]+);", batches_guide())
    assert found, "the batches guide lists BatchSummary's keys"
    return re.findall(r"`(\w+)`", found.group(1))


def test_the_guide_reads_the_summary_as_the_dict_it_is() -> None:
    section = batches_guide()
    assert re.search(r"`BatchSummary` is a `TypedDict`", section)
    assert 'summary["state"]' in section
    # Keys are read, never attributes (but where it says not to).
    assert not re.search(r"\bsummary\.\w", section.replace("not `summary.state`", ""))
    assert documented_summary_keys() == list(typing.get_type_hints(BatchSummary))


def test_a_callback_receives_the_summary_as_a_dict_of_the_documented_keys(
    app: Forklift, conn: psycopg.Connection[Any]
) -> None:
    batch, _ = app.batch("batch.step", [{"n": 1}], caller="summary-shape",
                         on_complete="batch.notify")
    with running_worker(app, **FAST):
        got = wait_until(lambda: [r["detail"] for r in bapp.ledger(conn, batch.id, "callback")],
                         timeout=30)
    (seen,) = got
    # The handler json-dumped what it was given: only a dict (not an object) gets through.
    assert sorted(seen["summary"]) == sorted(documented_summary_keys())
    assert seen["summary"]["state"] == "done" and seen["summary"]["batch_id"] == batch.id
    assert seen["meta"]["batch"] == seen["summary"]
