"""The worker's probes, over real HTTP from a real worker subprocess: ``/healthz`` and
``/readyz`` answer 200 on a healthy worker, readiness drops during a drain, and both answer
within a deadline while a handler blocks the event loop or the database stops answering."""

from __future__ import annotations

import json
import os
import signal
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from apps import faults
from apps import probes as probe_app
from apps.faults import Procs, WorkerProc, registered
from helpers import wait_until

from forklift import embedded
from forklift._db.migrate import migrate

procs = faults.procs  # a fixture

#: Most seconds a probe may take to answer, whatever the worker is doing.
ANSWER_WITHIN = 1.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def get(port: int, path: str) -> tuple[int, dict[str, Any] | str, float]:
    """(status, body, seconds it took); status 0 when nothing answered."""
    began = time.monotonic()
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
            status, raw = int(r.status), r.read()
            kind = r.headers.get("Content-Type", "")
    except urllib.error.HTTPError as exc:
        status, raw, kind = exc.code, exc.read(), exc.headers.get("Content-Type", "")
    except OSError:
        return 0, "", time.monotonic() - began
    took = time.monotonic() - began
    body: dict[str, Any] | str = json.loads(raw) if "json" in kind else raw.decode()
    return status, body, took


def answered(port: int, path: str, status: int) -> dict[str, Any] | None:
    """The body when ``path`` answers ``status`` (and answered in time), else None."""
    got, body, took = get(port, path)
    assert took < ANSWER_WITHIN, f"{path} took {took:.2f}s"
    return body if got == status and isinstance(body, dict) else None


def start(procs: Procs, *flags: str, **options: Any) -> WorkerProc:
    options.setdefault("lease", 3.0)
    return procs.start(app="apps.probes:app", queues="probes", extra=list(flags), **options)


def enqueue(conn: psycopg.Connection[Any], kind: str, args: dict[str, Any]) -> int:
    return probe_app.app.kind(kind).enqueue(args, conn=conn).id


def test_both_answer_200_on_a_healthy_worker_beside_metrics(
    conn: psycopg.Connection[Any], procs: Procs
) -> None:
    port = free_port()
    w = start(procs, "--metrics-port", str(port))
    registered(conn, w)
    health = wait_until(lambda: answered(port, "/healthz", 200), timeout=20,
                        message=lambda: f"healthz: {get(port, '/healthz')}")
    assert health == {"status": "ok", "reasons": []}
    ready = wait_until(lambda: answered(port, "/readyz", 200), timeout=20,
                       message=lambda: f"readyz: {get(port, '/readyz')}")
    assert ready == {"status": "ok", "reasons": []}
    status, page, _ = get(port, "/metrics")  # one server, three paths
    assert status == 200 and isinstance(page, str) and "forklift_jobs_settled" in page
    assert get(port, "/nothing")[0] == 404


def test_with_both_ports_the_probes_go_to_the_health_port(
    conn: psycopg.Connection[Any], procs: Procs
) -> None:
    health, metrics = free_port(), free_port()
    w = start(procs, "--metrics-port", str(metrics), "--health-port", str(health))
    registered(conn, w)
    wait_until(lambda: answered(health, "/readyz", 200), timeout=20,
               message=lambda: f"readyz: {get(health, '/readyz')}")
    assert answered(health, "/healthz", 200) is not None
    assert get(health, "/metrics")[0] == 404
    status, page, _ = get(metrics, "/metrics")
    assert status == 200 and isinstance(page, str) and "forklift_jobs_settled" in page


def test_readyz_drops_during_a_drain_while_healthz_stays_up(
    conn: psycopg.Connection[Any], procs: Procs, tmp_path: Path
) -> None:
    port = free_port()
    w = start(procs, "--health-port", str(port))
    registered(conn, w)
    wait_until(lambda: answered(port, "/readyz", 200), timeout=20,
               message=lambda: f"readyz: {get(port, '/readyz')}")
    gate = tmp_path / "hold"
    gate.touch()
    job = enqueue(conn, "probes.hold", {"while": str(gate)})
    wait_until(lambda: conn.execute("SELECT state FROM forklift.jobs WHERE id = %s",
                                    (job,)).fetchone() == ("running",), timeout=20)
    w.signal(signal.SIGTERM)
    body = wait_until(lambda: answered(port, "/readyz", 503), timeout=10,
                      message=lambda: f"readyz: {get(port, '/readyz')}")
    assert any("draining" in r for r in body["reasons"]), body
    assert answered(port, "/healthz", 200) is not None  # alive: a drain is no reason to kill it
    assert w.alive()
    gate.unlink()
    assert w.popen.wait(30) == 0


def test_both_answer_in_time_while_a_handler_hogs_the_loop(
    conn: psycopg.Connection[Any], procs: Procs
) -> None:
    port = free_port()
    w = start(procs, "--health-port", str(port))
    registered(conn, w)
    wait_until(lambda: answered(port, "/readyz", 200), timeout=20)
    enqueue(conn, "probes.block", {"seconds": 12})
    body = wait_until(lambda: answered(port, "/healthz", 503), timeout=15, interval=0.2,
                      message=lambda: f"healthz: {get(port, '/healthz')}")
    assert any("event loop blocked" in r for r in body["reasons"]), body
    ready = answered(port, "/readyz", 503)
    assert ready is not None and any("event loop blocked" in r for r in ready["reasons"]), ready
    # The loop comes back when the handler returns, and with it the probes.
    wait_until(lambda: answered(port, "/healthz", 200), timeout=20, interval=0.2)
    assert w.alive()


# -- a server of our own, to freeze --------------------------------------------------------------
@pytest.fixture(scope="module")
def own_server(scratch_home: Path) -> str:
    if os.environ.get("FORKLIFT_TEST_DSN"):
        pytest.skip("FORKLIFT_TEST_DSN points at an external server; freezing the server needs"
                    " a private embedded one")
    conninfo = embedded.ensure_server(scratch_home)
    migrate(conninfo, "forklift")
    return conninfo


@pytest.fixture
def own(own_server: str, tmp_path: Path) -> Iterator[Procs]:
    with psycopg.connect(own_server, autocommit=True) as conn:
        conn.execute("TRUNCATE forklift.jobs, forklift.workers, forklift.leader")
    p = Procs(own_server, tmp_path)
    try:
        yield p
    finally:
        p.close()
        print(p.logs())


def test_both_answer_in_time_while_the_database_does_not(
    scratch_home: Path, own: Procs
) -> None:
    import psutil

    port = free_port()
    w = start(own, "--health-port", str(port))
    with psycopg.connect(own.dsn, autocommit=True) as conn:
        registered(conn, w)
    wait_until(lambda: answered(port, "/readyz", 200), timeout=20)
    # Everything stops answering: the postmaster (no new connections) and every backend.
    postmaster = int(embedded.server_status(scratch_home)["pid"])
    own.freeze(postmaster)
    for child in psutil.Process(postmaster).children():
        own.freeze(child.pid, gone_ok=True)
    body = wait_until(lambda: answered(port, "/readyz", 503), timeout=20, interval=0.2,
                      message=lambda: f"readyz: {get(port, '/readyz')}")
    assert any("database" in r for r in body["reasons"]), body
    assert answered(port, "/healthz", 200) is not None  # the process is fine: do not kill it
    own.thaw()
    wait_until(lambda: answered(port, "/readyz", 200), timeout=30, interval=0.2,
               message=lambda: f"readyz after thaw: {get(port, '/readyz')}")
    assert w.alive()


def test_a_health_port_that_cannot_be_had_fails_at_start(
    conn: psycopg.Connection[Any], procs: Procs
) -> None:
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = int(taken.getsockname()[1])
        w = start(procs, "--health-port", str(port))
        assert w.popen.wait(30) != 0
    assert f"--health-port {port}" in w.log()


def test_a_service_stuck_restarting_fails_liveness_until_it_settles() -> None:
    """In process: the supervisor's restart counts, as the probes' loop reads them."""
    from forklift._worker.config import WorkerConfig
    from forklift._worker.probe_server import ProbeServer
    from forklift._worker.probes import RESTART_WINDOW, RESTARTS_STUCK, Probes
    from forklift._worker.state import WorkerState

    state = WorkerState(kinds=[], concurrency=1)
    server = ProbeServer(0, "127.0.0.1")
    restarts: dict[str, int] = {"listener": 1}
    probes = Probes(WorkerConfig(schema="forklift", queues=("q",), lease=3.0), state,
                    server=server, restarts=restarts)
    try:
        now = time.monotonic()
        state.loop_seen = now
        probes._watch_restarts(now)
        assert probes.health().ok  # one restart is a hiccup
        restarts["listener"] = RESTARTS_STUCK
        probes._watch_restarts(now + 1)
        verdict = probes.health()
        assert not verdict.ok and "listener" in verdict.reasons[0]
        status, _, body = verdict.answer()
        assert status == 503 and json.loads(body)["status"] == "failing"
        state.loop_seen = now + RESTART_WINDOW + 2
        probes._watch_restarts(now + RESTART_WINDOW + 2)  # no restart since: settled
        assert probes.stuck == ()
        # Readiness names each reason: not checked, not started, no round trip, a failed one.
        reasons = probes.readiness().reasons
        assert reasons[:3] == ["schema not checked yet", "starting",
                               "database: no round trip yet"]
        state.schema_current, state.db_error = True, "TimeoutError: heartbeat did not answer"
        assert any("heartbeat did not answer" in r for r in probes.readiness().reasons)
    finally:
        server.stop()
