"""The console is an extra: without Textual the library, the worker and the scripting CLI work
and `forklift console` / `forklift demo` say what to install; the --json path of the CLI loads
neither Rich nor Textual; every command's --help is complete.

Textual is taken away the way a missing package is: the CLI runs in a subprocess whose import
system refuses it (a ``sitecustomize`` on PYTHONPATH puts a finder first on sys.meta_path).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import psycopg
import pytest
import typer.main
from helpers import wait_until
from typer.testing import CliRunner

from forklift.cli.main import GROUPS
from forklift.cli.main import app as cli

ROOT = Path(__file__).resolve().parents[2]

BLOCKER = textwrap.dedent('''
    import atexit, importlib.abc, json, os, sys

    BLOCKED = [m for m in os.environ.get("FORKLIFT_TEST_BLOCK", "").split(",") if m]

    class Refuse(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if any(name == m or name.startswith(m + ".") for m in BLOCKED):
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, Refuse())
    report = os.environ.get("FORKLIFT_TEST_MODULES")
    if report:
        atexit.register(lambda: open(report, "w").write(json.dumps(sorted(sys.modules))))
''')


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("site")
    (path / "sitecustomize.py").write_text(BLOCKER)
    return path


def path(site: Path) -> str:
    """The blocker first, then this checkout's sources (whatever the virtualenv points at)."""
    return os.pathsep.join(str(p) for p in (site, ROOT / "core", ROOT / "console", ROOT))


def forklift(site: Path, dsn: str, *args: str, block: str = "textual",
             modules: Path | None = None, **kw: Any) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": path(site), "FORKLIFT_DSN": dsn, "FORKLIFT_TEST_BLOCK": block}
    if modules is not None:
        env["FORKLIFT_TEST_MODULES"] = str(modules)
    return subprocess.run([sys.executable, "-m", "forklift.cli.main", *args], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=120, check=False, **kw)


def test_the_blocker_really_takes_textual_away(site: Path, dsn: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(site), "FORKLIFT_TEST_BLOCK": "textual"}
    probe = subprocess.run([sys.executable, "-c", "import textual"], env=env, capture_output=True,
                           text=True, timeout=60, check=False)
    assert probe.returncode == 1 and "No module named 'textual'" in probe.stderr


@pytest.mark.parametrize("args", [["console"], ["demo"], ["console", "--read-only"]])
def test_without_textual_the_console_says_what_to_install(site: Path, dsn: str, args: list[str]) -> None:
    done = forklift(site, dsn, *args)
    assert done.returncode == 1, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "pip install 'forklift[console]'" in lines[0], done.stderr
    assert "Traceback" not in done.stderr


def test_without_textual_the_scripting_cli_and_the_worker_work(
    site: Path, dsn: str, conn: psycopg.Connection[Any]
) -> None:
    listed = forklift(site, dsn, "jobs", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout)["jobs"] == []
    made = forklift(site, dsn, "enqueue", "basic.echo", "--args", '{"name": "x"}', "--app",
                    "tests.apps.basic:app", "--json")
    assert made.returncode == 0, made.stderr
    job_id = json.loads(made.stdout)["id"]

    env = {**os.environ, "PYTHONPATH": path(site), "FORKLIFT_DSN": dsn,
           "FORKLIFT_TEST_BLOCK": "textual"}
    worker = subprocess.Popen(
        [sys.executable, "-m", "forklift.cli.main", "worker", "--app", "tests.apps.basic:app"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        wait_until(lambda: conn.execute("SELECT state FROM forklift.jobs WHERE id = %s",
                                        (job_id,)).fetchone() == ("completed",),
                   timeout=60, message="the worker did not run the job")
    finally:
        worker.send_signal(signal.SIGTERM)
        _, err = worker.communicate(timeout=60)
    assert worker.returncode == 0, err
    assert "textual" not in err.lower()
    headless = forklift(site, dsn, "demo", "--headless", "--jobs", "20", "--dsn", dsn)
    assert headless.returncode == 0, headless.stderr
    assert "none lost" in headless.stdout


@pytest.mark.parametrize("args", [["stats", "--json"], ["jobs", "list", "--json"],
                                  ["queues", "list", "--json"]])
def test_the_json_path_loads_neither_rich_nor_textual(
    site: Path, dsn: str, tmp_path: Path, args: list[str]
) -> None:
    report = tmp_path / "modules.json"
    done = forklift(site, dsn, *args, block="", modules=report)
    assert done.returncode == 0, done.stderr
    loaded = set(json.loads(report.read_text()))
    heavy = {m for m in loaded if m.split(".")[0] in ("rich", "textual")}
    assert heavy == set(), sorted(heavy)
    assert "forklift_console.app" not in loaded and "forklift.cli.bench" not in loaded


#: What `forklift stats --json` has no use for (so that its start-up stays at most ~2x that of
#: `python -c "import psycopg"`): the UI libraries, Pydantic (typer's option parsing), the
#: worker, the command groups, the operator modules other than the stats (and the role check
#: every Operator makes).
NOT_FOR_STATS = ("rich", "textual", "pydantic", "pydantic_core", "forklift._worker",
                 "forklift._app.app", "forklift._jobs.payload", "forklift._features.batches", "forklift._features.cron",
                 "forklift.ops.actions", "forklift.ops.batches", "forklift.ops.backfills",
                 "forklift.ops.schedules", "forklift.ops.dead", "forklift.ops.health",
                 "forklift.ops.jobs", "forklift.ops.explain",
                 "forklift_console.app", "forklift.cli.bench",
                 # the command groups: each loads when named (forklift.cli.groups)
                 *sorted({where.partition(":")[0] for where in GROUPS.values()}))


def test_stats_json_loads_only_what_it_needs(site: Path, dsn: str, tmp_path: Path) -> None:
    report = tmp_path / "modules.json"
    done = forklift(site, dsn, "stats", "--json", block="", modules=report)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["totals"]["counts"]["available"] == 0
    loaded = set(json.loads(report.read_text()))
    needless = sorted(m for m in loaded
                      if any(m == n or m.startswith(n + ".") for n in NOT_FOR_STATS))
    assert needless == []
    assert "forklift.ops.stats" in loaded and "psycopg" in loaded


def test_every_command_has_complete_help() -> None:
    """--help works for every command and group and lists each of its options."""
    root = typer.main.get_command(cli)

    def walk(cmd: Any, path: list[str]) -> None:
        shown = CliRunner().invoke(cli, [*path, "--help"])
        assert shown.exit_code == 0, (path, shown.output)
        assert shown.stdout.strip(), path
        for param in cmd.params:
            for opt in getattr(param, "opts", []):
                if opt.startswith("--"):
                    assert opt in shown.stdout, (path, opt)
        for name, sub in (getattr(cmd, "commands", None) or {}).items():
            assert name in shown.stdout, (path, name)
            walk(sub, [*path, name])

    walk(root, [])


def test_textual_is_the_console_extra_and_dev_brings_everything() -> None:
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    base = [d.split(">")[0].split("[")[0].split("<")[0].strip().lower() for d in
            project["dependencies"]]
    assert "textual" not in base and {"typer", "rich", "psycopg"} <= set(base)
    extras = project["optional-dependencies"]
    assert [d for d in extras["console"] if d.startswith("textual")]
    assert any(d.startswith("forklift[") and "console" in d and "embedded" in d
               for d in extras["dev"])


def test_the_help_s_list_of_health_thresholds_is_the_real_one() -> None:
    from forklift.cli.health import THRESHOLD_NAMES
    from forklift.ops.health import THRESHOLDS

    assert tuple(THRESHOLDS) == THRESHOLD_NAMES
