"""What the CLI prints says ``1 job``/``3 jobs``, never ``job(s)``: no text a
command prints (option help aside), no explanation the operator API gives and no line the worker
logs spells a plural with ``(s)``."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CLI = ROOT / "core" / "forklift" / "cli"
CORE = ROOT / "core" / "forklift"
HEDGED = re.compile(r"\w\(s\)")


def printed_texts(tree: ast.AST) -> list[tuple[int, str]]:
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                skip.add(id(body[0].value))  # a docstring
        if isinstance(node, ast.keyword) and node.arg == "help":
            skip.update(id(n) for n in ast.walk(node.value))
    return [(n.lineno, n.value) for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in skip]


def hedged(paths: list[Path]) -> list[str]:
    return [f"{path.relative_to(ROOT)}:{line}: {text!r}"
            for path in paths
            for line, text in printed_texts(ast.parse(path.read_text("utf-8")))
            if HEDGED.search(text)]


def test_no_command_prints_a_plural_as_s_in_parentheses() -> None:
    assert hedged(sorted(CLI.glob("*.py"))) == []


def test_no_explanation_or_worker_log_line_says_a_plural_as_s_in_parentheses() -> None:
    # "draining: 0 job(s) in flight" in the worker's log; "3 job(s) of queue ... are ahead" in
    # `forklift jobs explain`.
    assert hedged([*sorted((CORE / "ops").glob("*.py")),
                   *sorted((CORE / "_worker").rglob("*.py"))]) == []


def test_nothing_forklift_shows_or_logs_says_a_plural_as_s_in_parentheses() -> None:
    # The console's screens ("3 job(s) waiting for an event"), the embedded server's refusal
    # ("2 session(s) of other processes"), the test drain's timeout, the lock renewals' log.
    assert hedged([*sorted(CORE.rglob("*.py")), *sorted(CLI.rglob("*.py"))]) == []
