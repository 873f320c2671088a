"""examples/fastapi_app.py, run for real: uvicorn on 127.0.0.1, a forklift worker beside it."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from eco_procs import Procs, procs
from helpers import wait_until
from prometheus_client.parser import text_string_to_metric_families

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
__all__ = ["procs"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def server(dsn: str, tmp_path: Path) -> Iterator[str]:
    port = _free_port()
    log = tmp_path / "uvicorn.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "--app-dir", str(EXAMPLES), "fastapi_app:api",
             "--host", "127.0.0.1", "--port", str(port)],
            env=dict(os.environ, FORKLIFT_DSN=dsn), stdout=out, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True,
        )
    base = f"http://127.0.0.1:{port}"

    def up() -> bool:
        assert proc.poll() is None, log.read_text()
        with contextlib.suppress(httpx.HTTPError):
            return httpx.get(base + "/metrics/", timeout=2).status_code == 200
        return False

    try:
        wait_until(up, timeout=60, interval=0.1, message=lambda: log.read_text())
        yield base
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
        print(log.read_text()[-4000:])


def _count(conn: psycopg.Connection[Any], sql: str) -> int:
    row = conn.execute(sql).fetchone()
    return int(row[0]) if row else 0


def test_an_order_and_its_receipt_job_commit_together_and_a_worker_runs_it(
    server: str, dsn: str, conn: psycopg.Connection[Any], procs: Procs
) -> None:
    made = httpx.post(server + "/orders", json={"item": "tea", "quantity": 2}, timeout=10)
    assert made.status_code == 200, made.text
    order, job = made.json()["order"], made.json()["job"]
    row = conn.execute("SELECT kind, queue, args FROM forklift.jobs WHERE id = %s",
                       (job,)).fetchone()
    assert row == ("shop.send_receipt", "mail", {"order_id": order})

    refused = httpx.post(server + "/orders", json={"item": "tea", "quantity": 500}, timeout=10)
    assert refused.status_code == 422
    # The refusal came after the enqueue, inside the request's transaction: neither was kept.
    assert _count(conn, "SELECT count(*) FROM orders") == 1
    assert _count(conn, "SELECT count(*) FROM forklift.jobs") == 1

    procs.start("--app", "fastapi_app:app", env={"FORKLIFT_DSN": dsn}, cwd=EXAMPLES)
    wait_until(lambda: conn.execute("SELECT state, result FROM forklift.jobs WHERE id = %s",
                                    (job,)).fetchone() == ("completed",
                                                           f"receipt for order {order} sent"),
               timeout=60, message="the receipt job did not complete")

    scraped = httpx.get(server + "/metrics/", timeout=10)
    names = {f.name for f in text_string_to_metric_families(scraped.text)}
    assert {"forklift_jobs_settled", "forklift_queue_depth"} <= names
