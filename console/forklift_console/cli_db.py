"""`forklift db status|stop`: the embedded server, which outlives the commands that start it.

The first forklift process that needs the embedded server starts it; every later one (a worker
here, the console there) reuses it. It keeps running until ``forklift db stop``.
"""

from __future__ import annotations

import json
import sys
from typing import Annotated

import typer
from rich.console import Console

from forklift import embedded
from forklift.ops import connect as config

db_app = typer.Typer(help="The embedded PostgreSQL server under FORKLIFT_HOME.", no_args_is_help=True)
out = Console(highlight=False, soft_wrap=True)


@db_app.command("status")
def status(as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False) -> None:
    """Whether the embedded server runs, its pid, data directory and conninfo."""
    info = embedded.server_status(config.home())
    if as_json:
        sys.stdout.write(json.dumps(info, default=str, indent=2) + "\n")
        return
    state = "running" if info.get("running") else "stopped"
    out.print(f"embedded server: {state}" + (f" (pid {info['pid']})" if info.get("pid") else ""))
    out.print(f"home: {info.get('home')}")
    out.print(f"data: {info.get('data_dir')}")
    if info.get("running"):
        out.print(f"conninfo: {info.get('conninfo')}")


@db_app.command("stop")
def stop() -> None:
    """Stop the embedded server cleanly (fast shutdown); its data stays for the next start."""
    stopped = embedded.stop_server(config.home())
    out.print("embedded server stopped" if stopped else "embedded server was not running")
