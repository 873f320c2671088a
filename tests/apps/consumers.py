"""The consumer fault tests' app, run as ``forklift worker --app apps.consumers:app``.

A consumer ``feed`` reads ``public.feed`` (an increasing ``id``) in batches of BATCH and, in the
batch's own transaction, appends each row to ``public.applied`` with the pid of the worker
that applied it, and the number of runs of the consumer running at that moment (read from
forklift's jobs table) to ``public.overlap``. Faults are asked for through the environment
and happen once (a marker file records that they did):

- ``FEED_HANG_ID=<n>`` with ``FEED_MARKER=<path>``: the batch holding row n stops after its
  rows are applied and before its cursor commits;
- ``FEED_SLOW=<seconds>``: each batch waits that long (on its cancellation event) after
  applying its rows, so runs have time to overlap if anything let them.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import psycopg

from forklift import Forklift
from forklift._features.consumers.table import TableSource

app = Forklift()
ROWS = 120
BATCH = 10


@app.consumer("feed", source=TableSource("public.feed", key="id"), batch_size=BATCH,
              slice_seconds=1.0)
def apply_feed(items: list[dict[str, Any]], conn: psycopg.Connection[Any]) -> None:
    ids = [row["id"] for row in items]
    conn.execute("INSERT INTO public.applied (id, pid) SELECT unnest(%s::bigint[]), %s",
                 (ids, os.getpid()))
    conn.execute(
        "INSERT INTO public.overlap (running) SELECT count(*) FROM forklift.jobs"
        " WHERE kind = 'feed' AND state = 'running'")
    hang = os.environ.get("FEED_HANG_ID")
    if hang and int(hang) in ids and _first_time(os.environ.get("FEED_MARKER"), str(ids[0])):
        time.sleep(600)  # killed here: the batch's rows are applied, its cursor is not stored
    slow = os.environ.get("FEED_SLOW")
    if slow:
        threading.Event().wait(float(slow))


def _first_time(marker: str | None, text: str) -> bool:
    """Write the marker unless it exists: whether this is the fault's one time."""
    if not marker or os.path.exists(marker):
        return False
    Path(marker).write_text(text)
    return True


def setup(conn: psycopg.Connection[Any], rows: int = ROWS) -> None:
    conn.execute("CREATE TABLE public.feed (id bigserial PRIMARY KEY, body text NOT NULL)")
    conn.execute("CREATE TABLE public.applied (id bigint NOT NULL, pid int NOT NULL)")
    conn.execute("CREATE TABLE public.overlap (running int NOT NULL)")
    conn.execute("INSERT INTO public.feed (body) SELECT 'row ' || g FROM generate_series(1, %s) g",
                 (rows,))


class Proc:
    """One ``forklift worker`` subprocess of this app."""

    def __init__(self, dsn: str, log: Path, lease: float = 2.0, **env: str) -> None:
        import subprocess
        import sys

        cmd = [sys.executable, "-m", "forklift.cli.main", "worker", "--app", "apps.consumers:app",
               "--lease", str(lease), "--concurrency", "4", "--log-level", "INFO"]
        environ = dict(os.environ, FORKLIFT_DSN=dsn, PYTHONUNBUFFERED="1", **env)
        environ.pop("FORKLIFT_APP", None)
        self.log_path = log
        with open(log, "ab") as out:
            self.popen = subprocess.Popen(
                cmd, cwd=Path(__file__).resolve().parent.parent, env=environ, stdout=out,
                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)

    def kill(self) -> None:
        import contextlib
        import signal

        with contextlib.suppress(ProcessLookupError):
            os.kill(self.popen.pid, signal.SIGKILL)
        self.popen.wait(10)

    def stop(self) -> None:
        import signal
        import subprocess

        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-6000:]
