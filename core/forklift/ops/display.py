"""Showing names to people: identifiers rendered unambiguously, commands quoted exactly.

Identifiers (queues, kinds, tags, schedule and backfill names, worker ids, actors) are data an
application or an attacker chose. Shown raw, ``mail\\x1b[0m`` and ``mail\\u200b`` look like
``mail``, and a command built from the look pauses the wrong queue. So:

- :func:`show_id` renders an identifier so that two different identifiers never look alike:
  every character a reader cannot see (control, format, line/paragraph separators, spaces other
  than U+0020, default-ignorable and unassigned code points) becomes a visible escape
  (``\\x1b``, ``\\u200b``), a backslash is doubled, and the whole is quoted when it is empty or
  has whitespace or a quote at either end (``' mail'``).
- :func:`shell_quote` quotes one word for a POSIX shell so that pasting the command acts on
  exactly that object: plain words stay bare, printable ones are single-quoted, and a word with
  an invisible character uses bash's ANSI-C quoting (``$'mail\\x1b[0m'``), which stays visible
  on screen and yields the very same bytes.
- :func:`clean_text` is for free text (messages, args, results): ANSI escape sequences, control
  characters other than newline and tab, and bidi controls are removed, and the other
  invisible characters (zero-width, separators) shown as escapes.

All three are pure functions and never raise on any ``str``.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

from forklift._base.scrub import clean_display

__all__ = ["clean_text", "invisible", "shell_join", "shell_quote", "show_id"]

# Default_Ignorable_Code_Point (Unicode DerivedCoreProperties) beyond the Cf category: code
# points that render as nothing although they are letters or marks (HANGUL FILLER, variation
# selectors, ...).
_IGNORABLE: tuple[tuple[int, int], ...] = (
    (0x034F, 0x034F), (0x115F, 0x1160), (0x17B4, 0x17B5), (0x180B, 0x180F),
    (0x2800, 0x2800), (0x3164, 0x3164), (0xFE00, 0xFE0F), (0xFFA0, 0xFFA0),
    (0xFFF0, 0xFFF8), (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A), (0xE0000, 0xE0FFF),
)  # fmt: skip
_HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp", "Zs"})
_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r", "\\": "\\\\"}
_SHELL_SAFE = re.compile(r"[A-Za-z0-9@%+=:,./_-]+")


def invisible(ch: str) -> bool:
    """True for a character a reader cannot see or tell apart from a plain space."""
    if ch == " ":
        return False
    if unicodedata.category(ch) in _HIDDEN_CATEGORIES:
        return True
    cp = ord(ch)
    return any(lo <= cp <= hi for lo, hi in _IGNORABLE)


def _escape(ch: str) -> str:
    named = _NAMED.get(ch)
    if named is not None:
        return named
    cp = ord(ch)
    if cp < 0x100:
        return f"\\x{cp:02x}"
    if cp < 0x10000:
        return f"\\u{cp:04x}"
    return f"\\U{cp:08x}"


def show_id(value: object) -> str:
    """An identifier as people should see it: nothing hidden, no two alike.

    >>> show_id("mail"), show_id("mail\\x1b[0m"), show_id("mail\\u200b"), show_id(" mail")
    ('mail', 'mail\\\\x1b[0m', 'mail\\\\u200b', "' mail'")
    """
    text = value if isinstance(value, str) else str(value)
    quote = not text or text[0] in " '" or text[-1] in " '"
    out = []
    for ch in text:
        if ch == "\\" or invisible(ch):
            out.append(_escape(ch))
        elif ch == "'" and quote:
            out.append("\\'")
        else:
            out.append(ch)
    shown = "".join(out)
    return f"'{shown}'" if quote else shown


def _ansi_c(text: str) -> str:
    out = []
    for ch in text:
        if ch in "\\'":
            out.append("\\" + ch)
        elif ch in "\t\n\r":
            out.append(_NAMED[ch])
        elif invisible(ch):
            # UTF-8 bytes, not \\u: bash decodes \\u by the locale, \\x is the same everywhere.
            out.extend(f"\\x{b:02x}" for b in ch.encode("utf-8", "surrogatepass"))
        else:
            out.append(ch)
    return "$'" + "".join(out) + "'"


def shell_quote(value: object) -> str:
    """One shell word that stands for exactly ``value`` (bash, zsh; ksh93 for ``$'...'``)."""
    text = value if isinstance(value, str) else str(value)
    if _SHELL_SAFE.fullmatch(text):
        return text
    if any(invisible(ch) for ch in text):
        return _ansi_c(text)
    return "'" + text.replace("'", "'\\''") + "'"


def shell_join(words: Iterable[object]) -> str:
    return " ".join(shell_quote(w) for w in words)


def clean_text(value: object) -> str:
    """Free text made safe to print: escape sequences, controls (bar newline and tab) and bidi
    controls removed; what else cannot be seen (zero-width and other format characters, line
    and paragraph separators) shown as escapes. Spaces, wide or narrow, stay spaces."""
    text = clean_display(value if isinstance(value, str) else str(value))
    if text.isascii():
        return text
    return "".join(
        _escape(ch) if ch not in "\n\t" and invisible(ch) and unicodedata.category(ch) != "Zs"
        else ch
        for ch in text
    )
