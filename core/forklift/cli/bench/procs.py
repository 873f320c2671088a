"""The processes a scenario starts: forklift workers (the bench app) and the raw reference loops.

A subprocess runs ``from forklift.cli.bench.procs import <entry>; <entry>()`` with the
scratch database in ``FORKLIFT_DSN`` and, for a worker, its settings as JSON in
``FORKLIFT_BENCH_WORKER`` (empty: the defaults a user gets). It ends when the bench that
started it does, however the bench ended (:func:`follow_parent`): a bench killed outright
leaves no worker behind.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import IO, Any

import psutil
import psycopg
from psycopg import sql
from typing_extensions import TypedDict

from forklift import Forklift, JobContext
from forklift.cli.bench.server import SCHEMA, connect

PLAIN_CHANNEL = "bench_plain_wake"


# -- the app the bench runs -------------------------------------------------------------------
class Payload(TypedDict):
    n: int


app = Forklift(schema=SCHEMA)


@app.job(name="bench.noop")
async def noop(ctx: JobContext, payload: Payload) -> None:
    return None


@app.job(name="bench.stamp")
async def stamp(ctx: JobContext, payload: Payload) -> float:
    return time.time()


def worker_main() -> None:
    """A bench worker: the bench app, a Worker with default settings unless the scenario
    names others (``FORKLIFT_BENCH_WORKER``, JSON keyword arguments)."""
    from forklift import Worker, run_worker

    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    app.use(os.environ["FORKLIFT_DSN"])
    settings = json.loads(os.environ.get("FORKLIFT_BENCH_WORKER") or "{}")
    sys.exit(run_worker(Worker(app, **settings)))


# -- the raw references -----------------------------------------------------------------------
def raw_claim_sql(limit: int, kind: str = "bench.noop") -> str:
    """The plain claim: a CTE of ``limit`` rows FOR UPDATE SKIP LOCKED, an UPDATE ... RETURNING.

    It names the kind as forklift's claim does (a worker claims the kinds it knows): the claim
    index, which the plain table copies, is (queue, kind, priority, run_at, id), and without
    the kind every plain claim would sort the whole backlog.
    """
    return f"""
WITH c AS (
    SELECT id FROM plain.jobs WHERE state = 'available' AND queue = 'default'
      AND kind = '{kind}'
    ORDER BY priority, run_at, id LIMIT {int(limit)} FOR UPDATE SKIP LOCKED
)
UPDATE plain.jobs AS t SET state = 'running', attempt = t.attempt + 1, attempted_at = now()
FROM c WHERE t.id = c.id
RETURNING t.id
"""


RAW_STAMP_CLAIM_SQL = raw_claim_sql(100, "bench.stamp")  # the latency scenario's kind
RAW_COMPLETE_SQL = """
UPDATE plain.jobs SET state = 'completed', finished_at = now() WHERE id = ANY(%s)
"""
RAW_STAMP_SQL = """
UPDATE plain.jobs AS t SET state = 'completed', finished_at = now(), result = to_jsonb(s.t)
FROM unnest(%s::bigint[], %s::float8[]) AS s(id, t) WHERE t.id = s.id
"""


def raw_loop(conn: psycopg.Connection[Any], limit: int) -> None:
    """Claim ``limit`` at a time and complete them in one UPDATE, until nothing is left."""
    claim = raw_claim_sql(limit)
    while True:
        ids = [r[0] for r in conn.execute(claim).fetchall()]
        if not ids:
            break
        conn.execute(RAW_COMPLETE_SQL, (ids,))


def raw_listener_main() -> None:
    """The raw reference for pickup latency: LISTEN, claim, stamp, complete."""
    dsn = os.environ["FORKLIFT_DSN"]
    listen = connect(dsn, "raw-listen")
    work = connect(dsn, "raw-claim")
    listen.execute(sql.SQL("LISTEN {}").format(sql.Identifier(PLAIN_CHANNEL)))
    print("ready", flush=True)
    while True:
        for _ in listen.notifies(timeout=0.5, stop_after=1):
            pass
        while True:
            ids = [r[0] for r in work.execute(RAW_STAMP_CLAIM_SQL).fetchall()]
            if not ids:
                break
            now = time.time()
            work.execute(RAW_STAMP_SQL, (ids, [now] * len(ids)))


def producer_main() -> None:
    """One of the concurrent producers: reads ``plain N`` or ``mine N`` on stdin, inserts N
    jobs one transaction each (a plain INSERT, or the bench kind's enqueue), says ``done``."""
    dsn = os.environ["FORKLIFT_DSN"]
    app.use(dsn)
    conn = connect(dsn, "producer")
    plain = "INSERT INTO plain.jobs (kind, args) VALUES (%s, %s)"
    for i in range(20):  # warm: pool open, statements prepared
        noop.enqueue({"n": i})
        conn.execute(plain, ("bench.noop", json.dumps({"n": i})))
    print("ready", flush=True)
    for line in sys.stdin:
        side, count = line.split()
        n = int(count)
        if side == "plain":
            for i in range(n):
                conn.execute(plain, ("bench.noop", json.dumps({"n": i})))
        else:
            for i in range(n):
                noop.enqueue({"n": i})
        print("done", flush=True)
    app.close()


# -- subprocesses -----------------------------------------------------------------------------
#: How often a bench subprocess checks that the bench that started it is still there.
PARENT_CHECK_SECONDS = 0.5
#: After its parent is gone, how long a subprocess gets to stop on SIGTERM before it exits.
ORPHAN_GRACE_SECONDS = 10.0


#: The bench's pid, given to its subprocesses: one started as the bench dies sees another
#: parent from its first instruction, so the parent it must outlive is named, not looked up.
PARENT_ENV = "FORKLIFT_BENCH_PARENT"


def follow_parent() -> None:
    """End this process when the bench that started it is gone (killed outright, its own
    cleanup never ran): SIGTERM to itself (a worker drains), then an exit after a grace."""
    parent = int(os.environ.get(PARENT_ENV) or os.getppid())

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_CHECK_SECONDS)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(ORPHAN_GRACE_SECONDS)
        os._exit(1)

    threading.Thread(target=watch, name="bench-follow-parent", daemon=True).start()


class Proc:
    """A bench subprocess; its stderr is kept for the error message if it dies."""

    def __init__(self, entry: str, dsn: str, *, settings: dict[str, Any] | None = None,
                 stdout: int | None = None, stdin: int | None = None,
                 module: str = "forklift.cli.bench.procs") -> None:
        env = dict(os.environ, FORKLIFT_DSN=dsn, FORKLIFT_SCHEMA=SCHEMA,
                   FORKLIFT_BENCH_WORKER=json.dumps(settings or {}),
                   **{PARENT_ENV: str(os.getpid())})
        # Kept open for the life of the process (its stderr), closed by stop().
        self.errfile: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115
        self.popen = subprocess.Popen(
            [sys.executable, "-c", "from forklift.cli.bench.procs import follow_parent;"
             f" follow_parent(); from {module} import {entry}; {entry}()"],
            env=env,
            stdout=stdout if stdout is not None else subprocess.DEVNULL,
            stdin=stdin,
            stderr=self.errfile,
        )
        self.ps = psutil.Process(self.popen.pid)

    @property
    def pid(self) -> int:
        return self.popen.pid

    def check(self) -> None:
        if self.popen.poll() is not None:
            self.errfile.seek(0)
            tail = self.errfile.read().decode(errors="replace").strip().splitlines()[-5:]
            raise RuntimeError(
                f"bench subprocess exited with {self.popen.returncode}: " + " | ".join(tail)
            )

    def readline(self) -> bytes:
        assert self.popen.stdout is not None
        line = self.popen.stdout.readline()
        if not line:
            self.popen.wait(10)
            self.check()
        return line

    def cpu(self) -> float:
        t = self.ps.cpu_times()
        return float(t.user + t.system)

    def rss(self) -> int:
        return int(self.ps.memory_info().rss)

    def stop(self) -> None:
        if self.popen.poll() is None:
            if self.popen.stdin is not None:
                with contextlib.suppress(OSError):
                    self.popen.stdin.close()
            self.popen.terminate()
            try:
                self.popen.wait(30)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(10)
        self.errfile.close()


@contextlib.contextmanager
def procs(entry: str, dsn: str, count: int, **kw: Any) -> Iterator[list[Proc]]:
    started: list[Proc] = []
    try:
        for _ in range(count):
            started.append(Proc(entry, dsn, **kw))
        yield started
    finally:
        for p in started:
            p.stop()


def wait(what: str, predicate: Callable[[], bool], timeout: float, watched: Sequence[Proc] = (),
         interval: float = 0.05) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        for p in watched:
            p.check()
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


def wait_listening(conn: psycopg.Connection[Any], workers: Sequence[Proc]) -> None:
    """Until every worker is registered and its listener session is open."""

    def ready() -> bool:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND application_name LIKE 'forklift:%:listen'"
        ).fetchone()
        return bool(row and row[0] >= len(workers))

    wait("the workers to start listening", ready, 60.0, workers)
