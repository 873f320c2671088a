"""TypedDict payloads: typing_extensions' everywhere; typing's only from Python 3.12."""

from __future__ import annotations

import sys
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import typing_extensions
from bound import bound_to

from forklift import ConfigError, Forklift, JobContext
from forklift._jobs.payload import Codec


class Point(typing_extensions.TypedDict):
    x: int
    y: int


class OldPoint(typing.TypedDict):
    x: int


@dataclass
class Shape:
    corner: OldPoint


app = Forklift()


@app.job(name="typeddict.point")
def point(ctx: JobContext, p: Point) -> None: ...


@pytest.fixture
def bound(dsn: str) -> Iterator[Forklift]:
    with bound_to(app, dsn) as bound_app:
        yield bound_app


def test_a_typing_extensions_typeddict_payload_is_validated(bound: Forklift) -> None:
    assert point.enqueue({"x": 1, "y": 2}).args == {"x": 1, "y": 2}


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="pydantic reads typing.TypedDict")
@pytest.mark.parametrize("tp", [OldPoint, Shape, list[OldPoint]], ids=["top", "nested", "list"])
def test_a_typing_typeddict_is_refused_at_declaration_naming_the_fix(tp: Any) -> None:
    with pytest.raises(ConfigError) as refused:
        Codec(tp)
    assert refused.value.code == "use_typing_extensions_typeddict"
    assert "typing_extensions.TypedDict" in refused.value.message
    assert refused.value.detail["fix"] == "typing_extensions.TypedDict"

    def old(ctx: Any, p: Any) -> None: ...

    old.__annotations__ = {"ctx": JobContext, "p": tp, "return": None}
    with pytest.raises(ConfigError) as at_import:
        Forklift().job(name="typeddict.old")(old)
    assert "typing_extensions.TypedDict" in at_import.value.message
    assert at_import.value.code == "use_typing_extensions_typeddict"
