"""No text of the project speaks of how forklift was built, only of what it does.

The README, the changelog, the documentation, the code, the tests and the deployment files say
what a test checks or why the code is as it is, never which ticket, round or work session asked
for it: a reader of the product has none of those. Test names too: a test is named for what it
checks, not numbered after a ticket. This file is the one place that spells the words out, so
it is the one file not read.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: Words about how forklift was built, not about the product.
INTERNAL = [
    re.compile(r"\bissues?\b", re.I),
    re.compile(r"\bround(?:s)? (?:one|two|three|four|five|\d+)\b", re.I),
    re.compile(r"\bprevious[- ]round(?:'s)?\b", re.I),
    re.compile(r"\bstop(?:'s)? \d+\b", re.I),
    re.compile(r"\b(?:this|previous|last|next) stop(?:'s)?\b", re.I),
    re.compile(r"\b(?:across|over|between|those|these|two|several) stops\b", re.I),
    re.compile(r"\bwork(?:ing)? sessions?\b", re.I),
    re.compile(r"\bticket #?\d+\b", re.I),
    re.compile(r"\bitems? \d+(?:\.\d+)?\b(?!\.\.)", re.I),  # "item 9"; not "items 90..99"
    re.compile(r"\bdef test_\d"),  # a test numbered after a ticket
    # a ticket's item by number: "(17.13: ...)", "(11.10)", "# -- 11.2: a poison job"
    re.compile(r"(?:(?<![\w.])\(|^# -- )1\d\.\d{1,2}(?=\)|:| /)"),
]
#: Phrases that contain one of the words above and are about the product.
ALLOWED = [re.compile(r"HTTP session", re.I)]
#: Lines not yet reworded, by file and the words on them: each entry must still be needed.
PENDING: dict[str, set[str]] = {}

#: The text the product is made of.
SUFFIXES = {".py", ".md", ".sql", ".toml", ".yml", ".yaml", ".cfg", ".ini", ".txt"}
#: Folders that are not the project's text: tools, caches, built output.
SKIP_DIRS = {".git", ".venv", "venv", "site", "__pycache__", "node_modules", ".mypy_cache",
             ".ruff_cache", ".pytest_cache", "__snapshots__", "build", "dist"}


def texts() -> list[Path]:
    out = []
    for path in ROOT.rglob("*"):
        rel = path.relative_to(ROOT)
        if any(part in SKIP_DIRS or part.endswith(".egg-info") for part in rel.parts[:-1]):
            continue
        if path.is_file() and path.suffix in SUFFIXES and path != Path(__file__).resolve():
            out.append(path)
    return sorted(out)


def hits(text: str) -> list[tuple[int, str]]:
    """(line number, the words) for every internal reference in ``text``."""
    found = []
    for number, line in enumerate(text.split("\n"), 1):
        clean = line
        for allowed in ALLOWED:
            clean = allowed.sub("", clean)
        for pattern in INTERNAL:
            hit = pattern.search(clean)
            if hit:
                found.append((number, hit.group(0)))
    return found


def test_the_files_read_cover_the_readme_the_docs_the_code_and_the_tests() -> None:
    names = {str(p.relative_to(ROOT)) for p in texts()}
    assert {"README.md", "CHANGELOG.md", "mkdocs.yml", "pyproject.toml"} <= names
    for folder in ("docs/", "core/forklift/", "console/forklift_console/", "tests/"):
        assert any(n.startswith(folder) for n in names), folder


def test_nothing_speaks_of_how_forklift_was_built() -> None:
    problems = []
    pending_seen: set[tuple[str, str]] = set()
    for path in texts():
        rel = str(path.relative_to(ROOT))
        for number, words in hits(path.read_text(encoding="utf-8", errors="replace")):
            if words in PENDING.get(rel, set()):
                pending_seen.add((rel, words))
                continue
            problems.append(f"{rel}:{number}: '{words}'")
    assert not problems, "say what is checked or why, not which ticket asked:\n" + "\n".join(
        problems)
    reworded = {(f, w) for f, ws in PENDING.items() for w in ws} - pending_seen
    assert not reworded, f"reworded now: drop them from PENDING: {sorted(reworded)}"


def test_the_check_finds_what_it_should_and_only_that() -> None:
    # The phrases are put together here, so this file does not read as one that says them.
    issue, rnd, stop = "iss" + "ue", "rou" + "nd", "st" + "op"
    for said in (f"the edges ({issue} 11)", f"({issue} 17.16)", f"{rnd} four",
                 f"until {stop} 25", f"this {stop}", "item 9", "items 8, 15 and 16",
                 "the previous work session",
                 "def test_17_9_a_disabled_key_says_why(", "the performance issue's table",
                 "the previous round", "agree (17.1: the count)", "identifiers (11.10), text",
                 "# -- 11.2: a poison job ---", "# -- 11.2 / 11.14: the rescue"):
        assert hits(said), said
    for fine in ("items 90..99 are written", "the claim goes first this round",
                 "an HTTP session", "a worker stops claiming", "def test_a_disabled_key():",
                 "the last round of claims", "a second round writes",
                 "this session's search_path",
                 "handlers that stop when told", "bucket.set_rate(10.0)",
                 "for patience in (15.0, 30.0):", "timeout(self.every + 10.0)"):
        assert not hits(fine), fine
