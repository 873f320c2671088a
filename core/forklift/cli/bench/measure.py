"""Measuring helpers the scenarios share: loading jobs, reading spans and CPU, the context."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import psutil
import psycopg

from forklift import Forklift
from forklift.cli.bench.procs import app
from forklift.cli.bench.report import Sizes
from forklift.cli.bench.server import Server, connect

T = TypeVar("T")


class BackendCpu:
    """CPU seconds of the client backends of one database, except the bench's own sessions."""

    def __init__(self, conn: psycopg.Connection[Any], local: bool, exclude: Iterable[int] = ()) -> None:
        self.conn = conn
        self.local = local
        self.exclude = {conn.info.backend_pid, *exclude}
        self.start: dict[int, float] = {}

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


def copy_jobs(conn: psycopg.Connection[Any], table: str, kind: str, start: int, count: int,
              batch: int = 50_000) -> None:
    """Preload jobs with COPY (each batch one transaction; forklift's trigger wakes workers)."""
    copy_lines(conn, f"{table} (kind, args)", lambda i: f'{kind}\t{{"n": {i}}}\n', start,
               count, batch)


def copy_lines(conn: psycopg.Connection[Any], target: str, line: Callable[[int], str],
               start: int, count: int, batch: int = 50_000) -> None:
    """COPY ``line(i)`` for ``i`` from ``start``, ``count`` of them, into ``target`` (a table and
    its columns, literals of the scenarios): the text built in one string per ``batch``, each
    batch one transaction (the cheapest load a client can make, so it takes the least of the
    cores the measured worker shares)."""
    done = 0
    while done < count:
        n = min(batch, count - done)
        data = "".join(line(start + done + i) for i in range(n)).encode()
        with conn.transaction(), conn.cursor().copy(f"COPY {target} FROM STDIN") as copy:
            copy.write(data)
        done += n


def span(conn: psycopg.Connection[Any], table: str) -> tuple[int, float]:
    """(jobs completed, seconds from the first claim to the last completion)."""
    row = conn.execute(
        f"SELECT count(*), extract(epoch FROM max(finished_at) - min(attempted_at))::float8"
        f" FROM {table} WHERE state = 'completed'"
    ).fetchone()
    assert row is not None
    return int(row[0]), float(row[1] or 0.0)


def all_done(conn: psycopg.Connection[Any], last_id: int) -> bool:
    # The last job (claim order is id order here) first: one index probe; then the live states.
    row = conn.execute("SELECT state FROM forklift.jobs WHERE id = %s", (last_id,)).fetchone()
    if row is None or row[0] not in ("completed", "dead", "cancelled"):
        return False
    row = conn.execute(
        "SELECT NOT EXISTS (SELECT 1 FROM forklift.jobs WHERE state = 'available')"
        " AND NOT EXISTS (SELECT 1 FROM forklift.jobs WHERE state = 'running')"
    ).fetchone()
    return bool(row and row[0])


def max_id(conn: psycopg.Connection[Any], table: str) -> int:
    row = conn.execute(f"SELECT max(id) FROM {table}").fetchone()
    return int(row[0]) if row and row[0] is not None else 0


def pickups(conn: psycopg.Connection[Any], table: str, sent: dict[int, float]) -> list[float]:
    """Milliseconds from each job's commit (client clock) to the start recorded in its result."""
    rows = conn.execute(
        f"SELECT id, (result::text)::float8 FROM {table}"  # table is one of two literals
        " WHERE id = ANY(%s) AND state = 'completed'", (list(sent),)
    ).fetchall()
    return [(float(started) - sent[int(job_id)]) * 1000 for job_id, started in rows]


def pct(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    k = max(0, min(len(ordered) - 1, round(q * (len(ordered) - 1))))
    return ordered[k]


@contextlib.contextmanager
def bound(dsn: str) -> Iterator[Forklift]:
    """The bench app pointed at one scratch database (its pools closed afterwards)."""
    app.use(dsn)
    try:
        yield app
    finally:
        app.close()


def alternate(rounds: int, plain: Callable[[int], None], mine: Callable[[int], None]) -> tuple[float, float]:
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


@dataclass
class Run:
    """One throughput run: jobs done, seconds (first claim to last completion), CPU seconds."""

    jobs: int
    seconds: float
    client_cpu: float | None
    db_cpu: float | None

    @property
    def rate(self) -> float:
        return self.jobs / self.seconds if self.seconds > 0 else 0.0

    def per_job(self, cpu: float | None) -> float | None:
        """Microseconds of ``cpu`` per job."""
        return None if cpu is None or not self.jobs else cpu / self.jobs * 1e6


@dataclass
class Bench:
    """What a scenario gets: the server, the sizes, and runs shared between scenarios."""

    server: Server
    sizes: Sizes
    _memo: dict[str, Any] = field(default_factory=dict)

    @contextlib.contextmanager
    def database(self, label: str) -> Iterator[tuple[str, psycopg.Connection[Any]]]:
        """A fresh scratch database and a monitoring connection to it; dropped afterwards."""
        dsn = self.server.fresh(label)
        conn = connect(dsn, "monitor")
        try:
            yield dsn, conn
        finally:
            conn.close()
            self.server.drop(dsn)

    def shared(self, key: str, run: Callable[[], T]) -> T:
        """``run()`` once per bench run: a reference several scenarios compare against."""
        if key not in self._memo:
            self._memo[key] = run()
        return self._memo[key]  # type: ignore[no-any-return]
