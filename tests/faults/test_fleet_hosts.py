"""A fleet across hosts: workers on separate network namespaces, each joined to the database
over its own virtual link, and one host cut off mid-run.

What must hold: the cut host's leases expire and its jobs are rescued and finished on the
others; its own handlers are stopped by the lease watchdog before anyone else starts those jobs
(nothing runs twice at once); and when the link comes back the host takes work again, as the
same process, without a restart.

Each host is a network namespace with a veth pair to this one; the database is reached through
a TCP relay in this process (the test server listens on a Unix socket only, which a namespace
does not isolate). Cutting a host takes its link down: its packets are dropped, its
connections hang, as on a real partition. Needs root and ``ip netns``; skipped otherwise.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pytest
from helpers import wait_until
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from relay import Relay

pytestmark = pytest.mark.slow

TESTS = Path(__file__).resolve().parents[1]
LEASE = 3.0


def _can_make_namespaces() -> str | None:
    if os.geteuid() != 0:
        return "needs root to make network namespaces"
    name = f"flprobe{os.getpid()}"
    done = subprocess.run(["ip", "netns", "add", name], capture_output=True, check=False)
    if done.returncode != 0:
        return f"ip netns add failed: {done.stderr.decode(errors='replace').strip()}"
    subprocess.run(["ip", "netns", "del", name], check=False)
    return None


@dataclass
class Host:
    """A network namespace with a link to this one, and the worker it runs."""

    name: str
    index: int
    dsn: str
    log: Path
    popen: subprocess.Popen[bytes] | None = None
    out: Path = field(init=False)

    def __post_init__(self) -> None:
        self.out = self.log.with_suffix(".out")

    @property
    def outside(self) -> str:  # the link's end in this namespace
        return f"fl{self.index}o{os.getpid() % 10000}"

    @property
    def gateway(self) -> str:
        return f"10.231.{self.index}.1"

    def make(self) -> None:
        inside = f"fl{self.index}i{os.getpid() % 10000}"
        for cmd in (
            ["ip", "netns", "add", self.name],
            ["ip", "link", "add", self.outside, "type", "veth", "peer", "name", inside],
            ["ip", "link", "set", inside, "netns", self.name],
            ["ip", "addr", "add", f"{self.gateway}/30", "dev", self.outside],
            ["ip", "link", "set", self.outside, "up"],
            ["ip", "netns", "exec", self.name, "ip", "addr", "add",
             f"10.231.{self.index}.2/30", "dev", inside],
            ["ip", "netns", "exec", self.name, "ip", "link", "set", inside, "up"],
            ["ip", "netns", "exec", self.name, "ip", "link", "set", "lo", "up"],
        ):
            subprocess.run(cmd, check=True, capture_output=True)

    def start(self) -> None:
        env = dict(os.environ, FORKLIFT_DSN=self.dsn, FLEET_LOG=str(self.log),
                   PYTHONUNBUFFERED="1")
        env.pop("FORKLIFT_APP", None)
        cmd = ["ip", "netns", "exec", self.name, sys.executable, "-m", "forklift.cli.main",
               "worker", "--app", "apps.fleet:app", "--queues", "fleet", "--concurrency", "4",
               "--lease", str(LEASE), "--poll-interval", "0.2", "--drain-timeout", "2"]
        with open(self.out, "ab") as out:
            self.popen = subprocess.Popen(cmd, cwd=TESTS, env=env, stdout=out,
                                          stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                          start_new_session=True)

    def cut(self) -> None:
        subprocess.run(["ip", "link", "set", self.outside, "down"], check=True)

    def mend(self) -> None:
        subprocess.run(["ip", "link", "set", self.outside, "up"], check=True)

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def stop(self) -> None:
        if self.popen is None:
            return
        if self.alive():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, signal.SIGKILL)
        self.popen.wait(10)

    def remove(self) -> None:
        subprocess.run(["ip", "netns", "del", self.name], check=False, capture_output=True)

    def attempts(self) -> list[tuple[str, int, int, str, float]]:
        if not self.log.exists():
            return []
        rows = []
        for line in self.log.read_text().splitlines():
            what, job, attempt, worker, at = line.split()
            rows.append((what, int(job), int(attempt), worker, float(at)))
        return rows


@pytest.fixture
def hosts(dsn: str, tmp_path: Path) -> Iterator[list[Host]]:
    why = _can_make_namespaces()
    if why:
        pytest.skip(why)
    params = conninfo_to_dict(dsn)
    unix = os.path.join(str(params.get("host") or "/tmp"), f".s.PGSQL.{params.get('port') or 5432}")
    if not os.path.exists(unix):
        pytest.skip("the test server is not on a local Unix socket: nothing to relay")
    relay = Relay(unix)
    made: list[Host] = []
    tag = secrets.token_hex(2)
    try:
        for i in range(3):
            h = Host(name=f"fl{tag}{i}", index=200 + i, log=tmp_path / f"host{i}.log",
                     dsn=make_conninfo(dsn, host=f"10.231.{200 + i}.1", port=relay.port,
                                       connect_timeout=3))
            h.make()
            made.append(h)
        yield made
    finally:
        for h in made:
            h.stop()
            print(f"--- {h.name} ---\n{h.out.read_text(errors='replace')[-4000:] if h.out.exists() else ''}")
            h.remove()
        relay.close()


def _worker_of(conn: psycopg.Connection[Any], host: Host) -> str | None:
    assert host.popen is not None
    row = conn.execute("SELECT id FROM forklift.workers WHERE pid = %s AND state = 'running'",
                       (host.popen.pid,)).fetchone()
    # `ip netns exec` execs the worker, so the pid is the worker's own.
    return str(row[0]) if row else None


def _enqueue(conn: psycopg.Connection[Any], n: int, hold_attempts: int) -> list[int]:
    rows = conn.execute(
        "INSERT INTO forklift.jobs (queue, kind, args, max_attempts)"
        " SELECT 'fleet', 'fleet.work', jsonb_build_object('hold_attempts', %s::int), 5"
        " FROM generate_series(1, %s) RETURNING id", (hold_attempts, n)).fetchall()
    return [int(r[0]) for r in rows]


def _states(conn: psycopg.Connection[Any], ids: list[int]) -> dict[int, tuple[str, str | None]]:
    rows = conn.execute("SELECT id, state, worker_id FROM forklift.jobs WHERE id = ANY(%s)",
                        (ids,)).fetchall()
    return {int(r[0]): (str(r[1]), r[2]) for r in rows}


def _all_completed(conn: psycopg.Connection[Any], ids: list[int]) -> None:
    wait_until(lambda: all(s[0] == "completed" for s in _states(conn, ids).values()),
               timeout=60, message=lambda: f"not finished: {_states(conn, ids)}")


def test_a_host_cut_off_loses_its_jobs_to_the_others_and_rejoins_without_a_restart(
    conn: psycopg.Connection[Any], hosts: list[Host]
) -> None:
    a, b, c = hosts
    a.start()
    a_id = wait_until(lambda: _worker_of(conn, a), timeout=60, message="host a never registered")
    held = _enqueue(conn, 4, hold_attempts=1)  # first attempts hold until stopped
    wait_until(lambda: all(s == ("running", a_id) for s in _states(conn, held).values()),
               timeout=60, message=lambda: f"a did not take all four: {_states(conn, held)}")
    b.start()
    c.start()
    others = {wait_until(lambda: _worker_of(conn, b), timeout=60, message="b never registered"),
              wait_until(lambda: _worker_of(conn, c), timeout=60, message="c never registered")}

    a.cut()
    try:
        wait_until(lambda: all(s[0] == "completed" for s in _states(conn, held).values()),
                   timeout=90, message=lambda: f"not rescued: {_states(conn, held)}")
        finished = conn.execute(
            "SELECT id, attempt, result #>> '{}', errors FROM forklift.jobs WHERE id = ANY(%s)",
            (held,)).fetchall()
        for job_id, attempt, by, errors in finished:
            assert attempt == 2 and by in others, (job_id, attempt, by)
            assert [e["code"] for e in errors] == ["lease_expired"], errors
            assert errors[0]["worker"] == a_id
        # a's handlers were stopped by its own watchdog while it was cut off, before the jobs
        # started anywhere else: every attempt of a ended, and ended before attempt 2 began.
        wait_until(lambda: len([r for r in a.attempts() if r[0] == "end"]) == 4, timeout=30,
                   message=lambda: f"a's handlers were not all stopped: {a.attempts()}")
        ends = {r[1]: r[4] for r in a.attempts() if r[0] == "end"}
        seconds = {r[1]: r[4] for h in (b, c) for r in h.attempts()
                   if r[0] == "start" and r[2] == 2}
        assert set(ends) == set(held) == set(seconds)
        for job_id in held:
            assert ends[job_id] <= seconds[job_id], (
                f"job {job_id}: a still ran it at {ends[job_id]}, after it started elsewhere at"
                f" {seconds[job_id]}")
        assert a.alive(), "the cut-off worker exited"
    finally:
        a.mend()

    # Back on the network: the same process takes work again.
    pid = a.popen.pid if a.popen else None
    wait_until(lambda: _worker_of(conn, a) is not None and conn.execute(
        "SELECT heartbeat_at > now() - interval '5 seconds' FROM forklift.workers WHERE id = %s",
        (a_id,)).fetchone() == (True,), timeout=60,
        message="a's heartbeat did not come back")
    for _ in range(20):
        more = _enqueue(conn, 12, hold_attempts=0)
        _all_completed(conn, more)
        ran_on_a = conn.execute(
            "SELECT count(*) FROM forklift.jobs WHERE id = ANY(%s) AND result #>> '{}' = %s",
            (more, a_id)).fetchone()
        if ran_on_a and ran_on_a[0]:
            break
    else:
        pytest.fail("host a never took a job after its link came back")
    assert a.alive() and a.popen is not None and a.popen.pid == pid
