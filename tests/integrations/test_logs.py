"""Structured logs: --log-format json on a real worker, and forklift.logs.configure."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from apps import eco
from eco_procs import Procs, procs
from helpers import wait_until

from forklift import ConfigError, logs

__all__ = ["procs"]


@pytest.fixture
def captured() -> Iterator[io.StringIO]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    out = io.StringIO()
    logs.configure(format="json", level="DEBUG", stream=out)
    try:
        yield out
    finally:
        for h in list(root.handlers):
            root.removeHandler(h)
        for h in handlers:
            root.addHandler(h)
        root.setLevel(level)


def _lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def test_configure_writes_one_json_object_a_line_with_the_job_fields(
    captured: io.StringIO,
) -> None:
    log = logging.getLogger("forklift.worker")
    log.warning("job %s: lease lost", 7,
                extra={"job_id": 7, "kind": "k", "queue": "q", "attempt": 2, "fence": 99})
    try:
        raise RuntimeError("cannot reach postgres://app:s3cret@db/x with password=hunter2")
    except RuntimeError:
        log.exception("it broke")
    first, second = _lines(captured.getvalue())
    assert first["message"] == "job 7: lease lost" and first["level"] == "WARNING"
    assert {k: first[k] for k in ("job_id", "kind", "queue", "attempt", "fence")} == {
        "job_id": 7, "kind": "k", "queue": "q", "attempt": 2, "fence": 99}
    assert first["logger"] == "forklift.worker" and first["ts"].endswith("+00:00")
    error = second["error"]
    assert error["type"] == "RuntimeError"
    assert "s3cret" not in json.dumps(second) and "hunter2" not in json.dumps(second)
    assert all(set(frame) == {"file", "line", "func"} for frame in error["traceback"])


def test_an_unknown_format_is_refused() -> None:
    with pytest.raises(ConfigError, match="'xml'"):
        logs.configure(format="xml")  # type: ignore[arg-type]


def test_a_worker_logs_json_lines_with_job_and_worker_fields_and_never_payloads(
    dsn: str, conn: psycopg.Connection[Any], procs: Procs
) -> None:
    eco.app.use(dsn)
    ids = {
        "ok": eco.ok.enqueue({"secret": eco.SECRET}).id,
        "sync_ok": eco.sync_ok.enqueue({"secret": eco.SECRET}).id,
        "boom": eco.boom.enqueue({"secret": eco.SECRET}).id,
    }
    eco.app.close()
    w = procs.start("--app", "apps.eco:app", "--log-format", "json", "--log-level", "DEBUG",
                    "--concurrency", "2", env={"FORKLIFT_DSN": dsn})

    def finished() -> bool:
        got = conn.execute("SELECT count(*) FROM forklift.jobs WHERE state IN"
                           " ('completed', 'dead')").fetchone()
        return got == (3,)

    wait_until(finished, timeout=60, message=lambda: w.log()[-3000:])
    assert w.stop() == 0
    text = w.log()
    lines = _lines(text)  # every line is one JSON object
    assert eco.SECRET not in text and eco.RESULT not in text and "hunter2" not in text
    [started] = [x for x in lines if x["message"].endswith("started: queues=['eco']"
                                                             " concurrency=2 lease=30.0s")]
    worker_id = started["worker_id"]
    settled = [x for x in lines if x["logger"] == "forklift.job" and "settled" in x["message"]]
    by_job = {(x["job_id"], x["attempt"]): x for x in settled}
    assert by_job[(ids["ok"], 1)]["state"] == "completed"
    assert by_job[(ids["sync_ok"], 1)]["code"] == "completed"
    assert (by_job[(ids["boom"], 1)]["state"], by_job[(ids["boom"], 1)]["code"]) == (
        "retryable", "error")
    assert by_job[(ids["boom"], 2)]["state"] == "dead"
    for x in settled:
        assert x["worker_id"] == worker_id and x["kind"].startswith("eco.")
        assert isinstance(x["fence"], int) and x["queue"] == "eco"
    # A handler's own line, logged on the worker's loop, carries the worker too.
    [handler] = [x for x in lines if x["logger"] == "eco.handler"]
    assert handler["worker_id"] == worker_id
    # Every line the worker writes carries it, those of the signal handler and the shutdown too.
    worker_lines = [x for x in lines if x["logger"].startswith("forklift")]
    assert any(x["message"] == "drain requested: no more claims" for x in worker_lines)
    assert [x["message"] for x in worker_lines if x.get("worker_id") != worker_id] == []
