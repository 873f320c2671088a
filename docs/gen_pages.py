"""MkDocs hook: the reference pages generated from the code, and the console's screenshots.

Registered in mkdocs.yml (``hooks:``). At every build it renders the CLI reference, the JSON
shapes, the configuration, the failure codes and the console's keys from the code of this
checkout, and serves the PNGs of ``screenshots/`` (made by ``scripts/screenshots.py``) under
``screenshots/`` without copying them into ``docs/``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
HERE = Path(__file__).resolve().parent

from mkdocs.structure.files import File, Files  # noqa: E402


def _on_path() -> None:
    """This checkout's code first (MkDocs removes the hook's folder from sys.path after
    loading it, so the generators' folder is added here, at build time)."""
    for path in (HERE, ROOT / "console", ROOT / "core"):
        if str(path) not in sys.path:
            sys.path.insert(0, str(path))

#: Page path -> the generator module whose render() writes it.
GENERATED = {
    "reference/cli.md": "gen_cli",
    "reference/json.md": "gen_shapes",
    "reference/configuration.md": "gen_config",
    "reference/failure-codes.md": "gen_codes",
    "reference/console-keys.md": "gen_keys",
}


def render(page: str) -> str:
    import importlib

    _on_path()
    return str(importlib.import_module(GENERATED[page]).render())


def on_files(files: Files, config: Any) -> Files:
    for page in GENERATED:
        files.append(File.generated(config, page, content=render(page)))
    for png in sorted((ROOT / "screenshots").glob("*.png")):
        files.append(
            File(
                f"screenshots/{png.name}",
                src_dir=str(ROOT),
                dest_dir=config["site_dir"],
                use_directory_urls=config["use_directory_urls"],
            )
        )
    return files
