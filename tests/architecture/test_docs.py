"""The documentation site builds strict, and every code block in it is either run or says why not.

- The MkDocs build (``mkdocs build --strict``) fails on a broken link or anchor, a page missing
  from the navigation, and an API reference mkdocstrings cannot resolve.
- Each fenced block of ``docs/**/*.md`` and README.md is one of:
  ``python``: executed, the blocks of one page in order in one namespace, with FORKLIFT_DSN set
  to a fresh test database (a block after ``<!-- file: NAME -->`` is written to NAME instead,
  for the page's later blocks and commands to import); a shell block (``console``) whose
  ``$ forklift ...`` lines are checked against the command itself (every subcommand and option
  must exist), or, after ``<!-- run: forklift -->``, run through the CLI against the test
  database and required to succeed (a ``forklift worker`` line after ``<!-- run: worker ... -->``
  runs as a process until no job is left, then gets SIGTERM); or any block after
  ``<!-- not run: REASON -->``, which must give its reason.
  Every ``forklift`` command shown, run or not, is checked against the command the same way.
- The generated references cover the code: every CLI group and command, every keyword of
  ``Forklift`` and ``Worker``, every environment variable the source reads.
- Every ``forklift.*`` Python name a page gives exists and is public.
- The README stays a short front page: at most 250 lines, its first block the two commands
  that set up and test a clone, its links pointing at files or at pages the navigation lists,
  its performance ratios those of the performance page.
- No page, like no other text of the project, speaks of how forklift was built: that check is
  ``test_words.py``.
"""

from __future__ import annotations

import functools
import os
import re
import shlex
import signal
import subprocess
import sys
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from helpers import wait_until

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
sys.path.insert(0, str(DOCS))

FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>```+|~~~+)\s*(?P<lang>[\w+-]*)(?P<attrs>[^\n]*)$")
MARKER = re.compile(r"^\s*<!--\s*(?P<what>not run|run|file)\s*:\s*(?P<arg>.*?)\s*-->\s*$")

@dataclass(frozen=True)
class Block:
    path: Path
    line: int
    lang: str
    body: str
    marker: tuple[str, str] | None

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"

    @property
    def first_line(self) -> str:
        return self.body.split("\n", 1)[0].rstrip()


def blocks(path: Path) -> list[Block]:
    """The fenced blocks of one Markdown file, each with the marker on the line before it."""
    lines = path.read_text(encoding="utf-8").split("\n")
    out: list[Block] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, indent = m.group("fence"), len(m.group("indent"))
        body: list[str] = []
        j = i + 1
        while j < len(lines) and not lines[j].strip().startswith(fence):
            body.append(lines[j][indent:] if lines[j][:indent].isspace() else lines[j])
            j += 1
        k = i - 1
        while k >= 0 and not lines[k].strip():
            k -= 1
        marker = MARKER.match(lines[k]) if k >= 0 else None
        out.append(
            Block(path, i + 1, m.group("lang"), "\n".join(body),
                  (marker.group("what"), marker.group("arg")) if marker else None)
        )
        i = j + 1
    return out


def pages() -> list[Path]:
    return sorted(p for p in DOCS.rglob("*.md"))


def all_blocks() -> list[Block]:
    return [b for p in [*pages(), README] for b in blocks(p)]


# -- the build -----------------------------------------------------------------------------------


def test_the_site_builds_strict(tmp_path: Path) -> None:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT / "core"), str(ROOT / "console")])}
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(tmp_path / "site")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    for page in ("reference/cli", "reference/json", "reference/configuration",
                 "reference/failure-codes", "reference/console-keys", "reference/api/forklift"):
        assert (tmp_path / "site" / page / "index.html").exists(), page


# -- generated references ---------------------------------------------------------------------------


def test_the_cli_reference_has_every_group_and_command() -> None:
    import gen_cli

    from forklift.cli.main import GROUPS

    text = gen_cli.render()
    paths = [" ".join(p) for p, _ in gen_cli.commands()]
    for group in GROUPS:
        assert f"forklift {group}" in paths, group
        assert any(p.startswith(f"forklift {group} ") for p in paths), f"{group} has no commands"
    for path in paths:
        assert f"## `{path}`" in text, path
    assert "`--drain-timeout`" in text and "`--fail-on-alert`" in text


def test_every_worker_keyword_and_environment_variable_is_described() -> None:
    import inspect

    import gen_config

    from forklift import Forklift, Worker

    for func, described in ((Worker.__init__, gen_config.WORKER),
                            (Forklift.__init__, gen_config.FORKLIFT)):
        names = [n for n in inspect.signature(func).parameters if n != "self"]
        missing = [n for n in names if n not in described]
        assert not missing, f"describe {missing} in docs/gen_config.py"
    missing_env = gen_config.environment_in_code() - set(gen_config.ENVIRONMENT)
    assert not missing_env, f"describe {sorted(missing_env)} in docs/gen_config.py ENVIRONMENT"


def test_the_json_and_code_references_come_from_the_code() -> None:
    import gen_codes
    import gen_shapes

    shapes = {cls.__name__ for _, cls in gen_shapes.shapes()}
    assert {"Stats", "JobPage", "JobDetail", "BulkReport", "DeadGroups", "QueueInfo"} <= shapes
    codes = gen_codes.failure_codes()
    assert {"error", "timeout", "lease_expired", "interrupted", "worker_lost"} <= set(codes)
    raised = {cls.code for _, cls in gen_codes.error_classes()}
    assert {"invalid_payload", "unique_conflict", "read_only", "queue_not_found"} <= raised


# -- code blocks ------------------------------------------------------------------------------------


#: Pages maintained by others and included as they are: why their blocks are not run.
NOT_RUN_IN: dict[str, str] = {
    "docs/architecture.md": "maps and diagrams of the code, not commands",
}


def _reason_of(block: Block) -> str | None:
    if block.marker and block.marker[0] == "not run":
        return block.marker[1]
    if block.path.is_relative_to(ROOT) and str(block.path.relative_to(ROOT)) in NOT_RUN_IN:
        return NOT_RUN_IN[str(block.path.relative_to(ROOT))]
    return None


def _commands(block: Block) -> list[list[str]]:
    """The ``forklift`` command lines of a shell block, as argument lists (after ``forklift``)."""
    out = []
    for raw in block.body.split("\n"):
        if raw.startswith("$ "):
            line = raw[2:]
        elif block.lang in ("", "text") and raw.startswith("forklift "):
            line = raw  # a listing of commands without prompts
        else:
            continue
        for part in re.split(r"\s(?:\|\||&&|\|)\s", line):
            try:
                words = shlex.split(part, comments=True)
            except ValueError:
                words = part.split("#", 1)[0].split()
            while words and "=" in words[0] and not words[0].startswith("-"):
                words = words[1:]  # VAR=value before the command
            if words and words[0] == "forklift":
                out.append(words[1:])
    return out


@functools.cache
def _tree() -> dict[tuple[str, ...], Any]:
    import gen_cli

    return {tuple(p[1:]): cmd for p, cmd in gen_cli.commands()}


def _check_parses(argv: list[str]) -> str | None:
    """Why ``forklift ARGV`` would not parse (an unknown command or option), or None."""
    tree = _tree()
    path: list[str] = []
    rest = list(argv)
    while rest and hasattr(tree[tuple(path)], "list_commands"):
        word = rest[0].strip("[]")
        if word.startswith("-"):
            break
        if tuple([*path, word]) not in tree:
            if "|" in word and all(tuple([*path, w]) in tree for w in word.split("|")):
                return None  # a synopsis of several subcommands
            return f"no command 'forklift {' '.join([*path, word])}'"
        path.append(word)
        rest.pop(0)
    cmd = tree[tuple(path)]
    opts = {o for p in cmd.params for o in [*getattr(p, "opts", []), *getattr(p, "secondary_opts", [])]}
    opts |= {"--help"}
    for word in rest:
        if word == "--":
            break
        token = word.strip("[]").split("=", 1)[0]
        if (token.startswith("--") or re.fullmatch(r"-[A-Za-z]", token)) and token not in opts:
            return f"'forklift {' '.join(path)}' has no option {token}"
    return None


def test_every_block_runs_or_says_why_not() -> None:
    problems = []
    for block in all_blocks():
        if block.marker and block.marker[0] == "not run":
            if len(block.marker[1]) < 10:
                problems.append(f"{block.where}: 'not run' needs a reason")
            continue
        if block.marker and block.marker[0] in ("run", "file"):
            continue
        if _reason_of(block):
            continue
        if block.lang == "python":
            continue  # executed by test_python_blocks_run
        if block.lang in ("console", "bash", "shell", "sh") and _commands(block):
            continue  # checked by test_shell_blocks_parse
        problems.append(f"{block.where}: a {block.lang or 'plain'} block neither run nor marked "
                        "<!-- not run: REASON -->")
    assert not problems, "\n".join(problems)


def test_shell_blocks_parse() -> None:
    """Every forklift command shown, run or not, names commands and options that exist."""
    problems = []
    for block in all_blocks():
        if block.lang not in ("console", "bash", "shell", "sh", "", "text"):
            continue
        for argv in _commands(block):
            why = _check_parses(argv)
            if why:
                problems.append(f"{block.where}: {why}")
    assert not problems, "\n".join(problems)


def _runnable_pages() -> list[Path]:
    return [
        p for p in [*pages(), README]
        if any(b.lang == "python" and not _reason_of(b) for b in blocks(p))
        or any(b.marker and b.marker[0] in ("run", "file") for b in blocks(p))
    ]


def _live_jobs(dsn: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM forklift.jobs"
            " WHERE state IN ('scheduled', 'available', 'running', 'retryable')"
        ).fetchone()
    return int(row[0]) if row else 0


def _run_worker(argv: list[str], dsn: str, cwd: Path) -> None:
    env = {**os.environ, "FORKLIFT_DSN": dsn,
           "PYTHONPATH": os.pathsep.join([str(cwd), str(ROOT / "core"), str(ROOT / "console")])}
    proc = subprocess.Popen([sys.executable, "-m", "forklift.cli", *argv], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_until(lambda: _live_jobs(dsn) == 0, timeout=60, message="jobs still waiting")
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, out


def _tutorial_told_the_truth(dsn: str) -> None:
    """What the tutorial says happened: Ada's job completed, Bob's after a retry, Cy's died
    with its declared code and was requeued (available, its error kept)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = {
            args["name"]: (state, attempt, [e.get("code") for e in errors])
            for args, state, attempt, errors in conn.execute(
                "SELECT args, state, attempt, errors FROM forklift.jobs ORDER BY id"
            )
        }
    assert rows["Ada"] == ("completed", 1, []), rows
    assert rows["Bob"] == ("completed", 2, ["error"]), rows
    assert rows["Cy"][0] == "available" and rows["Cy"][2] == ["mailbox_full"], rows
    assert "Dee" not in rows  # refused at enqueue


def _run_cli(argv: list[str], where: str) -> None:
    from typer.testing import CliRunner

    from forklift.cli.main import app

    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 0, f"{where}: forklift {' '.join(argv)}\n{result.output}"


@pytest.mark.parametrize("page", _runnable_pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_python_blocks_run(page: Path, dsn: str, tmp_path: Path,
                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The page's blocks in order: python executed, files written, commands run."""
    monkeypatch.setenv("FORKLIFT_DSN", dsn)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    # The page's blocks run as one module, registered so that dataclasses and pydantic can
    # resolve the names its annotations use.
    module = types.ModuleType(f"docs_page_{page.stem.replace('-', '_')}")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    namespace: dict[str, Any] = module.__dict__
    loaded = set(sys.modules)
    try:
        for block in blocks(page):
            if _reason_of(block):
                continue
            if block.marker and block.marker[0] == "file":
                (tmp_path / block.marker[1]).write_text(block.body + "\n", encoding="utf-8")
                # The page's module wins over one of that name another test imported (the
                # Django test project's `shop`); the old one is back after the test.
                monkeypatch.delitem(sys.modules, Path(block.marker[1]).stem, raising=False)
            elif block.lang == "python":
                exec(compile(block.body, block.where, "exec"), namespace)
            elif block.marker and block.marker[1] == "forklift":
                for argv in _commands(block):
                    _run_cli(argv, block.where)
            elif block.marker and block.marker[1].startswith("worker"):
                for argv in _commands(block):
                    _run_worker(argv, dsn, tmp_path)
        if page.name == "tutorial.md":
            _tutorial_told_the_truth(dsn)
    finally:
        for holder in [namespace, *(sys.modules[n].__dict__ for n in set(sys.modules) - loaded
                                    if str(getattr(sys.modules[n], "__file__", "")).startswith(
                                        str(tmp_path)))]:
            app = holder.get("app")
            if app is not None and hasattr(app, "close"):
                app.close()
        for name in set(sys.modules) - loaded:
            if str(getattr(sys.modules[name], "__file__", "")).startswith(str(tmp_path)):
                del sys.modules[name]


def test_the_parse_check_catches_what_drifts(tmp_path: Path) -> None:
    assert _check_parses(["worker", "--app", "m:app", "--concurrency", "4"]) is None
    assert _check_parses(["jobs", "list", "[--state", "dead]", "--json"]) is None
    assert "no option --concurency" in (_check_parses(["worker", "--concurency", "4"]) or "")
    assert "no command" in (_check_parses(["jobs", "lsit"]) or "")
    marked = blocks_of(tmp_path, "<!-- not run: x -->\n```console\n$ forklift stats\n```\n")
    assert marked[0].marker == ("not run", "x") and _reason_of(marked[0]) == "x"
    assert _commands(marked[0]) == [["stats"]]


def blocks_of(folder: Path, text: str) -> list[Block]:
    path = folder / "probe.md"
    path.write_text(text, encoding="utf-8")
    return blocks(path)


#: Dotted names in the pages that are not Python: tables, a setting, a logger, span attributes.
NOT_PYTHON = {
    "forklift.jobs", "forklift.jobs_history", "forklift.settings", "forklift.queues_seen",
    "forklift.job", "forklift.job.kind", "forklift.job.tenant", "forklift.job.enqueued_by",
    # SQL functions in the forklift schema
    "forklift.desired_workers",
}
PYTHON_NAME = re.compile(r"`(forklift(?:\.[A-Za-z_][A-Za-z0-9_]*)+)(?:\([^`]*\))?`")


def _resolves(name: str) -> bool:
    import importlib

    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def test_every_python_name_the_pages_give_exists() -> None:
    """``forklift.ops.connect``, ``forklift.logs.configure``...: a page cannot name an API that
    moved or went away, nor a private module."""
    problems = []
    for page in pages():
        if page == DOCS / "architecture.md":
            continue
        for m in PYTHON_NAME.finditer(page.read_text(encoding="utf-8")):
            name = m.group(1)
            if name in NOT_PYTHON:
                continue
            if any(p.startswith("_") and not p.endswith("__") for p in name.split(".")):
                problems.append(f"{page.relative_to(ROOT)}: {name} is private")
            elif not _resolves(name):
                problems.append(f"{page.relative_to(ROOT)}: {name} does not exist")
    assert not problems, "\n".join(problems)


def test_every_operator_call_the_pages_give_exists() -> None:
    """``op.requeue_many(...)``, ``Operator().keys()``: the operator API the guides teach."""
    from forklift.ops import Operator

    call = re.compile(r"(?:\bOperator(?:\([^)]*\))?|\bop)\.([a-z_]+)")
    problems = [
        f"{page.relative_to(ROOT)}: Operator.{m.group(1)}"
        for page in pages() if page != DOCS / "architecture.md"
        for m in call.finditer(page.read_text(encoding="utf-8"))
        if not hasattr(Operator, m.group(1))
    ]
    assert not problems, "\n".join(problems)


# -- the README's links -------------------------------------------------------------------------------


def _nav_pages() -> set[str]:
    """The pages mkdocs.yml's navigation lists (the strict build requires each to exist)."""
    return set(re.findall(r":\s*([\w/.-]+\.md)\s*$", (ROOT / "mkdocs.yml").read_text("utf-8"),
                          re.M))


def test_the_readme_links_to_what_exists() -> None:
    """Each relative link and image of the README names a file of the checkout, or a docs
    page the site's navigation lists; and the links into the docs cover every how-to guide
    the README promises (its 'What you get')."""
    text = README.read_text("utf-8")
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    assert targets, "the README links to the docs"
    problems = []
    for target in targets:
        if re.match(r"[a-z]+://", target):
            continue
        if (ROOT / target).exists():
            continue
        if target.startswith("docs/") and target.removeprefix("docs/") in _nav_pages():
            continue  # a page the navigation lists: the strict build checks it exists
        problems.append(target)
    assert not problems, f"the README links to nothing: {problems}"
    assert "docs/explanation/guarantees.md" in targets
    assert "docs/explanation/performance.md" in targets


def test_the_readme_is_short_and_starts_with_its_two_commands() -> None:
    text = README.read_text("utf-8")
    assert len(text.split("\n")) <= 250
    first = blocks(README)[0]
    assert first.line < text.index("\n## ") and first.lang == "console"
    commands = [line.split("#", 1)[0].strip() for line in first.body.split("\n")]
    assert commands[:2] == ["$ pip install -e '.[dev]'", "$ pytest -n auto -q"]


def _ratios(text: str) -> dict[str, str]:
    """figure key -> ratio, from the Markdown table whose header has a column ``ratio...``
    and whose rows name the figure's key as `key`."""
    out: dict[str, str] = {}
    column = None
    for line in text.split("\n"):
        if not line.startswith("|"):
            column = None
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if column is None:
            column = next((i for i, c in enumerate(cells) if c.startswith("ratio")), None)
            continue
        key = re.search(r"`(\w+)`", cells[0])
        if key and column < len(cells) and re.fullmatch(r"\d+\.\d+", cells[column]):
            out.setdefault(key.group(1), cells[column])
    return out


def _verdicts(text: str) -> dict[str, str]:
    """figure key -> PASS or SHORT, from the rows of a Markdown table that say which."""
    return {m.group(1): m.group(2) for m in re.finditer(
        r"^\|[^|\n]*`(\w+)`[^\n]*\|\s*(PASS|SHORT)\s*\|\s*$", text, re.M)}


def test_the_readme_figures_are_the_performance_page_figures() -> None:
    readme = README.read_text("utf-8")
    page = (DOCS / "explanation" / "performance.md").read_text("utf-8")
    shown, measured = _ratios(readme), _ratios(page)
    assert len(shown) >= 5, shown
    assert {k: measured.get(k) for k in shown} == shown
    verdicts = _verdicts(page)
    assert {k: verdicts.get(k) for k in shown} == _verdicts(readme)
