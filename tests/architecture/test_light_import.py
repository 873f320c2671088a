"""``import forklift`` is light, and an app that only declares kinds and enqueues loads
neither the worker nor any UI library. Checked in fresh interpreters."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

# Never loaded by an application that only declares kinds and enqueues.
HEAVY = ("forklift._worker", "forklift._claim", "forklift._leader", "forklift._execute",
         "forklift.ops", "forklift_console", "textual", "typer", "rich", "croniter",
         "platformdirs", "forklift._features.cron", "forklift._features.backfill.backfill", "forklift._features.batches")
# Not even loaded by the bare import: each arrives with the first name that needs it.
LAZY = ("psycopg", "psycopg_pool", "pydantic", "pydantic_core", "forklift._app.app",
        "forklift._app.kind", "forklift._jobs.payload", "forklift._jobs.insert", "forklift._db.connections")


def loaded_after(code: str) -> set[str]:
    script = code + "\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout.splitlines()[-1]))


def _under(modules: set[str], names: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if any(m == n or m.startswith(n + ".") for n in names))


def test_import_forklift_loads_nothing_heavy() -> None:
    loaded = loaded_after("import forklift")
    assert _under(loaded, HEAVY + LAZY) == []


def test_an_app_that_only_enqueues_loads_no_worker_and_no_ui() -> None:
    loaded = loaded_after("""
from typing import Any
from forklift import Backoff, Forklift, JobContext
app = Forklift("postgresql://nobody@127.0.0.1:1/never")

@app.job(queue="mail", retry=Backoff(base=2))
def send(ctx: JobContext, args: dict[str, Any]) -> None: ...

send.row({"to": "a"}, delay=5, tags=["t"], meta={"m": 1})
send.rows([{"to": "b"}])
""")
    assert _under(loaded, HEAVY) == []
    assert "psycopg_pool" not in loaded  # no pool until the first enqueue needs one


@pytest.mark.parametrize("name", ["Worker", "Batch", "Forklift", "InvalidName", "migrate"])
def test_each_name_still_resolves_on_first_use(name: str) -> None:
    loaded = loaded_after(f"import forklift\nassert forklift.{name} is not None\n"
                          f"from forklift import {name}")
    assert "forklift" in loaded


def test_an_unknown_name_is_an_attribute_error() -> None:
    import forklift

    with pytest.raises(AttributeError, match="no_such_thing"):
        forklift.no_such_thing  # noqa: B018
    assert "Forklift" in dir(forklift)
