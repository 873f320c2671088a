"""`forklift db start|status|stop|remove`: the embedded server, which outlives the commands that
start it.

The first forklift process that needs the embedded server starts it (or `forklift db start`
does, ahead of time); every later one (a worker here, the console there) reuses it. It keeps running until ``forklift db stop``, and its data
stays until ``forklift db stop --purge`` (or ``forklift db remove``) deletes it, which is
refused while other processes hold sessions on it unless ``--force``.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from forklift.cli.format import plural
from forklift.cli.kit import Call, DryRun, Yes, command, confirm, emit_json, out

db_app = typer.Typer(help="The embedded PostgreSQL server under FORKLIFT_HOME.", no_args_is_help=True)

Force = Annotated[
    bool, typer.Option("--force", help="Delete even while other processes use the server.")
]


def _size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return f"{n} B"


@db_app.command("start")
@command(database=False)
def start(cx: Call) -> None:
    """Start the embedded server now (it also starts on first use); print its conninfo.

    Idempotent: a running server is left as it is. Migrations are not applied: run
    ``forklift migrate`` (or start a worker) for that.
    """
    from forklift import embedded
    from forklift.ops.connect import home

    where = home()
    was_running = bool(embedded.server_status(where).get("running"))
    embedded.ensure_server(where)
    info = embedded.server_status(where)
    report = {"started": not was_running, "running": bool(info.get("running")),
              "pid": info.get("pid"), "data_dir": info.get("data_dir"),
              "conninfo": info.get("conninfo")}
    cx.show(report, lambda r: (
        ("embedded server started" if r["started"] else "embedded server already running")
        + f" (pid {r['pid']})\ndata: {r['data_dir']}\nconninfo: {r['conninfo']}"))


@db_app.command("status")
@command(database=False)
def status(cx: Call) -> None:
    """Whether the embedded server runs, its pid, data directory and conninfo."""
    from forklift import embedded
    from forklift.ops.connect import home

    info = embedded.server_status(home())
    if cx.as_json:
        emit_json(info)
        return
    state = "running" if info.get("running") else "stopped"
    out.print(f"embedded server: {state}" + (f" (pid {info['pid']})" if info.get("pid") else ""))
    out.print(f"home: {info.get('home')}")
    out.print(f"data: {info.get('data_dir')}")
    if info.get("running"):
        out.print(f"conninfo: {info.get('conninfo')}")


def _purge(cx: Call, force: bool, yes: bool, dry_run: bool) -> None:
    from forklift import embedded
    from forklift.ops.connect import home

    where = home()
    state = embedded.server_status(where)
    if not state["initialized"] and not state["running"]:
        cx.show({"home": str(where), "data_dir": None, "removed": [], "bytes": 0,
                 "was_running": False, "dry_run": dry_run},
                lambda _: f"no embedded server data under {where}: nothing to delete")
        return
    users = embedded.server_clients(where) if state["running"] else []
    size = embedded.data_size(where)
    if dry_run:
        plan: dict[str, Any] = {"home": str(where), "data_dir": state["data_dir"], "bytes": size,
                                "was_running": state["running"], "sessions": len(users),
                                "dry_run": True}
        cx.show(plan, lambda _: (
            f"dry run: would {'stop the server and ' if state['running'] else ''}delete"
            f" {state['data_dir']} ({_size(size)})"
            + (f"; refused while {plural(len(users), 'other session')}"
               f" {'uses' if len(users) == 1 else 'use'} it, unless --force"
               if users and not force else "")
            + " [dim](nothing changed)[/]"))
        return
    if users and not force:
        embedded.purge_server(where)  # raises ServerInUse, naming them
    confirm(f"Delete the embedded server's data in {state['data_dir']} ({_size(size)}),"
            " every job in it, for good?", yes, cx.as_json)
    report = embedded.purge_server(where, force=force)
    cx.show(report, lambda r: (
        f"embedded server {'stopped and ' if r['was_running'] else '(not running): '}its data deleted:"
        f" {', '.join(r['removed']) or 'nothing'} ({_size(r['bytes'])} freed)"))


@db_app.command("stop")
@command(database=False)
def stop(
    cx: Call,
    purge: Annotated[
        bool, typer.Option("--purge", help="Also delete its data directory (every job in it).")
    ] = False,
    force: Force = False,
    yes: Yes = False,
    dry_run: DryRun = False,
) -> None:
    """Stop the embedded server cleanly (fast shutdown); its data stays, unless --purge."""
    if purge:
        _purge(cx, force, yes, dry_run)
        return
    from forklift import embedded
    from forklift.ops.connect import home

    if dry_run:
        state = embedded.server_status(home())
        cx.show({"running": state["running"], "pid": state["pid"], "dry_run": True},
                lambda s: ("dry run: would stop the embedded server (pid {pid})".format(**s)
                           if s["running"] else "dry run: the embedded server is not running")
                + " [dim](nothing changed)[/]")
        return
    stopped = embedded.stop_server(home())
    cx.show({"stopped": stopped},
            lambda s: "embedded server stopped" if s["stopped"] else "embedded server was not running")


@db_app.command("remove")
@command(database=False)
def remove(cx: Call, force: Force = False, yes: Yes = False, dry_run: DryRun = False) -> None:
    """Stop the embedded server and delete its data directory: the same as `db stop --purge`."""
    _purge(cx, force, yes, dry_run)
