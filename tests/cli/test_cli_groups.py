"""Command groups load when named (forklift/cli/groups.py): looking one up
imports its module alone; listing the names imports none; a walk over ``commands`` sees every
group as an eager ``add_typer`` would have built it."""

from __future__ import annotations

import json
import subprocess
import sys

import typer.main

from forklift.cli.main import GROUPS
from forklift.cli.main import app as cli

PROBE = """
import json, sys
import typer.main
from forklift.cli.main import app
root = typer.main.get_command(app)
names = list(root.list_commands(None))
before = sorted(m for m in sys.modules if m.startswith("forklift.cli."))
jobs = root.get_command(None, "jobs")
after = sorted(m for m in sys.modules if m.startswith("forklift.cli."))
print(json.dumps({"names": names, "before": before, "after": after,
                  "jobs": sorted(jobs.commands)}))
"""


def test_looking_a_group_up_imports_its_module_alone() -> None:
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                          timeout=120, check=True)
    got = json.loads(done.stdout)
    assert set(GROUPS) <= set(got["names"]) and "stats" in got["names"]
    lazy = {where.partition(":")[0].rpartition(".")[2] for where in GROUPS.values()}
    assert not lazy & set(m.rpartition(".")[2] for m in got["before"])
    assert set(got["after"]) - set(got["before"]) == {"forklift.cli.jobs"}
    assert {"list", "show", "retry"} <= set(got["jobs"])


def test_a_walk_sees_every_group_as_add_typer_would_build_it() -> None:
    import importlib

    root = typer.main.get_command(cli)
    for name, where in GROUPS.items():
        module, _, attr = where.partition(":")
        eager = typer.Typer()
        eager.add_typer(getattr(importlib.import_module(module), attr), name=name)
        built = typer.main.get_command(eager).commands[name]  # type: ignore[attr-defined]
        lazy = root.commands[name]  # type: ignore[attr-defined]
        assert sorted(lazy.commands) == sorted(built.commands), name
        assert lazy.help == built.help, name
