"""The cron and backfill fault tests' app, run as ``forklift worker --app apps.scheduled:app``.

A schedule firing every two seconds, and a backfill over the integers 0..ITEMS-1 that writes
each item to ``public.bf_items`` in the page's own transaction. Faults are asked for through
the environment, and happen once (a marker file records that they did):

- ``CRON_HANG=before_commit|after_commit`` with ``CRON_MARKER=<path>``: the leader stops inside
  (or right after) the transaction that enqueues a tick, writing the tick to the marker;
- ``BF_HANG_ITEM=<n>`` with ``BF_MARKER=<path>``: the page holding item n stops after its rows
  are written and before its checkpoint commits.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import psycopg

from forklift import Forklift, JobContext
from forklift._features import cron

app = Forklift()
ITEMS = 200
PAGE = 10
TESTS = Path(__file__).resolve().parent.parent


@app.periodic("* * * * * */2", name="beat", policy="catch_up", max_catch_up=100)
@app.job(name="sched.beat", queue="cron")
async def beat(ctx: JobContext, args: dict[str, Any]) -> None:
    return None


def read(cursor: int | None, limit: int) -> tuple[list[int], int | None]:
    start = cursor or 0
    end = min(start + limit, ITEMS)
    return list(range(start, end)), (end if end < ITEMS else None)


@app.backfill("bf.items", page_size=PAGE, rate=1000.0, read=read, total=lambda: ITEMS)
def copy_items(items: list[int], conn: psycopg.Connection[Any]) -> None:
    conn.execute("INSERT INTO public.bf_items (item) SELECT unnest(%s::int[])", (items,))
    hang = os.environ.get("BF_HANG_ITEM")
    if hang and int(hang) in items and _first_time(os.environ.get("BF_MARKER"), str(items[0])):
        time.sleep(600)  # killed here: the page's rows are written, its checkpoint is not


def _first_time(marker: str | None, text: str) -> bool:
    """Write the marker unless it exists: whether this is the fault's one time."""
    if not marker or os.path.exists(marker):
        return False
    Path(marker).write_text(text)
    return True


async def _hang(point: str, schedule: str, tick: datetime) -> None:
    if point == os.environ.get("CRON_HANG") and _first_time(os.environ.get("CRON_MARKER"), tick.isoformat()):
        await asyncio.sleep(600)  # killed here, at the moment of firing


if os.environ.get("CRON_HANG"):
    cron.fault_hook = _hang


def setup(conn: psycopg.Connection[Any]) -> None:
    conn.execute("CREATE TABLE IF NOT EXISTS public.bf_items (item int NOT NULL)")


class Proc:
    """One worker subprocess of this app."""

    def __init__(self, dsn: str, log: Path, lease: float = 2.0, **env: str) -> None:
        cmd = [sys.executable, "-m", "forklift.cli.main", "worker", "--app", "apps.scheduled:app",
               "--lease", str(lease), "--concurrency", "4", "--log-level", "INFO"]
        environ = dict(os.environ, FORKLIFT_DSN=dsn, PYTHONUNBUFFERED="1", **env)
        environ.pop("FORKLIFT_APP", None)
        self.log_path = log
        with open(log, "ab") as out:
            self.popen = subprocess.Popen(
                cmd, cwd=TESTS, env=environ, stdout=out, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True,
            )

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.popen.pid, signal.SIGKILL)
        self.popen.wait(10)

    def stop(self) -> int:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                return self.popen.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()
        return int(self.popen.returncode)

    def worker_id(self, conn: psycopg.Connection[Any]) -> str | None:
        row = conn.execute("SELECT id FROM forklift.workers WHERE pid = %s", (self.popen.pid,)).fetchone()
        return str(row[0]) if row else None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-6000:]


@contextlib.contextmanager
def procs(dsn: str, tmp: Path) -> Iterator[list[Proc]]:
    """Start workers with ``spawn`` (appended to the list); all are stopped at the end."""
    started: list[Proc] = []
    try:
        yield started
    finally:
        for p in started:
            if p.popen.poll() is None:
                p.stop()
        for i, p in enumerate(started):
            print(f"--- worker {i} (pid {p.popen.pid}) ---\n{p.log()}")
