"""Plain command-line values parse without Pydantic (forklift/cli/parse.py), to
exactly what typer's own Pydantic path gives, and whatever the light path is unsure of (bad
input, out of range) still gets typer's own message."""

from __future__ import annotations

from typing import Any

import pytest
from typer import _coercion
from typer.models import OptionInfo
from typer.testing import CliRunner

from forklift.cli import parse as cliparse
from forklift.cli.main import app

CASES: list[tuple[type, float | None, float | None, Any]] = [
    (str, None, None, "mail"), (str, None, None, ""), (str, None, None, " spaced "),
    (str, None, None, "30m"), (bool, None, None, True), (bool, None, None, False),
    (int, None, None, "25"), (int, None, None, "-3"), (int, None, None, "+7"),
    (int, None, None, "007"), (int, None, None, 0), (int, 1, None, "1"), (int, 1, 10, "10"),
    (int, 1, None, "0"), (int, None, 10, "11"), (int, None, None, "abc"), (int, None, None, "2.5"),
    (int, None, None, " 7 "), (int, None, None, "1_000"), (int, None, None, "٣"),
    (float, None, None, "0.5"), (float, None, None, "2"), (float, None, None, 2),
    (float, None, None, 2.0), (float, None, None, "1e3"), (float, None, None, ".5"),
    (float, None, None, "-4."), (float, 0.2, None, "0.2"), (float, 0.2, None, "0.1"),
    (float, None, None, "inf"), (float, None, None, "nan"), (float, None, None, "x"),
    (float, None, None, " 2.5 "),
]


def typers_own(annotation: type, lo: float | None, hi: float | None, value: Any) -> Any:
    info = OptionInfo(min=lo, max=hi)
    descriptor = _coercion.resolve_type_descriptor(annotation, info)
    param = _coercion.build_runtime_param(descriptor)  # the original, with its TypeAdapter
    return param._coerce_value(value, param=None, ctx=None)  # type: ignore[arg-type]


@pytest.mark.parametrize(("annotation", "lo", "hi", "value"), CASES)
def test_a_plain_value_parses_as_typer_would_or_is_left_to_typer(
    annotation: type, lo: float | None, hi: float | None, value: Any
) -> None:
    got = cliparse.plain_value(annotation, lo, hi, value)
    if got is cliparse.UNSURE:
        return  # typer's own builder takes it (its errors, its edge cases)
    expected = typers_own(annotation, lo, hi, value)
    assert (got, type(got)) == (expected, type(expected))


def test_the_light_path_takes_the_common_forms() -> None:
    assert cliparse.plain_value(int, 1, None, "25") == 25
    assert cliparse.plain_value(float, 0.2, None, "0.5") == 0.5
    assert cliparse.plain_value(str, None, None, "30m") == "30m"
    assert cliparse.plain_value(int, 1, None, "0") is cliparse.UNSURE  # out of range: typer's
    assert cliparse.plain_value(int, None, None, "abc") is cliparse.UNSURE


def test_installed_the_options_still_get_typers_messages_and_values() -> None:
    assert cliparse.install() and cliparse.install()  # idempotent
    runner = CliRunner()
    low = runner.invoke(app, ["stats", "--interval", "0.1", "--dsn", "host=/nonexistent"])
    assert low.exit_code == 2
    assert "Invalid value for '--interval': Input should be greater than or equal to 0.2" in (
        low.stderr)
    bad = runner.invoke(app, ["jobs", "show", "abc"])
    assert bad.exit_code == 2 and "unable to parse string as an integer" in bad.stderr
