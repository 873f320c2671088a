"""`forklift bench`: forklift against a plain-SQL reference, in one run, on one server.

Every scenario gets a fresh database on the same server (cloned from a migrated template) and is
measured twice: once through forklift (a real worker subprocess with default settings, or the
public enqueue API), once through the plainest SQL that does the same job on a table of the same
shape without forklift's trigger. Ratios are what matter; absolute figures depend on the
machine and its disk (the server's fsync and synchronous_commit settings are reported).

How each figure is taken
    Throughput of a run is ``max(finished_at) - min(attempted_at)`` read from the database, for
    forklift and the plain loop alike, so process start-up is not counted and both sides use
    the same clock. Jobs are preloaded with COPY after the workers are idle and listening.
    Pickup latency runs from the enqueuing client's clock just before COMMIT to the handler's
    first line (forklift) or the return of the claim (raw loop), both read from ``time.time()``
    on this machine, the start stored in the job's result. Both sides enqueue inside their own
    transaction (forklift through ``enqueue(conn=...)``), so the figure holds the commit, the
    NOTIFY, the wake-up, the claim and the dispatch, and not the cost of the INSERT itself
    (which the enqueue figures measure). Database CPU is the CPU time of the client backends connected to the
    scenario's database (psutil; only when the server runs on this machine), divided by jobs.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import platform
import secrets
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import IO, Any

import psutil
import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from typing_extensions import TypedDict

from forklift import Forklift, JobContext

log = logging.getLogger("forklift_console.bench")

SCHEMA = "forklift"
PLAIN_CHANNEL = "bench_plain_wake"
SCENARIOS = ("e2e", "e2e_2w", "enqueue", "bulk", "latency", "memory", "db_cpu",
             "flow_keyed", "flow_fair")  # the flow_* scenarios live in bench_flow.py


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


# -- the report ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Sizes:
    e2e_jobs: int = 100_000
    enqueue_jobs: int = 4_000
    bulk_jobs: int = 200_000  # enqueue_many in calls of bulk_call
    bulk_call: int = 10_000
    copy_batch: int = 1_000
    latency_jobs: int = 500
    latency_every: float = 0.020
    memory_jobs: int = 1_000_000


FULL = Sizes()
QUICK = Sizes(
    e2e_jobs=20_000, enqueue_jobs=1_000, bulk_jobs=40_000, latency_jobs=100, memory_jobs=100_000
)


@dataclass
class Figure:
    key: str
    title: str
    unit: str
    forklift: float | None
    reference: float | None
    reference_label: str
    target: str
    ratio: float | None = None
    ok: bool | None = None
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass
class ServerInfo:
    version: str
    fsync: str
    synchronous_commit: str
    origin: str
    local: bool


@dataclass
class BenchReport:
    started_at: float
    seconds: float
    quick: bool
    sizes: Sizes
    machine: dict[str, Any]
    server: ServerInfo
    figures: list[Figure]
    errors: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def figure(self, key: str) -> Figure | None:
        return next((f for f in self.figures if f.key == key), None)


def _fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "—"
    if unit == "jobs/s":
        return f"{value:,.0f}"
    if unit in ("ms", "µs/job"):
        return f"{value:,.2f}" if value < 10 else f"{value:,.1f}"
    if unit == "MiB":
        return f"{value:,.1f}"
    return f"{value:,.3g}"


def table_rows(report: BenchReport) -> list[tuple[str, str, str, str, str, str]]:
    """(figure, forklift, reference, ratio, target, verdict) for printing."""
    rows = []
    for f in report.figures:
        verdict = "" if f.ok is None else ("ok" if f.ok else "MISSED")
        ref = _fmt(f.reference, f.unit)
        if f.reference is not None and f.reference_label:
            ref = f"{ref} {f.reference_label}"
        rows.append((
            f"{f.title} [{f.unit}]",
            _fmt(f.forklift, f.unit),
            ref,
            "—" if f.ratio is None else f"{f.ratio:.2f}",
            f.target,
            verdict,
        ))
    return rows


def header_lines(report: BenchReport) -> list[str]:
    m, srv = report.machine, report.server
    return [
        f"machine: {m['cpus']} CPU ({m['cpu_model']}), {m['memory_gib']} GiB, {m['platform']},"
        f" Python {m['python']}, psycopg {m['psycopg']}",
        f"server: PostgreSQL {srv.version} ({srv.origin}), fsync={srv.fsync},"
        f" synchronous_commit={srv.synchronous_commit}",
        f"run: {'quick' if report.quick else 'full'} sizes, {report.seconds:.0f} s",
    ]


def format_report(report: BenchReport) -> str:
    """The report as plain text: a header and an aligned table (for scripts and docs)."""
    head = ("figure", "forklift", "reference (same run)", "ratio", "target", "")
    rows = [head, *table_rows(report)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = [*header_lines(report), ""]
    for k, r in enumerate(rows):
        lines.append("  ".join(cell.ljust(w) if i in (0, 4) else cell.rjust(w)
                               for i, (cell, w) in enumerate(zip(r, widths, strict=True))).rstrip())
        if k == 0:
            lines.append("  ".join("-" * w for w in widths))
    for name, problem in report.errors.items():
        lines.append(f"scenario {name} failed: {problem}")
    return "\n".join(lines)

# -- the server and its scratch databases --------------------------------------------------------
PLAIN_SQL = """
CREATE SCHEMA plain;
CREATE TABLE plain.jobs (LIKE forklift.jobs INCLUDING DEFAULTS INCLUDING IDENTITY INCLUDING INDEXES);
"""


def _connect(dsn: str, name: str) -> psycopg.Connection[Any]:
    return psycopg.Connection.connect(
        make_conninfo(dsn, application_name=f"forklift:bench:{name}"), autocommit=True
    )


class _Server:
    """The server under test: scratch databases cloned from one migrated template."""

    def __init__(self, dsn: str, origin: str) -> None:
        self.dsn = dsn
        self.origin = origin
        self.admin = _connect(dsn, "admin")
        self.token = secrets.token_hex(3)
        self.created: list[str] = []
        self.template = self._create(f"forklift_bench_{self.token}_template")
        self._prepare_template()
        self.local = self._is_local()

    def info(self) -> ServerInfo:
        def show(name: str) -> str:
            row = self.admin.execute(sql.SQL("SHOW {}").format(sql.Identifier(name))).fetchone()
            return str(row[0]) if row else "?"

        return ServerInfo(
            version=show("server_version"),
            fsync=show("fsync"),
            synchronous_commit=show("synchronous_commit"),
            origin=self.origin,
            local=self.local,
        )

    def _is_local(self) -> bool:
        """True when the server's backends are processes on this machine (psutil can see them)."""
        row = self.admin.execute(
            "SELECT pg_backend_pid(), extract(epoch FROM backend_start)::float8"
            " FROM pg_stat_activity WHERE pid = pg_backend_pid()"
        ).fetchone()
        if row is None:
            return False
        try:
            proc = psutil.Process(int(row[0]))
            return abs(proc.create_time() - float(row[1])) < 2.0 and "postgres" in proc.name()
        except (psutil.Error, OSError):
            return False

    def dsn_for(self, dbname: str) -> str:
        return make_conninfo(self.dsn, dbname=dbname)

    def _create(self, name: str, template: str | None = None) -> str:
        query = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name))
        if template is not None:
            query += sql.SQL(" TEMPLATE {}").format(sql.Identifier(template))
        self.admin.execute(query)
        self.created.append(name)
        return name

    def _prepare_template(self) -> None:
        from forklift import migrate

        target = self.dsn_for(self.template)
        migrate(target, SCHEMA)
        with _connect(target, "template") as conn:
            conn.execute(PLAIN_SQL)
            row = conn.execute(
                "SELECT array_to_string(reloptions, ', ') FROM pg_class"
                " WHERE oid = 'forklift.jobs'::regclass"
            ).fetchone()
            if row and row[0]:
                # Same storage settings as forklift's table: the comparison is of the SQL.
                conn.execute(f"ALTER TABLE plain.jobs SET ({row[0]})")

    def fresh(self, label: str) -> str:
        name = self._create(f"forklift_bench_{self.token}_{label}", template=self.template)
        return self.dsn_for(name)

    def drop(self, dsn: str) -> None:
        name = conninfo_to_dict(dsn).get("dbname")
        if not name:
            return
        with contextlib.suppress(psycopg.Error):
            self.admin.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(str(name)))
            )
        if name in self.created:
            self.created.remove(str(name))

    def close(self) -> None:
        for name in reversed(list(self.created)):
            self.drop(self.dsn_for(name))
        self.admin.close()


# -- processes: forklift workers and the raw listening loop --------------------------------------
def worker_main() -> None:
    """Entry point of a bench worker subprocess: the bench app, a Worker with default settings."""
    from forklift import Worker, run_worker

    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    app.use(os.environ["FORKLIFT_DSN"])
    sys.exit(run_worker(Worker(app)))


RAW_CLAIM_SQL = """
WITH c AS (
    SELECT id FROM plain.jobs WHERE state = 'available' AND queue = 'default'
    ORDER BY priority, run_at, id LIMIT 100 FOR UPDATE SKIP LOCKED
)
UPDATE plain.jobs AS t SET state = 'running', attempt = t.attempt + 1, attempted_at = now()
FROM c WHERE t.id = c.id
RETURNING t.id
"""
RAW_COMPLETE_SQL = """
UPDATE plain.jobs SET state = 'completed', finished_at = now() WHERE id = ANY(%s)
"""
RAW_STAMP_SQL = """
UPDATE plain.jobs AS t SET state = 'completed', finished_at = now(), result = to_jsonb(s.t)
FROM unnest(%s::bigint[], %s::float8[]) AS s(id, t) WHERE t.id = s.id
"""


def raw_listener_main() -> None:
    """Entry point of the raw reference for pickup latency: LISTEN, claim, stamp, complete."""
    dsn = os.environ["FORKLIFT_DSN"]
    listen = _connect(dsn, "raw-listen")
    work = _connect(dsn, "raw-claim")
    listen.execute(sql.SQL("LISTEN {}").format(sql.Identifier(PLAIN_CHANNEL)))
    print("ready", flush=True)
    while True:
        for _ in listen.notifies(timeout=0.5, stop_after=1):
            pass
        while True:
            ids = [r[0] for r in work.execute(RAW_CLAIM_SQL).fetchall()]
            if not ids:
                break
            now = time.time()
            work.execute(RAW_STAMP_SQL, (ids, [now] * len(ids)))


class _Proc:
    """A bench subprocess; its stderr is kept for the error message if it dies."""

    def __init__(self, entry: str, dsn: str, stdout: int | None = None,
                 module: str = "forklift_console.bench") -> None:
        env = dict(os.environ, FORKLIFT_DSN=dsn, FORKLIFT_SCHEMA=SCHEMA)
        # Kept open for the life of the process (its stderr), closed by stop().
        self.errfile: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115
        self.popen = subprocess.Popen(
            [sys.executable, "-c", f"from {module} import {entry}; {entry}()"],
            env=env,
            stdout=stdout if stdout is not None else subprocess.DEVNULL,
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

    def cpu(self) -> float:
        t = self.ps.cpu_times()
        return float(t.user + t.system)

    def rss(self) -> int:
        return int(self.ps.memory_info().rss)

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(30)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(10)
        self.errfile.close()


@contextlib.contextmanager
def _procs(entry: str, dsn: str, count: int, module: str = "forklift_console.bench"
           ) -> Iterator[list[_Proc]]:
    procs: list[_Proc] = []
    try:
        for _ in range(count):
            procs.append(_Proc(entry, dsn, module=module))
        yield procs
    finally:
        for p in procs:
            p.stop()


def _wait(what: str, predicate: Callable[[], bool], timeout: float, procs: Sequence[_Proc] = (),
          interval: float = 0.05) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        for p in procs:
            p.check()
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


def _wait_listening(conn: psycopg.Connection[Any], procs: Sequence[_Proc]) -> None:
    """Until every worker is registered and its listener session is open."""

    def ready() -> bool:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND application_name LIKE 'forklift:%:listen'"
        ).fetchone()
        return bool(row and row[0] >= len(procs))

    _wait("the workers to start listening", ready, 60.0, procs)


# -- measuring helpers --------------------------------------------------------------------------
class _BackendCpu:
    """CPU seconds of the client backends of one database, except the bench's own sessions."""

    def __init__(self, conn: psycopg.Connection[Any], local: bool, exclude: Iterable[int] = ()) -> None:
        self.conn = conn
        self.local = local
        self.exclude = {self._own_pid(conn), *exclude}
        self.start: dict[int, float] = {}

    @staticmethod
    def _own_pid(conn: psycopg.Connection[Any]) -> int:
        row = conn.execute("SELECT pg_backend_pid()").fetchone()
        return int(row[0]) if row else 0

    def sample(self) -> dict[int, float]:
        if not self.local:
            return {}
        rows = self.conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
            " AND backend_type = 'client backend'"
        ).fetchall()
        seen: dict[int, float] = {}
        for (pid,) in rows:
            if pid in self.exclude:
                continue
            try:
                t = psutil.Process(pid).cpu_times()
            except (psutil.Error, OSError):
                continue
            seen[pid] = float(t.user + t.system)
        return seen

    def begin(self) -> None:
        self.start = self.sample()

    def end(self) -> float | None:
        if not self.local:
            return None
        return sum(v - self.start.get(pid, 0.0) for pid, v in self.sample().items())


def _copy_jobs(conn: psycopg.Connection[Any], table: str, kind: str, start: int, count: int,
               batch: int = 50_000) -> None:
    """Preload jobs with COPY (each batch one transaction; forklift's trigger wakes workers)."""
    done = 0
    while done < count:
        n = min(batch, count - done)
        data = "".join(f'{kind}\t{{"n": {start + done + i}}}\n' for i in range(n)).encode()
        with conn.transaction(), conn.cursor().copy(
            f"COPY {table} (kind, args) FROM STDIN"  # table is one of two literals
        ) as copy:
            copy.write(data)
        done += n


def _span(conn: psycopg.Connection[Any], table: str) -> tuple[int, float]:
    """(jobs completed, seconds from the first claim to the last completion)."""
    row = conn.execute(
        f"SELECT count(*), extract(epoch FROM max(finished_at) - min(attempted_at))::float8"
        f" FROM {table} WHERE state = 'completed'"
    ).fetchone()
    assert row is not None
    return int(row[0]), float(row[1] or 0.0)


def _all_done(conn: psycopg.Connection[Any], last_id: int) -> bool:
    # The last job (claim order is id order here) first: one index probe; then the live states.
    row = conn.execute("SELECT state FROM forklift.jobs WHERE id = %s", (last_id,)).fetchone()
    if row is None or row[0] not in ("completed", "dead", "cancelled"):
        return False
    row = conn.execute(
        "SELECT NOT EXISTS (SELECT 1 FROM forklift.jobs WHERE state = 'available')"
        " AND NOT EXISTS (SELECT 1 FROM forklift.jobs WHERE state = 'running')"
    ).fetchone()
    return bool(row and row[0])


def _max_id(conn: psycopg.Connection[Any], table: str) -> int:
    row = conn.execute(f"SELECT max(id) FROM {table}").fetchone()
    return int(row[0]) if row and row[0] is not None else 0


def _pickups(conn: psycopg.Connection[Any], table: str, sent: dict[int, float]) -> list[float]:
    """Milliseconds from each job's commit (client clock) to the start recorded in its result."""
    rows = conn.execute(
        f"SELECT id, (result::text)::float8 FROM {table}"  # table is one of two literals
        " WHERE id = ANY(%s) AND state = 'completed'", (list(sent),)
    ).fetchall()
    return [(float(started) - sent[int(job_id)]) * 1000 for job_id, started in rows]

def _ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or b == 0:
        return None
    return a / b


def _pct(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    k = max(0, min(len(ordered) - 1, round(q * (len(ordered) - 1))))
    return ordered[k]


@contextlib.contextmanager
def _bound(dsn: str) -> Iterator[Forklift]:
    """The bench app pointed at one scratch database (its pools closed afterwards)."""
    app.use(dsn)
    try:
        yield app
    finally:
        app.close()


def _alternate(rounds: int, plain: Callable[[int], None], mine: Callable[[int], None]) -> tuple[float, float]:
    """Seconds spent in each side, run in alternating rounds so drift in load hits both alike."""
    t_plain = t_mine = 0.0
    for r in range(rounds):
        t0 = time.perf_counter()
        plain(r)
        t1 = time.perf_counter()
        mine(r)
        t_plain += t1 - t0
        t_mine += time.perf_counter() - t1
    return t_plain, t_mine


# -- scenarios ----------------------------------------------------------------------------------
@dataclass
class _Run:
    jobs: int
    seconds: float
    client_cpu: float | None
    db_cpu: float | None

    @property
    def rate(self) -> float:
        return self.jobs / self.seconds if self.seconds > 0 else 0.0


class _Bench:
    def __init__(self, server: _Server, sizes: Sizes) -> None:
        self.server = server
        self.sizes = sizes

    @contextlib.contextmanager
    def database(self, label: str) -> Iterator[tuple[str, psycopg.Connection[Any]]]:
        dsn = self.server.fresh(label)
        conn = _connect(dsn, "monitor")
        try:
            yield dsn, conn
        finally:
            conn.close()
            self.server.drop(dsn)

    # (1), (2), (7): end to end
    def forklift_run(self, workers: int, jobs: int, label: str) -> _Run:
        with self.database(label) as (dsn, conn), _procs("worker_main", dsn, workers) as procs:
            _wait_listening(conn, procs)
            cpu = _BackendCpu(conn, self.server.local)
            cpu.begin()
            client0 = sum(p.cpu() for p in procs)
            _copy_jobs(conn, "forklift.jobs", "bench.noop", 0, jobs)
            last = _max_id(conn, "forklift.jobs")
            _wait("the workers to finish", lambda: _all_done(conn, last), 600.0, procs, 0.1)
            client = sum(p.cpu() for p in procs) - client0
            db = cpu.end()
            done, seconds = _span(conn, "forklift.jobs")
        return _Run(done, seconds, client, db)

    def plain_run(self, jobs: int, label: str) -> _Run:
        with self.database(label) as (dsn, conn):
            _copy_jobs(conn, "plain.jobs", "bench.noop", 0, jobs)
            with _connect(dsn, "plain-loop") as loop:
                cpu = _BackendCpu(conn, self.server.local)
                cpu.begin()
                t0 = time.thread_time()
                while True:
                    ids = [r[0] for r in loop.execute(RAW_CLAIM_SQL).fetchall()]
                    if not ids:
                        break
                    loop.execute(RAW_COMPLETE_SQL, (ids,))
                client = time.thread_time() - t0
                db = cpu.end()
            done, seconds = _span(conn, "plain.jobs")
        return _Run(done, seconds, client, db)

    def e2e(self, keys: set[str]) -> list[Figure]:
        n = self.sizes.e2e_jobs
        plain = self.plain_run(n, "plain")
        one = self.forklift_run(1, n, "w1")
        figures = []
        if "e2e" in keys:
            figures.append(Figure(
                "e2e", "end-to-end no-op, 1 worker", "jobs/s", one.rate, plain.rate,
                "plain loop", ">= 0.50", detail={
                    "jobs": n, "forklift_seconds": one.seconds, "plain_seconds": plain.seconds},
            ))
        if "e2e_2w" in keys:
            two = self.forklift_run(2, n, "w2")
            figures.append(Figure(
                "e2e_2w", "end-to-end no-op, 2 workers", "jobs/s", two.rate, one.rate,
                "1 worker", ">= 1.00", detail={"jobs": n, "seconds": two.seconds},
            ))
        if "db_cpu" in keys:
            def per_job(run: _Run, cpu: float | None) -> float | None:
                return None if cpu is None or not run.jobs else cpu / run.jobs * 1e6

            figures.append(Figure(
                "db_cpu", "PostgreSQL CPU per job", "µs/job",
                per_job(one, one.db_cpu), per_job(plain, plain.db_cpu), "plain loop",
                "reported",
                detail={"note": "client backends of the scenario's database (psutil)"},
            ))
            figures.append(Figure(
                "client_cpu", "worker process CPU per job", "µs/job",
                per_job(one, one.client_cpu), per_job(plain, plain.client_cpu),
                "plain loop", "reported",
            ))
        return figures

    # (3) single enqueue, one transaction each
    def enqueue(self) -> list[Figure]:
        rounds = 4
        per = max(1, self.sizes.enqueue_jobs // rounds)
        plain_sql = "INSERT INTO plain.jobs (kind, args) VALUES (%s, %s)"
        with self.database("enqueue") as (dsn, conn), _bound(dsn):
            for i in range(50):  # warm both paths: pool open, statements prepared
                noop.enqueue({"n": i})
                conn.execute(plain_sql, ("bench.noop", json.dumps({"n": i})))

            def plain(r: int) -> None:
                for i in range(r * per, (r + 1) * per):
                    conn.execute(plain_sql, ("bench.noop", json.dumps({"n": i})))

            def mine(r: int) -> None:
                for i in range(r * per, (r + 1) * per):
                    noop.enqueue({"n": i})

            t_plain, t_fl = _alternate(rounds, plain, mine)
        total = per * rounds
        return [Figure(
            "enqueue", "single enqueue, 1 transaction each", "jobs/s", total / t_fl,
            total / t_plain, "INSERTs", ">= 0.90", detail={"jobs": total},
        )]

    # (4) bulk enqueue
    def bulk(self) -> list[Figure]:
        size, call, batch = self.sizes.bulk_jobs, self.sizes.bulk_call, self.sizes.copy_batch
        calls = max(1, size // call)
        with self.database("bulk") as (dsn, conn), _bound(dsn):
            noop.enqueue_many([{"n": i} for i in range(100)])  # warm

            def items(r: int) -> list[dict[str, int]]:
                return [{"n": r * call + i} for i in range(call)]

            def plain(r: int) -> None:
                rows = items(r)
                for b in range(0, call, batch):
                    with conn.transaction(), conn.cursor().copy(
                        "COPY plain.jobs (kind, args) FROM STDIN"
                    ) as copy:
                        for item in rows[b:b + batch]:
                            copy.write_row(("bench.noop", json.dumps(item)))

            def mine(r: int) -> None:
                noop.enqueue_many(items(r))

            t_plain, t_fl = _alternate(calls, plain, mine)
        total = calls * call
        return [Figure(
            "bulk", f"enqueue_many, {call:,} a call", "jobs/s", total / t_fl,
            total / t_plain, f"COPY {batch:,}s", ">= 0.70",
            detail={"jobs": total},
        )]

    # (5) pickup latency
    def latency(self) -> list[Figure]:
        n, every = self.sizes.latency_jobs, self.sizes.latency_every
        with self.database("latency") as (dsn, conn):
            with _bound(dsn), _procs("worker_main", dsn, 1) as procs, \
                    _connect(dsn, "enqueue") as client:
                _wait_listening(conn, procs)

                def enqueue() -> tuple[int, float]:
                    # The caller's own transaction (enqueue(conn=...)): the clock is read just
                    # before COMMIT, the moment the job becomes visible and its NOTIFY is sent.
                    with client.transaction():
                        job_id = stamp.enqueue({"n": 0}, conn=client).id
                        before_commit = time.time()
                    return job_id, before_commit

                warm = enqueue()[0]  # not counted: connection and statement caches
                _wait("the warm-up job", lambda: _all_done(conn, warm), 60.0, procs)
                sent = self._pace(n, every, enqueue)
                _wait("the paced jobs", lambda: _all_done(conn, max(sent)), 60.0, procs)
            fl = _pickups(conn, "forklift.jobs", sent)
            raw = self._raw_latency(dsn, conn, n, every)
        figures = []
        for key, q, target, limit in (("latency_p50", 0.5, "<= 2.5 ms", 2.5),
                                      ("latency_p99", 0.99, "<= 10 ms", 10.0)):
            mine, theirs = _pct(fl, q), _pct(raw, q)
            figures.append(Figure(
                key, f"pickup latency p{round(q * 100)}, 1 job/{every * 1000:.0f} ms",
                "ms", mine, theirs, "raw loop", target, ratio=_ratio(mine, theirs),
                ok=mine <= limit, detail={"samples": len(fl), "raw_samples": len(raw),
                                          "from": "client clock before COMMIT",
                                          "to": "handler start (forklift) / claim returned (raw)"},
            ))
        return figures

    @staticmethod
    def _pace(n: int, every: float, fn: Callable[[], tuple[int, float]]) -> dict[int, float]:
        """Call ``fn`` every ``every`` seconds; job id -> the client's clock before its commit."""
        sent: dict[int, float] = {}
        start = time.monotonic()
        for i in range(n):
            delay = start + i * every - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            job_id, at = fn()
            sent[job_id] = at
        return sent

    def _raw_latency(self, dsn: str, conn: psycopg.Connection[Any], n: int, every: float) -> list[float]:
        proc = _Proc("raw_listener_main", dsn, stdout=subprocess.PIPE)
        try:
            assert proc.popen.stdout is not None
            line = proc.popen.stdout.readline()
            if not line.startswith(b"ready"):
                proc.check()
                raise RuntimeError("the raw listener did not start")
            with _connect(dsn, "raw-enqueue") as client:

                def enqueue() -> tuple[int, float]:
                    with client.transaction():
                        row = client.execute(
                            "INSERT INTO plain.jobs (kind, args) VALUES ('bench.stamp', '{}')"
                            " RETURNING id"
                        ).fetchone()
                        client.execute("SELECT pg_notify(%s, 'default')", (PLAIN_CHANNEL,))
                        before_commit = time.time()
                    assert row is not None
                    return int(row[0]), before_commit

                sent = self._pace(n, every, enqueue)

            def finished() -> bool:
                row = conn.execute(
                    "SELECT NOT EXISTS (SELECT 1 FROM plain.jobs WHERE state <> 'completed')"
                ).fetchone()
                return bool(row and row[0])

            _wait("the raw loop", finished, 60.0, [proc])
        finally:
            proc.stop()
        return _pickups(conn, "plain.jobs", sent)

    # (6) worker memory over a long run
    def memory(self) -> list[Figure]:
        n = self.sizes.memory_jobs
        with self.database("memory") as (dsn, conn):
            _copy_jobs(conn, "forklift.jobs", "bench.noop", 0, n, batch=100_000)
            row = conn.execute(
                "SELECT min(id) + %s, max(id) FROM forklift.jobs", (n // 10,)
            ).fetchone()
            assert row is not None
            mark, last = int(row[0]), int(row[1])
            rss_mark: int | None = None
            peak = 0
            with _procs("worker_main", dsn, 1) as procs:
                proc = procs[0]
                deadline = time.monotonic() + 900
                while True:
                    proc.check()
                    rss = proc.rss()
                    peak = max(peak, rss)
                    if rss_mark is None:
                        got = conn.execute(
                            "SELECT state FROM forklift.jobs WHERE id = %s", (mark,)
                        ).fetchone()
                        if got and got[0] == "completed":
                            rss_mark = proc.rss()
                    elif _all_done(conn, last):
                        final = proc.rss()
                        break
                    if time.monotonic() > deadline:
                        raise TimeoutError("the memory run did not finish in 15 minutes")
                    time.sleep(0.1)
            done, seconds = _span(conn, "forklift.jobs")
        mib = 1024 * 1024
        assert rss_mark is not None
        ratio = final / rss_mark
        return [Figure(
            "memory", f"worker RSS after {n:,} jobs", "MiB", final / mib,
            rss_mark / mib, "after 10%", "<= 1.10", ratio=ratio, ok=ratio <= 1.10,
            detail={"jobs": done, "seconds": seconds, "rate": done / seconds if seconds else None,
                    "peak_mib": peak / mib},
        )]


_TARGETS: dict[str, float] = {"e2e": 0.5, "e2e_2w": 1.0, "enqueue": 0.9, "bulk": 0.7}


def _judge(f: Figure) -> Figure:
    if f.key in _TARGETS:
        f.ratio = _ratio(f.forklift, f.reference)
        f.ok = f.ratio is not None and f.ratio >= _TARGETS[f.key]
    elif f.key == "db_cpu" or f.key == "client_cpu":
        f.ratio = _ratio(f.forklift, f.reference)
    return f


def machine() -> dict[str, Any]:
    model = platform.processor() or ""
    with contextlib.suppress(OSError), open("/proc/cpuinfo", encoding="utf-8") as fh:
        for line in fh:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return {
        "cpus": os.cpu_count(),
        "cpu_model": model,
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "python": platform.python_version(),
        "platform": platform.platform(terse=True),
        "psycopg": psycopg.__version__,
    }


def run_bench(
    dsn: str | None,
    *,
    scenarios: Iterable[str] = SCENARIOS,
    quick: bool = False,
    sizes: Sizes | None = None,
    progress: Callable[[str], None] | None = None,
) -> BenchReport:
    """Run the chosen scenarios against ``dsn`` (or the configured / embedded server).

    Needs the right to create databases on that server: each scenario runs in a fresh one,
    dropped afterwards. Figures are measured, never asserted.
    """
    from forklift.ops import connect as config

    chosen = [s for s in SCENARIOS if s in set(scenarios)]
    unknown = set(scenarios) - set(SCENARIOS)
    if unknown:
        raise ValueError(f"unknown scenario(s): {', '.join(sorted(unknown))}; known: {', '.join(SCENARIOS)}")
    sz = sizes or (QUICK if quick else FULL)
    source = config.resolve(dsn, schema=SCHEMA)
    started = time.time()
    t0 = time.perf_counter()
    note = progress or (lambda _m: None)
    server = _Server(source.dsn, source.origin)
    figures: list[Figure] = []
    errors: dict[str, str] = {}
    info = server.info()
    try:
        bench = _Bench(server, sz)
        steps: list[tuple[str, Callable[[], list[Figure]]]] = []
        e2e_keys = {k for k in chosen if k in ("e2e", "e2e_2w", "db_cpu")}
        if e2e_keys:
            steps.append(("e2e", lambda: bench.e2e(e2e_keys | {"client_cpu"} if "db_cpu" in e2e_keys else e2e_keys)))
        for name, fn in (("enqueue", bench.enqueue), ("bulk", bench.bulk),
                         ("latency", bench.latency), ("memory", bench.memory)):
            if name in chosen:
                steps.append((name, fn))
        from forklift_console import bench_flow

        for name, run in bench_flow.RUNS.items():
            if name in chosen:
                steps.append((name, lambda run=run: run(bench)))  # type: ignore[misc]
        for name, fn in steps:
            note(f"running {name}")
            try:
                figures.extend(_judge(f) for f in fn())
            except Exception as exc:  # one scenario failing still reports the others
                log.exception("scenario %s failed", name)
                errors[name] = f"{type(exc).__name__}: {exc}"
    finally:
        server.close()
    return BenchReport(
        started_at=started,
        seconds=time.perf_counter() - t0,
        quick=quick,
        sizes=sz,
        machine=machine(),
        server=info,
        figures=figures,
        errors=errors,
    )


def tiny_sizes() -> Sizes:
    """Sizes small enough for a smoke test: the shape of the report, not its figures."""
    return replace(QUICK, e2e_jobs=300, enqueue_jobs=40, bulk_jobs=400, bulk_call=200,
                   copy_batch=100, latency_jobs=5, memory_jobs=1_000)
