"""Saved job filters: a name for a filter the operator types often, kept between sessions.

They live in one JSON file in the user's config directory (``$XDG_CONFIG_HOME/forklift/
filters.json`` on Linux, where ``XDG_CONFIG_HOME`` defaults to ``~/.config``), so a filter saved
in one console is there in the next, and in the console on another database. The text is
stored as typed (``state:dead args.customer.id:42``) and parsed again when applied, so a filter
saved by an older console is read by today's rules.

A file that cannot be read as saved filters is never overwritten: saving is refused with the
file's name until it is fixed or moved, so nothing the operator kept is lost.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from forklift.ops.display import clean_text

VERSION = 1
#: The longest name shown whole in the list.
MAX_NAME = 60
MAX_FILTERS = 200


class SavedFiltersError(ValueError):
    """The file or the input is not usable; the message says what to do."""


@dataclass(frozen=True)
class SavedFilter:
    name: str
    text: str


def config_file(env: Mapping[str, str] | None = None) -> Path:
    """Where saved filters live: ``$XDG_CONFIG_HOME/forklift/filters.json``, else the
    platform's config directory (``~/.config`` on Linux)."""
    env = os.environ if env is None else env
    base = env.get("XDG_CONFIG_HOME", "").strip()
    if base:
        return Path(base) / "forklift" / "filters.json"
    import platformdirs

    return platformdirs.user_config_path("forklift", appauthor=False) / "filters.json"


def check_name(name: str) -> str:
    cleaned = " ".join(name.split())
    if not cleaned:
        raise SavedFiltersError("name the filter, e.g. stuck mail")
    if clean_text(cleaned) != cleaned:
        raise SavedFiltersError("a filter's name cannot hold control characters")
    if len(cleaned) > MAX_NAME:
        raise SavedFiltersError(f"a filter's name is at most {MAX_NAME} characters")
    return cleaned


class SavedFilters:
    """The saved filters in one file; every call reads it afresh (another console may have
    written it meanwhile) and a write replaces it whole and atomically."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or config_file()

    def load(self) -> list[SavedFilter]:
        try:
            raw = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise SavedFiltersError(f"cannot read {self.path}: {exc.strerror or exc}") from None
        try:
            data = json.loads(raw)
            items = data["filters"]
            out = [SavedFilter(str(i["name"]), str(i["text"])) for i in items]
            if data.get("version") != VERSION:
                raise ValueError
        except (ValueError, KeyError, TypeError):
            raise SavedFiltersError(
                f"{self.path} does not hold saved filters as this console writes them; move it"
                " aside to start a new list (it is left as it is)") from None
        return out

    def save(self, name: str, text: str) -> SavedFilter:
        """Keep ``text`` under ``name`` (a filter of that name is replaced)."""
        name = check_name(name)
        if not text.strip():
            raise SavedFiltersError("no filter to save: type one with / first")
        saved = SavedFilter(name, text.strip())
        current = [f for f in self.load() if f.name != name]
        if len(current) >= MAX_FILTERS:
            raise SavedFiltersError(f"at most {MAX_FILTERS} saved filters: delete one first")
        self._write([*current, saved])
        return saved

    def delete(self, name: str) -> bool:
        current = self.load()
        kept = [f for f in current if f.name != name]
        if len(kept) == len(current):
            return False
        self._write(kept)
        return True

    def _write(self, filters: list[SavedFilter]) -> None:
        body = {"version": VERSION,
                "filters": [{"name": f.name, "text": f.text} for f in filters]}
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            scratch = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
            scratch.write_text(json.dumps(body, indent=2, ensure_ascii=False) + "\n",
                               encoding="utf-8")
            os.replace(scratch, self.path)
        except OSError as exc:
            raise SavedFiltersError(f"cannot write {self.path}: {exc.strerror or exc}") from None
