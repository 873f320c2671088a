"""forklift.ops.display: identifiers shown unambiguously, commands quoted to name exactly one object.

The shell quoting is checked the only way that counts: bash reads the quoted word back and
must produce the very same bytes.
"""

from __future__ import annotations

import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from forklift.ops.display import clean_text, invisible, shell_join, shell_quote, show_id

HOSTILE = [
    "mail",
    "mail\x1b[0m",
    "mail\u200b",
    "mail\u202e",
    "mail\u00a0",
    "\u3164",
    "mail\u2028x",
    "mail\u2029",
    "a\tb",
    "a\nb",
    " mail",
    "mail ",
    "",
    "'mail'",
    "mail'",
    "back\\slash",
    "mail; rm -rf /",
    "$(reboot)",
    "`id`",
    "-x",
    "--help",
    "naïve",
    "日本語",
    "\x7f",
    "\x9b31m",
    "e\u0301",
    "\ufe0f",
    "\U000e0041",
]


def test_plain_identifiers_are_shown_as_they_are() -> None:
    for name in ("mail", "reports.rebuild", "a b", "naïve", "日本語", "[red]x[/red]"):
        assert show_id(name) == name


@pytest.mark.parametrize(
    ("name", "shown"),
    [
        ("mail\x1b[0m", "mail\\x1b[0m"),
        ("mail\u200b", "mail\\u200b"),
        ("mail\u202e", "mail\\u202e"),
        ("mail\u00a0", "mail\\xa0"),
        ("\u3164", "\\u3164"),
        ("a\tb", "a\\tb"),
        ("a\nb", "a\\nb"),
        (" mail", "' mail'"),
        ("mail ", "'mail '"),
        ("", "''"),
        ("'mail'", "'\\'mail\\''"),
        ("back\\slash", "back\\\\slash"),
        ("\U000e0041", "\\U000e0041"),
    ],
)
def test_hidden_characters_become_visible_escapes(name: str, shown: str) -> None:
    assert show_id(name) == shown


def test_no_two_hostile_identifiers_look_alike() -> None:
    shown = [show_id(n) for n in HOSTILE]
    assert len(set(shown)) == len(HOSTILE)
    for text in shown:
        assert not any(invisible(ch) for ch in text), text


@given(st.lists(st.text(max_size=8), min_size=2, max_size=2, unique=True))
@settings(max_examples=300, deadline=None)
def test_show_id_is_injective(pair: list[str]) -> None:
    a, b = pair
    assert show_id(a) != show_id(b)
    assert not any(invisible(ch) for ch in show_id(a))


def bash_words(command: str) -> list[bytes]:
    """What bash makes of ``command``'s words (each printed NUL-terminated)."""
    done = subprocess.run(
        ["bash", "-c", f"printf '%s\\0' {command}"], capture_output=True, timeout=30, check=True,
        env={"LC_ALL": "C", "PATH": "/usr/bin:/bin"},
    )
    return done.stdout.split(b"\0")[:-1]


def test_shell_quoting_round_trips_through_bash() -> None:
    names = [n for n in HOSTILE if "\ud800" not in n]
    assert bash_words(shell_join(names)) == [n.encode() for n in names]


@given(st.lists(st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00"),
                        max_size=12), min_size=1, max_size=6))
@settings(max_examples=60, deadline=None)
def test_shell_quoting_round_trips_anything(words: list[str]) -> None:
    assert bash_words(shell_join(words)) == [w.encode() for w in words]


def test_shown_commands_stay_visible_and_plain_words_stay_bare() -> None:
    assert shell_quote("mail") == "mail"
    assert shell_quote("reports.rebuild") == "reports.rebuild"
    assert shell_quote("mail; rm -rf /") == "'mail; rm -rf /'"
    assert shell_quote("it's") == "'it'\\''s'"
    assert shell_quote("mail\x1b[0m") == "$'mail\\x1b[0m'"
    assert shell_quote("mail\u200b") == "$'mail\\xe2\\x80\\x8b'"
    assert shell_quote("") == "''"
    for word in HOSTILE:
        assert not any(invisible(ch) for ch in shell_quote(word)), word


def test_clean_text_drops_escapes_and_controls_but_keeps_lines() -> None:
    assert clean_text("a\x1b[31mred\x1b[0m\nb\tc\x07\u202e") == "ared\nb\tc"
    assert clean_text(42) == "42"
    assert clean_text("zero\u200bwidth\u2028line\u00a0nbsp") == "zero\\u200bwidth\\u2028line\u00a0nbsp"
