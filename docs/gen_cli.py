"""The CLI reference, rendered from the ``forklift`` command itself.

The command groups load on first lookup (``forklift.cli.groups``); walking ``list_commands``
and ``get_command`` loads each of them, so every group, command and option appears here as
the code declares it, and a new flag is documented by adding it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import typer.main

__all__ = ["commands", "render", "render_command"]


# typer carries its own copy of click (typer._click), so commands and parameters are told apart
# by what they have, not by click's classes.
Command = Any
Param = Any


def _root() -> Command:
    from forklift.cli.main import app

    return typer.main.get_command(app)


def _is_group(cmd: Command) -> bool:
    return hasattr(cmd, "list_commands")


def _is_option(param: Param) -> bool:
    return bool(param.param_type_name == "option")


def _context(cmd: Command, name: str) -> Any:
    return cmd.context_class(cmd, info_name=name)


def commands() -> Iterator[tuple[list[str], Command]]:
    """Every command and group under ``forklift``, depth first, with its path of names."""

    def walk(path: list[str], cmd: Command) -> Iterator[tuple[list[str], Command]]:
        yield path, cmd
        if _is_group(cmd):
            ctx = _context(cmd, path[-1])
            for name in cmd.list_commands(ctx):
                sub = cmd.get_command(ctx, name)
                if sub is not None and not getattr(sub, "hidden", False):
                    yield from walk([*path, name], sub)

    yield from walk(["forklift"], _root())


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|").replace("<", "&lt;")


def _default(param: Param) -> str:
    if _is_option(param) and param.is_flag and not param.secondary_opts:
        return ""
    value: Any = param.default
    if value is None or value == () or callable(value):
        return ""
    if isinstance(value, bool):
        return "`true`" if value else "`false`"
    return f"`{_cell(str(value))}`"


def _names(param: Param) -> str:
    if not _is_option(param):
        return f"`{(param.metavar or param.name or '').upper()}`"
    opts = [*param.opts, *param.secondary_opts]
    return ", ".join(f"`{o}`" for o in opts)


def _kind(param: Param, ctx: Any) -> str:
    if _is_option(param) and param.is_flag:
        return "flag"
    shown = getattr(param, "display_type", None)
    if callable(shown):
        return _cell(str(shown(ctx)).strip("<>"))
    return _cell(str(getattr(getattr(param, "type", None), "name", "text")))


def _help(param: Param) -> str:
    text = getattr(param, "help", None) or ""
    extra = []
    if not _is_option(param) and not param.required:
        extra.append("optional")
    if getattr(param, "multiple", False) or getattr(param, "nargs", 1) == -1:
        extra.append("repeatable")
    if param.envvar:
        envs = [param.envvar] if isinstance(param.envvar, str) else list(param.envvar)
        extra.append("env " + ", ".join(f"`{e}`" for e in envs))
    out = _cell(text)
    return f"{out} ({'; '.join(extra)})" if extra else out


def _usage(path: list[str], cmd: Command) -> str:
    ctx = _context(cmd, " ".join(path))
    pieces = cmd.collect_usage_pieces(ctx)
    return " ".join([*path, *pieces])


def render() -> str:
    """The page: one section per command, its usage, help and parameters."""
    out = [
        "# CLI reference",
        "",
        "Generated from the `forklift` command when this site is built: every group, command "
        "and option below is the code's own declaration (the same text `--help` prints).",
        "Conventions shared by every command (the database, `--json`, `--dry-run`, "
        "confirmations, exit codes) are in [Operating from the CLI](../how-to/operating.md).",
        "",
    ]
    listing: list[str] = []
    sections: list[str] = []
    for path, cmd in commands():
        name = " ".join(path)
        summary = _cell((cmd.help or "").split("\n\n")[0])
        listing.append(f"| [`{name}`](#{'-'.join(path)}) | {summary} |")
        sections.append(render_command(path, cmd))
    return "\n".join([*out, "| command | what it does |", "| --- | --- |", *listing, "", *sections])


def render_command(path: list[str], cmd: Command, level: int = 2) -> str:
    """One command's section: its help, usage, subcommands and parameters."""
    name = " ".join(path)
    sections: list[str] = []
    if level == 2:
        sections += [f'## `{name}` {{#{"-".join(path)}}}', ""]
    if cmd.help:
        sections += [cmd.help.strip(), ""]
    sections += ["```text", _usage(path, cmd), "```", ""]
    if _is_group(cmd):
        ctx = _context(cmd, path[-1])
        subs = ", ".join(f"[`{s}`](#{'-'.join([*path, s])})" for s in cmd.list_commands(ctx))
        sections += [f"Commands: {subs}.", ""]
    params = [p for p in cmd.params if not getattr(p, "hidden", False)]
    ctx = _context(cmd, path[-1])
    if params:
        sections += ["| parameter | type | default | meaning |", "| --- | --- | --- | --- |"]
        for p in params:
            sections.append(f"| {_names(p)} | {_kind(p, ctx)} | {_default(p)} | {_help(p)} |")
        sections.append("")
    return "\n".join(sections)
