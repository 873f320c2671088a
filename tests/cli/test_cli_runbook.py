"""The CLI commands the console shows (console/runbook.py) name exactly the object they act on.

Each shown command is parsed back by bash and then by the real ``forklift`` command line, so
a queue called ``mail\\x1b[0m``, ``-x`` or ``mail; rm -rf /`` is the queue that gets paused.
"""

from __future__ import annotations

import json
import subprocess
from datetime import UTC, datetime
from typing import Any

import pytest

from forklift.ops import JobFilter
from forklift.ops.runbook import cli, command, filter_flags

NAMES = ["mail", "mail\x1b[0m", "mail\u200b", "-x", "--help", "mail; rm -rf /", "it's", " mail"]


def argv(shown: str) -> list[str]:
    """The words bash passes to ``forklift`` when ``shown`` is pasted."""
    done = subprocess.run(
        ["bash", "-c", f"set -- {shown}; shift; printf '%s\\0' \"$@\""],
        capture_output=True, timeout=30, check=True, env={"LC_ALL": "C", "PATH": "/usr/bin:/bin"},
    )
    return [w.decode() for w in done.stdout.split(b"\0")[:-1]]


def parse(words: list[str]) -> dict[str, Any]:
    """The parameters ``forklift`` itself parses from ``words`` (nothing runs)."""
    import typer.main

    from forklift.cli.main import app

    cmd: Any = typer.main.get_command(app)
    ctx = cmd.make_context("forklift", list(words))
    while hasattr(cmd, "resolve_command"):
        name, cmd, rest = cmd.resolve_command(ctx, [*ctx._protected_args, *ctx.args])
        ctx = cmd.make_context(name, rest, parent=ctx)
    return dict(ctx.params)


@pytest.mark.parametrize("name", NAMES)
def test_a_shown_pause_parses_back_to_the_very_queue(name: str) -> None:
    shown = command("queues", "pause", args=[name], options={"--reason": "-outage", "--for": "30m",
                                                               "--create": True, "--json": False})
    params = parse(argv(shown))
    assert params["name"] == name
    assert (params["reason"], params["for_"], params["create"], params["as_json"]) == (
        "-outage", "30m", True, False)


def test_options_and_positionals_are_spelled_apart() -> None:
    assert command("queues", "resume", args=["mail"]) == "forklift queues resume mail"
    assert command("queues", "resume", args=["-x"]) == "forklift queues resume -- -x"
    assert command("jobs", "retry", args=[1, 2], options=[("--queue", "a b"), ("--queue", "c")]) == (
        "forklift jobs retry --queue 'a b' --queue c 1 2"
    )
    assert command("queues", "pause", args=["mail\x1b[0m"]) == "forklift queues pause $'mail\\x1b[0m'"
    assert cli("queues", "pause", "mail; rm -rf /") == "forklift queues pause 'mail; rm -rf /'"


def test_filter_flags_repeat_each_value_and_keep_times() -> None:
    at = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
    flt = JobFilter.build(states="dead", queues=["mail", "x\u200b"], after=at, time_field="finished_at")
    flags = filter_flags(flt)
    assert flags == ["--state", "dead", "--queue", "mail", "--queue", "x\u200b",
                     "--after", at.isoformat(), "--time-field", "finished_at"]
    assert argv(command("jobs", "retry", options=list(zip(flags[::2], flags[1::2], strict=True))))[2:] == flags
    assert parse(argv(command("jobs", "list", options=list(zip(flags[::2], flags[1::2], strict=True)))))["queue"] == ["mail", "x\u200b"]


def test_json_of_a_hostile_name_stays_exact() -> None:
    assert json.loads(json.dumps("mail\x1b[0m")) == "mail\x1b[0m"
