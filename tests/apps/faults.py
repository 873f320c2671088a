"""The fault tests' app, and the harness that runs it in real worker subprocesses.

Handlers talk to the test through tables beside forklift's (``public`` schema of the test
database, made by :func:`setup`): ``gates`` (the test opens a gate to let a handler finish),
``notes`` (what a handler saw: started, cancelled and why), and ``ledger`` (the soak: one row per
attempt, with the fence and, at the end, whether the fence was still valid).

Handlers reach the database on their own connections (``application_name`` ``faults-app``),
never forklift's, so a test that breaks the worker's sessions leaves them alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pytest
from helpers import wait_until

from forklift import Backoff, Fail, Forklift, JobContext, Retry, Snooze

TESTS = Path(__file__).resolve().parents[1]  # workers run here: `apps` and `helpers` import

app = Forklift()

SETUP_SQL = """
CREATE TABLE IF NOT EXISTS public.gates (name text PRIMARY KEY);
CREATE TABLE IF NOT EXISTS public.notes (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id bigint NOT NULL, fence bigint NOT NULL, worker text NOT NULL, what text NOT NULL,
    at timestamptz NOT NULL DEFAULT clock_timestamp());
CREATE TABLE IF NOT EXISTS public.ledger (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id bigint NOT NULL, fence bigint NOT NULL, attempt int NOT NULL, worker text NOT NULL,
    started_at timestamptz NOT NULL DEFAULT clock_timestamp(), ended_at timestamptz,
    accepted boolean, outcome text);
"""

# The end of an attempt in the ledger: stamped, and marked accepted only if the attempt's fence
# is still the job's and the job still running (the same check forklift's own writes make).
# FOR SHARE waits for, and then sees, a concurrent rescue or requeue of the row.
LEDGER_END_SQL = """
WITH valid AS (
    SELECT 1 FROM forklift.jobs
    WHERE id = %(job)s AND fence = %(fence)s AND state = 'running' FOR SHARE
)
UPDATE public.ledger SET ended_at = clock_timestamp(), outcome = %(outcome)s,
                         accepted = EXISTS (SELECT 1 FROM valid)
WHERE id = %(row)s
"""


def setup(conn: psycopg.Connection[Any]) -> None:
    conn.execute(SETUP_SQL)


# -- the handlers' own connections ----------------------------------------------------------------
_local = threading.local()


def _db() -> psycopg.Connection[Any]:
    conn: psycopg.Connection[Any] | None = getattr(_local, "conn", None)
    if conn is None or conn.closed or conn.broken:
        # No prepared statements: under -m pgbouncer this connection goes through PgBouncer.
        conn = psycopg.connect(app.dsn, autocommit=True, application_name="faults-app",
                               prepare_threshold=None)
        _local.conn = conn
    return conn


def sql(query: str, params: Any = None) -> list[tuple[Any, ...]]:
    """Run one statement on this thread's connection, reconnecting once if it was lost."""
    for tries in range(2):
        try:
            cur = _db().execute(query, params)
            return cur.fetchall() if cur.description else []
        except psycopg.OperationalError:
            if tries:
                raise
            _local.conn = None
    return []


def note(ctx: JobContext, what: str) -> None:
    sql(
        "INSERT INTO public.notes (job_id, fence, worker, what) VALUES (%s, %s, %s, %s)",
        (ctx.job_id, ctx.fence, ctx.worker_id, what),
    )


def gate_open(name: str) -> bool:
    return bool(sql("SELECT 1 FROM public.gates WHERE name = %s", (name,)))


def _result(ctx: JobContext) -> dict[str, Any]:
    return {"worker": ctx.worker_id, "fence": ctx.fence, "attempt": ctx.attempt}


# -- handlers -------------------------------------------------------------------------------------
@dataclass
class Hold:
    gate: str = ""
    hold_attempts: int = 1_000  # attempts up to this one wait for the gate; later ones return
    progress: bool = False  # report progress while waiting


@app.job(name="faults.quick")
async def quick(ctx: JobContext, args: dict[str, Any]) -> dict[str, Any]:
    return _result(ctx)


@app.job(name="faults.hold", max_attempts=5)
async def hold(ctx: JobContext, h: Hold) -> dict[str, Any]:
    """Async: waits for its gate (on the first ``hold_attempts`` attempts), then returns."""
    await asyncio.to_thread(note, ctx, "start")
    try:
        i = 0
        while ctx.attempt <= h.hold_attempts and not await asyncio.to_thread(gate_open, h.gate):
            i += 1
            if h.progress:
                ctx.progress(i, None, f"{ctx.worker_id} tick {i}")
            await asyncio.sleep(0.05)
    except asyncio.CancelledError:
        await asyncio.to_thread(note, ctx, f"cancelled:{ctx.cancel_reason}")
        raise
    if h.progress:
        ctx.progress(-1, None, f"done by {ctx.worker_id}")
    return _result(ctx)


@dataclass
class HoldSync:
    gate: str = ""
    cooperative: bool = True  # stop (raise) when told; else keep waiting for the gate
    hold_attempts: int = 1_000


@app.job(name="faults.hold_sync", max_attempts=5)
def hold_sync(ctx: JobContext, h: HoldSync) -> dict[str, Any]:
    """Sync: waits for its gate; notes the moment its context is cancelled."""
    note(ctx, "start")
    seen = False
    while ctx.attempt <= h.hold_attempts and not gate_open(h.gate):
        if ctx.is_cancelled() and not seen:
            seen = True
            note(ctx, f"saw-cancel:{ctx.cancel_reason}")
            if h.cooperative:
                raise RuntimeError("stopping as asked")
        ctx.cancelled.wait(0.05)
        if seen:
            time.sleep(0.05)
    note(ctx, "end")
    return _result(ctx)


@app.job(name="faults.sleepy", max_attempts=5)
async def sleepy(ctx: JobContext, args: dict[str, Any]) -> dict[str, Any]:
    """Sleeps (without touching the database) in the worker ``args["sleep_in"]`` names, else on
    its first attempt; returns otherwise. (A worker that exits while the server is frozen may
    still release the job when the server wakes up, refunding the attempt: its next run is
    attempt 1 again, in another worker.)"""
    if ctx.worker_id == args.get("sleep_in", ctx.worker_id) and (
            "sleep_in" in args or ctx.attempt == 1):
        await asyncio.sleep(3600)
    return _result(ctx)


@app.job(name="faults.slow_async", timeout=0.5, max_attempts=1)
async def slow_async(ctx: JobContext, args: dict[str, Any]) -> None:
    try:  # the timeout may strike while the start is still being noted, on a loaded machine
        await asyncio.to_thread(note, ctx, "start")
        await asyncio.sleep(120)
    except asyncio.CancelledError:
        await asyncio.to_thread(note, ctx, f"cancelled:{ctx.cancel_reason}")
        raise


@app.job(name="faults.slow_sync", timeout=0.5, max_attempts=1)
def slow_sync(ctx: JobContext, h: HoldSync) -> dict[str, Any]:
    return hold_sync.fn(ctx, HoldSync(gate=h.gate, cooperative=False))  # type: ignore[no-any-return]


# -- the worker's edges: cooperative stops, crashes, stubborn handlers -------------------------
@dataclass
class Coop:
    gate: str = ""
    how: str = "return"  # when told to stop: "return" a partial result, or "raise" (raise_if_cancelled)


@app.job(name="faults.coop", max_attempts=3, timeout=30)
def coop(ctx: JobContext, c: Coop) -> dict[str, Any]:
    """Works in steps until its gate opens; stops when told, the way the docs say to."""
    note(ctx, "start")
    steps = 0
    while not gate_open(c.gate):
        if ctx.is_cancelled():
            note(ctx, f"saw-cancel:{ctx.cancel_reason}")
            if c.how == "raise":
                ctx.raise_if_cancelled()
            return {"steps": steps, "stopped": True}
        steps += 1
        ctx.cancelled.wait(0.05)
    return {"steps": steps, "stopped": False}


@app.job(name="faults.coop_timeout", max_attempts=2, timeout=0.5, retry=Backoff("fixed", 60))
def coop_timeout(ctx: JobContext, c: Coop) -> dict[str, Any]:
    return coop.fn(ctx, c)  # type: ignore[no-any-return]


@app.job(name="faults.crash", max_attempts=10, retry=Backoff("fixed", 1.0, jitter="none"))
def crash(ctx: JobContext, args: dict[str, Any]) -> None:
    """Kills the process that runs it, the moment it starts (a poison job: OOM, segfault)."""
    note(ctx, "start")
    os._exit(17)


@app.job(name="faults.crash_fragile", max_attempts=10, lease_expiries=1,
         retry=Backoff("fixed", 1.0, jitter="none"))
def crash_fragile(ctx: JobContext, args: dict[str, Any]) -> None:
    """A poison job of a kind that allows a single lost worker (``lease_expiries=1``)."""
    note(ctx, "start")
    os._exit(17)


@app.job(name="faults.stubborn", max_attempts=5)
async def stubborn(ctx: JobContext, h: Hold) -> dict[str, Any]:
    """Async, and ignores cancellation: ticks (a note every 0.1 s) until its gate opens."""
    await asyncio.to_thread(note, ctx, "start")
    while True:
        try:  # every cancellation swallowed, wherever it lands
            if await asyncio.to_thread(gate_open, h.gate):
                break
            await asyncio.to_thread(note, ctx, "tick")
            await asyncio.sleep(0.1)
        except asyncio.CancelledError:
            continue
    await asyncio.to_thread(note, ctx, "end")
    return _result(ctx)


# -- error text -----------------------------------------------------------------------------------
CANARY = "s3cr3t-CANARY-7f1e9c"  # what must never reach the database


@dataclass
class Leak:
    how: str


@dataclass
class Strict:
    count: int


@app.job(name="faults.leaky", max_attempts=1, failure_codes=["upstream_down"])
def leaky(ctx: JobContext, leak: Leak) -> Strict:
    password = CANARY  # a local: tracebacks must not carry it  # noqa: F841
    if leak.how == "url":
        raise ConnectionError(f"could not reach postgresql://app:{CANARY}@db.internal:5432/x")
    if leak.how == "pairs":
        raise RuntimeError(f"login failed: user=app password={CANARY} token: {CANARY}")
    if leak.how == "bearer":
        raise RuntimeError(f"401 from api: Authorization: Bearer {CANARY}")
    if leak.how == "fail":
        raise Fail("upstream_down", f"upstream said secret={CANARY}")
    if leak.how == "retry":
        raise Retry(0, reason=f"rate limited, api_key={CANARY}")
    if leak.how == "result":
        return {"count": CANARY}  # type: ignore[return-value]  # pydantic echoes input_value
    raise ValueError(f"unknown leak {leak.how}")


@app.job(name="faults.leaky_codes", max_attempts=1, errors="codes", failure_codes=["no_luck"])
def leaky_codes(ctx: JobContext, leak: Leak) -> None:
    if leak.how == "fail":
        raise Fail("no_luck", f"plain words {CANARY}")
    raise RuntimeError(f"plain words {CANARY}")


# -- classification, end to end -------------------------------------------------------------------
@dataclass
class Verdict:
    do: str
    after: float = 0.0
    code: str = ""


@app.job(
    name="faults.verdict", max_attempts=3, failure_codes=["card_declined"],
    retry=Backoff(kind="fixed", base=600, max=900, jitter="none"),
)
def verdict(ctx: JobContext, v: Verdict) -> str:
    if v.do == "retry":
        raise Retry(v.after, reason="try later")
    if v.do == "snooze":
        raise Snooze(v.after)
    if v.do == "fail":
        raise Fail(v.code, "declined")
    if v.do == "raise":
        raise KeyError("missing")
    return "ok"


# -- the soak -------------------------------------------------------------------------------------
@dataclass
class Soak:
    seed: int
    fail: float = 0.1  # chance of an ordinary exception (retried)
    fatal: float = 0.01  # chance of Fail (dead at once)
    work_ms: int = 20  # up to this long


@app.job(
    name="faults.soak", max_attempts=25, failure_codes=["fatal"],
    retry=Backoff(kind="fixed", base=0.05, max=0.2, jitter="full"),
)
def soak(ctx: JobContext, s: Soak) -> dict[str, Any]:
    rng = random.Random(s.seed * 1000 + ctx.attempt)
    row = sql(
        "INSERT INTO public.ledger (job_id, fence, attempt, worker) VALUES (%s, %s, %s, %s)"
        " RETURNING id",
        (ctx.job_id, ctx.fence, ctx.attempt, ctx.worker_id),
    )[0][0]
    ctx.cancelled.wait(rng.random() * s.work_ms / 1000)
    roll = rng.random()
    outcome = "fatal" if roll < s.fatal else "fail" if roll < s.fatal + s.fail else "ok"
    sql(LEDGER_END_SQL, {"job": ctx.job_id, "fence": ctx.fence, "outcome": outcome, "row": row})
    if outcome == "fatal":
        raise Fail("fatal", "the dice said so")
    if outcome == "fail":
        raise RuntimeError("random failure")
    return _result(ctx)


# -- running workers as subprocesses --------------------------------------------------------------
@dataclass
class WorkerProc:
    """``forklift worker --app apps.faults:app`` (or ``app``) in a subprocess (cwd tests/),
    logging to a file."""

    dsn: str
    log_path: Path
    concurrency: int = 4
    lease: float = 2.0
    drain_timeout: float = 30.0
    poll_interval: float = 1.0
    queues: str | None = None
    extra: list[str] = field(default_factory=list)
    app: str = "apps.faults:app"
    #: Worker options the CLI has no flag for (prefetch...): run apps/worker_main.py instead.
    options: dict[str, Any] | None = None
    popen: subprocess.Popen[bytes] = field(init=False)

    def __post_init__(self) -> None:
        if self.options is not None:
            opts = {"concurrency": self.concurrency, "lease": self.lease,
                    "drain_timeout": self.drain_timeout, "poll_interval": self.poll_interval,
                    **({"queues": self.queues.split(",")} if self.queues else {}),
                    **self.options}
            self._spawn([sys.executable, "-m", "apps.worker_main", self.app, json.dumps(opts)])
            return
        cmd = [
            sys.executable, "-m", "forklift.cli.main", "worker",
            "--app", self.app,
            "--concurrency", str(self.concurrency), "--lease", str(self.lease),
            "--drain-timeout", str(self.drain_timeout),
            "--poll-interval", str(self.poll_interval), "--log-level", "INFO",
            *(["--queues", self.queues] if self.queues else []), *self.extra,
        ]  # fmt: skip
        self._spawn(cmd)

    def _spawn(self, cmd: list[str]) -> None:
        env = dict(os.environ, FORKLIFT_DSN=self.dsn, PYTHONUNBUFFERED="1")
        env.pop("FORKLIFT_APP", None)
        with open(self.log_path, "ab") as out:
            self.popen = subprocess.Popen(
                cmd, cwd=TESTS, env=env, stdout=out, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True,
            )  # fmt: skip

    @property
    def pid(self) -> int:
        return self.popen.pid

    def signal(self, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, sig)

    def alive(self) -> bool:
        return self.popen.poll() is None

    def exited(self) -> bool:
        return self.popen.poll() is not None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def worker_id(self, conn: psycopg.Connection[Any]) -> str | None:
        row = conn.execute(
            "SELECT id FROM forklift.workers WHERE pid = %s", (self.pid,)
        ).fetchone()
        return str(row[0]) if row else None

    def stop(self, timeout: float = 30.0) -> int | None:
        """SIGCONT, SIGTERM, wait; SIGKILL if it will not go. Returns the exit code."""
        if self.alive():
            self.signal(signal.SIGCONT)
            self.signal(signal.SIGTERM)
            try:
                return self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self.signal(signal.SIGKILL)
        return self.popen.wait(10)


def backends(conn: psycopg.Connection[Any], worker_id: str, purpose: str | None = None
             ) -> list[int]:
    """Server pids of a worker's sessions (all, or one purpose: claim, complete, listen...)."""
    name = f"forklift:{worker_id}:{purpose}" if purpose else f"forklift:{worker_id}:%"
    rows = conn.execute(
        "SELECT pid FROM pg_stat_activity WHERE application_name LIKE %s AND datname ="
        " current_database()",
        (name,),
    )
    return [int(r[0]) for r in rows]


#: The sessions a leading worker uses all the time (an app without schedules opens no cron
#: session; retention and worker pruning open theirs once a minute).
LEADER_PURPOSES = ("claim", "complete", "heartbeat", "listen", "leader", "stage", "rescue")


def purposes(conn: psycopg.Connection[Any], worker_id: str) -> list[str]:
    """The purposes (LEADER_PURPOSES) of a worker's open sessions."""
    rows = conn.execute(
        "SELECT application_name FROM pg_stat_activity WHERE application_name LIKE %s"
        " AND datname = current_database()", (f"forklift:{worker_id}:%",))
    return sorted(str(r[0]).rsplit(":", 1)[-1] for r in rows)


def local_backend(pid: int) -> bool:
    """Can this process signal server backend ``pid`` (the server runs on this machine)?"""
    try:
        with open(f"/proc/{pid}/comm") as fh:
            return fh.read().strip() in ("postgres", "postmaster")
    except OSError:
        return False


def job(conn: psycopg.Connection[Any], job_id: int) -> dict[str, Any]:
    cur = conn.execute("SELECT * FROM forklift.jobs WHERE id = %s", (job_id,))
    row = cur.fetchone()
    assert row is not None, f"job {job_id} is gone"
    assert cur.description is not None
    return {d.name: v for d, v in zip(cur.description, row, strict=True)}


def notes(conn: psycopg.Connection[Any], job_id: int) -> list[tuple[int, str, str]]:
    """(fence, worker, what) a job's handlers noted, in order."""
    rows = conn.execute(
        "SELECT fence, worker, what FROM public.notes WHERE job_id = %s ORDER BY id", (job_id,)
    )
    return [(int(f), str(w), str(what)) for f, w, what in rows]


def open_gate(conn: psycopg.Connection[Any], name: str) -> None:
    conn.execute("INSERT INTO public.gates VALUES (%s) ON CONFLICT DO NOTHING", (name,))


def enqueue(conn: psycopg.Connection[Any], kind: str, args: dict[str, Any], **options: Any
            ) -> int:
    return app.kind(kind).enqueue(args, conn=conn, **options).id



class Procs:
    """Every worker subprocess and stopped server backend of a test, cleaned up at its end."""

    def __init__(self, dsn: str, tmp: Path) -> None:
        self.dsn = dsn
        self.tmp = tmp
        self.workers: list[WorkerProc] = []
        self.frozen: list[int] = []  # server pids we SIGSTOPped

    def start(self, **options: Any) -> WorkerProc:
        options.setdefault("dsn", self.dsn)
        w = WorkerProc(log_path=self.tmp / f"worker-{len(self.workers)}.log", **options)
        self.workers.append(w)
        return w

    def freeze(self, pid: int, *, gone_ok: bool = False) -> None:
        """SIGSTOP a server process. ``gone_ok``: one that has exited since it was listed (an
        autovacuum worker, a backend closing) answers nothing either: not an error."""
        try:
            os.kill(pid, signal.SIGSTOP)
        except ProcessLookupError:
            if not gone_ok:
                raise
            return
        self.frozen.append(pid)

    def thaw(self) -> None:
        for pid in self.frozen:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        self.frozen.clear()

    def logs(self) -> str:
        return "\n".join(f"--- worker {i} (pid {w.pid}) ---\n{w.log()[-6000:]}"
                         for i, w in enumerate(self.workers))

    def close(self) -> None:
        self.thaw()
        for w in self.workers:
            w.stop()


# -- fixtures (import them into a test module by name) ------------------------------------------
@pytest.fixture
def db(conn: psycopg.Connection[Any]) -> psycopg.Connection[Any]:
    """The test's connection, with the app's side tables made."""
    setup(conn)
    return conn


@pytest.fixture
def procs(dsn: str, tmp_path: Path) -> Iterator[Procs]:
    """Worker subprocesses of one test; their logs are printed (shown when the test fails)."""
    p = Procs(dsn, tmp_path)
    try:
        yield p
    finally:
        p.close()
        print(p.logs())


def registered(conn: psycopg.Connection[Any], w: WorkerProc, timeout: float = 30.0) -> str:
    """Wait until the worker has registered; its id."""
    def seen() -> str | None:
        assert w.alive(), f"worker exited with {w.popen.returncode}:\n{w.log()[-4000:]}"
        return w.worker_id(conn)

    return wait_until(seen, timeout=timeout, interval=0.05, message="worker did not register")


def states(conn: psycopg.Connection[Any], ids: list[int]) -> dict[int, str]:
    rows = conn.execute("SELECT id, state FROM forklift.jobs WHERE id = ANY(%s)", (ids,))
    return {int(i): str(s) for i, s in rows}


def all_in(conn: psycopg.Connection[Any], ids: list[int], *wanted: str) -> bool:
    got = states(conn, ids)
    return len(got) == len(ids) and all(s in wanted for s in got.values())


def assert_ledger_sound(conn: psycopg.Connection[Any]) -> dict[str, int]:
    """Check the soak ledger against the jobs; returns counts for the test's report.

    - Attempts whose end was accepted (their fence still current when they finished) never
      overlap for one job: ordered by fence, each ended before the next one started.
    - A completed job's final fence is one of those accepted attempts, and it succeeded.
    - An attempt whose handler began after its job reached a terminal state (a late start:
      the worker started it inside its lease, then was frozen or starved before the handler's
      first statement, while the job was rescued and finished elsewhere) had its end refused:
      it never counts. (Nothing can keep a paused process from resuming a handler it started;
      the fence keeps that run from being taken for the job's.)
    """
    rows = conn.execute(
        "SELECT l.job_id, l.fence, l.started_at, l.ended_at, l.accepted, l.outcome,"
        " j.state, j.fence, j.finished_at"
        " FROM public.ledger l JOIN forklift.jobs j ON j.id = l.job_id"
        " ORDER BY l.job_id, l.fence, l.started_at"
    ).fetchall()
    by_job: dict[int, list[tuple[Any, ...]]] = {}
    for r in rows:
        by_job.setdefault(int(r[0]), []).append(r)
    refused = late = 0
    for job_id, attempts in by_job.items():
        state, final_fence, finished_at = attempts[0][6], attempts[0][7], attempts[0][8]
        accepted = [a for a in attempts if a[4]]
        refused += sum(1 for a in attempts if a[4] is False)
        for prev, nxt in itertools.pairwise(accepted):
            assert prev[1] < nxt[1], f"job {job_id}: two accepted attempts share fence {prev[1]}"
            assert prev[3] <= nxt[2], (
                f"job {job_id}: fence {prev[1]} ran until {prev[3]}, after fence {nxt[1]}"
                f" started at {nxt[2]}: two valid leases at once"
            )
        if state == "completed":
            last = [a for a in accepted if a[1] == final_fence]
            assert last and last[-1][5] == "ok", f"job {job_id}: completed without its run"
        for a in attempts:
            if finished_at is not None and a[2] > finished_at:
                late += 1
                assert a[4] is not True, (
                    f"job {job_id}: an attempt (fence {a[1]}) that began after the job finished"
                    " was accepted"
                )
    return {"jobs": len(by_job), "attempts": len(rows), "refused": refused, "late": late}
