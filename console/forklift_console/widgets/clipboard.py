"""Text out of the console: to the terminal's clipboard with OSC 52, or to a file when the
terminal cannot take it, and a sentence saying which happened.

OSC 52 is an escape sequence the terminal turns into a clipboard write; nothing comes back to
say it worked, so the console decides up front from what it knows of the terminal. Terminals
known to ignore the sequence (the Linux console, a dumb terminal, Apple's Terminal, VTE-based
ones such as GNOME Terminal outside tmux) get a file instead, named in the message so it can be
``cat``-ed or sourced. ``FORKLIFT_CLIPBOARD=osc52`` or ``=file`` overrides
the guess; ``FORKLIFT_CLIPBOARD_FILE`` names the file (default: ``clipboard.txt`` in the user's
state directory, ``$XDG_STATE_HOME/forklift`` on Linux).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from textual.app import App

#: TERM values whose terminals drop OSC 52.
_NO_OSC52_TERMS = frozenset({"dumb", "linux", "vt100", "vt220", "cons25"})
#: TERM_PROGRAM values whose terminals drop OSC 52.
_NO_OSC52_PROGRAMS = frozenset({"Apple_Terminal"})


@dataclass(frozen=True)
class Copied:
    """Where copied text went."""

    how: Literal["clipboard", "file"]
    #: The file written (``how == "file"``).
    path: Path | None = None

    def message(self, what: str) -> str:
        if self.how == "clipboard":
            return f"copied {what} to the clipboard (OSC 52)"
        return (f"copied {what} to the file {self.path}: this terminal cannot take a clipboard"
                " write (OSC 52)")


def osc52_reaches(env: Mapping[str, str]) -> bool:
    """Whether an OSC 52 write is likely to reach a clipboard."""
    forced = env.get("FORKLIFT_CLIPBOARD", "").strip().lower()
    if forced in ("osc52", "file"):
        return forced == "osc52"
    if env.get("TERM_PROGRAM", "") in _NO_OSC52_PROGRAMS:
        return False
    if env.get("VTE_VERSION") and not env.get("TMUX"):
        return False
    return env.get("TERM", "") not in _NO_OSC52_TERMS


def clipboard_file(env: Mapping[str, str]) -> Path:
    named = env.get("FORKLIFT_CLIPBOARD_FILE", "").strip()
    if named:
        return Path(named).expanduser()
    if env.get("XDG_STATE_HOME", "").strip():
        return Path(env["XDG_STATE_HOME"]) / "forklift" / "clipboard.txt"
    import platformdirs

    return platformdirs.user_state_path("forklift", appauthor=False) / "clipboard.txt"


def copy_text(app: App[Any], text: str, env: Mapping[str, str] | None = None) -> Copied:
    """Copy ``text``; raises OSError when the file fallback cannot be written."""
    env = os.environ if env is None else env
    # The sequence costs nothing where it is dropped, and Textual keeps the text as the
    # app's own clipboard (its inputs paste it) either way.
    app.copy_to_clipboard(text)
    if osc52_reaches(env):
        return Copied("clipboard")
    path = clipboard_file(env)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n", encoding="utf-8")
    return Copied("file", path)


def copy_out(app: App[Any], text: str, what: str, *, title: str = "Copied") -> Copied | None:
    """Copy and tell the operator where it went (or why it went nowhere)."""
    try:
        copied = copy_text(app, text)
    except OSError as exc:
        app.notify(f"{what} not copied: {exc.strerror or exc}", title=title, severity="error")
        return None
    app.notify(copied.message(what), title=title)
    return copied


#: How every dialog starts the CLI line it shows (``#cli``).
CLI_PROMPT = "cli $ "


def cli_line(screen: Any) -> str | None:
    """The CLI line a dialog shows in its ``#cli`` line, as it reads now, or None."""
    from textual.css.query import NoMatches
    from textual.widgets import Static

    try:
        shown = screen.query_one("#cli", Static)
    except NoMatches:
        return None
    text = str(shown.render()).strip()
    return text.removeprefix(CLI_PROMPT.strip()).strip() or None
