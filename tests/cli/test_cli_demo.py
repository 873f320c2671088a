"""`forklift demo`'s options: a scenario it does not have, or console-only options with
--headless, are refused with the option named and nothing started."""

from __future__ import annotations

from typer.testing import CliRunner

from forklift.cli.main import app as cli


def test_an_unknown_scenario_is_refused_naming_the_choices() -> None:
    got = CliRunner().invoke(cli, ["demo", "--scenario", "chaos", "--dsn", "postgresql:///x"])
    assert got.exit_code == 2
    assert "--scenario 'chaos' is not one of: all, failing, drain" in got.output


def test_console_only_options_are_refused_with_headless() -> None:
    for extra in (["--scenario", "flow"], ["--pin-horizon"], ["--read-only"]):
        got = CliRunner().invoke(cli, ["demo", "--headless", *extra, "--dsn", "postgresql:///x"])
        assert got.exit_code == 2, extra
        assert "--headless runs the quick mix only" in got.output
