"""An out-of-range number on the command line is a usage error (exit 2) on every command.

The walk covers every int and float parameter whose range is declared; the table covers the
numbers a command checks itself (pages per second, limits and rates given as words, durations).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import pytest
import typer.main
from typer._click.core import Context
from typer.testing import CliRunner

from forklift.cli.main import app as cli


def run(dsn: str, *args: str) -> Any:
    return CliRunner().invoke(cli, list(args), env={"FORKLIFT_DSN": dsn})


def commands(cmd: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    if hasattr(cmd, "list_commands"):
        ctx = Context(cmd)
        for name in cmd.list_commands(ctx):
            yield from commands(cmd.get_command(ctx, name), (*path, name))
    else:
        yield path, cmd


def annotation(param: Any) -> Any:
    return getattr(param.type_descriptor, "annotation", None)


def numeric(param: Any) -> type | None:
    ann = annotation(param)
    for tp in (int, float):
        if ann is tp or ann == list[tp] or ann == (tp | None) or ann == (list[tp] | None):
            return tp
    return None


def is_argument(param: Any) -> bool:
    return type(param).__name__ == "TyperArgument"


def out_of_range() -> list[tuple[tuple[str, ...], Any, str]]:
    """(command path, parameter, a value outside its declared range) for every numeric
    parameter; the parameter is the one object the command (in ``COMMANDS``) holds."""
    found = []
    for path, cmd in COMMANDS.items():
        for param in cmd.params:
            tp = numeric(param)
            if tp is None:
                continue
            step = 1 if tp is int else 0.5
            if param.min is not None:
                found.append((path, param, str(tp(param.min - step))))
            if param.max is not None:
                found.append((path, param, str(tp(param.max + step))))
    return found


COMMANDS = dict(commands(typer.main.get_command(cli)))
CASES = out_of_range()


def argv(path: tuple[str, ...], cmd: Any, tested: Any, value: str) -> list[str]:
    """The command with ``value`` for ``tested`` and a plausible word for each other argument."""
    options: list[str] = []
    if not is_argument(tested):
        options.append(f"{tested.opts[0]}={value}")
    positional = []
    for param in cmd.params:
        if not is_argument(param):
            continue
        if param is tested:
            positional.append(value)
        elif param.required:
            positional.append("1" if numeric(param) else "x")
    dashes = ["--"] if any(v.startswith("-") for v in positional) else []
    return [*path, *options, *dashes, *positional]


def test_the_walk_finds_the_ranged_parameters() -> None:
    named = {(" ".join(p), param.name) for p, param, _ in CASES}
    assert {("jobs list", "limit"), ("enqueue", "priority"), ("audit", "before_id"),
            ("outbox retry", "ids"), ("worker", "metrics_port")} <= named


@pytest.mark.parametrize(("path", "param", "value"), CASES,
                         ids=[f"{' '.join(p)}:{param.name}={v}" for p, param, v in CASES])
def test_a_number_outside_a_declared_range_is_a_usage_error(
    dsn: str, path: tuple[str, ...], param: Any, value: str
) -> None:
    result = run(dsn, *argv(path, COMMANDS[path], param, value))
    assert result.exit_code == 2, (result.exit_code, result.stderr)
    assert "usage_error" in result.stderr and "Invalid value for" in result.stderr
    shown = param.opts[0] if not is_argument(param) else param.name
    assert shown in result.stderr, result.stderr


@pytest.mark.parametrize("args", [
    "backfills rate bf 0", "backfills rate bf -- -2", "backfills rate bf 1e12",
    "backfills rate bf nan", "backfills start bf --rate 0", "backfills start bf --rate=inf",
    "queues limit q 1000001 --create", "keys limit k 0", "keys limit k 2000000",
    "queues rate q 0/s --create", "keys rate k 0/s", "keys rate k 10/s --burst 99999999999",
    "retention set completed 99999999d", "stats --window 0s", "stats --bucket 0s",
    "queues pause q --for 0s --create", "jobs list --id-min 99999999999999999999",
    "jobs list --id-min 5 --id-max 1",
])
def test_a_number_a_command_checks_itself_is_a_usage_error_too(dsn: str, args: str) -> None:
    result = run(dsn, *args.split())
    assert result.exit_code == 2, (result.exit_code, result.stderr)
    assert "usage_error" in result.stderr or "invalid_filter" in result.stderr \
        or "invalid_setting" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


def test_the_backfill_rate_bounds_are_the_ones_a_backfill_takes() -> None:
    from forklift._features.backfill.backfill import MAX_RATE, check_rate

    assert check_rate(MAX_RATE) == MAX_RATE and math.isfinite(MAX_RATE)
