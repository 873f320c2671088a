"""`forklift subjects check` through typer's runner against a real PostgreSQL: every coverage
problem listed, in --json too, exit 1 while there is one and 0 once the declaration covers."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import psycopg
import pytest
from typer.testing import CliRunner

from forklift.cli.main import app as cli

APP = """
from forklift import Forklift
from forklift.subjects import PersonalData, Reach, anonymize, delete

app = Forklift()
data = PersonalData(app)
data.subject("user", table="people", erase=anonymize({erased}),
             reaches=[Reach("visits", erase=delete())])
"""


def write_app(folder: Path, name: str, erased: str) -> str:
    (folder / f"{name}.py").write_text(textwrap.dedent(APP.format(erased=erased)))
    return f"{name}:app"


def run(dsn: str, *args: str) -> Any:
    return CliRunner().invoke(cli, list(args), env={"FORKLIFT_DSN": dsn})


def test_check_lists_every_problem_and_passes_once_covered(
        dsn: str, conn: psycopg.Connection[Any], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))
    conn.execute("""
        CREATE TABLE public.people (id int PRIMARY KEY, email text, phone text);
        COMMENT ON COLUMN public.people.email IS 'personal';
        COMMENT ON COLUMN public.people.phone IS 'personal: mobile';
        CREATE TABLE public.visits (id int, person int REFERENCES public.people (id), ip text);
        COMMENT ON COLUMN public.visits.ip IS 'personal';
        CREATE TABLE public.leads (id int, email text);
        COMMENT ON COLUMN public.leads.email IS 'personal';
    """)
    partial = write_app(tmp_path, "subjects_partial", "'email'")
    human = run(dsn, "subjects", "check", "--app", partial)
    assert human.exit_code == 1, human.output
    assert "personal_data_unerased people (phone)" in human.stdout
    assert "personal_data_unreached leads (email)" in human.stdout

    listed = run(dsn, "subjects", "check", "--app", partial, "--json")
    assert listed.exit_code == 1
    got = json.loads(listed.stdout)
    assert not got["ok"] and got["subjects"] == ["user"]
    assert [(p["code"], p["table"], p["columns"]) for p in got["problems"]] == [
        ("personal_data_unerased", "people", ["phone"]),
        ("personal_data_unreached", "leads", ["email"])]

    conn.execute("DROP TABLE public.leads")
    covered = write_app(tmp_path, "subjects_covered", "'email', 'phone'")
    fine = run(dsn, "subjects", "check", "--app", covered, "--json")
    assert fine.exit_code == 0, fine.output
    assert json.loads(fine.stdout)["problems"] == []
    assert "1 subject covers every marked column" in run(dsn, "subjects", "check", "--app",
                                                         covered).stdout


def test_an_app_without_personal_data_is_told_so(dsn: str, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "subjects_none.py").write_text("from forklift import Forklift\napp = Forklift()\n")
    got = run(dsn, "subjects", "check", "--app", "subjects_none:app", "--json")
    assert got.exit_code == 1
    assert json.loads(got.stdout)["error"]["code"] == "subjects_undeclared"
