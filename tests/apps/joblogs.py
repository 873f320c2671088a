"""An app whose handlers write to their attempt's log (ctx.log), some through ``logging`` with
``capture_logs=True``; used by the worker, CLI and console tests of attempt logs."""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

from forklift import Backoff, Forklift, JobContext, Key, Retry

app = Forklift()
log = logging.getLogger("tests.joblogs")
log.setLevel(logging.INFO)  # captured records are those the logging configuration lets through
#: Two sync handlers meet here, so they surely run side by side in one worker.
MEET = threading.Barrier(2, timeout=30)


@app.job(name="logs.plain", queue="logs")
def plain(ctx: JobContext, payload: dict[str, Any]) -> None:
    """Logs with ctx.log; its logging records are not captured (the kind did not opt in)."""
    ctx.log("charging order", order=payload["order"], amount=12.5)
    log.warning("not captured: %s", payload["order"])
    ctx.log("charged", level="warning")


@app.job(name="logs.captured", queue="logs", capture_logs=True)
def captured(ctx: JobContext, payload: dict[str, Any]) -> None:
    """Two of these run at once; each line says whose it is."""
    who = payload["who"]
    ctx.log(f"{who} begins")
    log.info("%s before the meeting", who)
    MEET.wait()
    log.warning("%s after the meeting", who)
    logging.getLogger("forklift.worker").warning("forklift's own record: never captured")


@app.job(name="logs.async_captured", queue="logs", capture_logs=True)
async def async_captured(ctx: JobContext, payload: dict[str, Any]) -> None:
    log.info("async %s", payload["who"])
    await asyncio.sleep(0)
    try:
        raise ValueError("bad row")
    except ValueError:
        log.exception("async %s failed a row", payload["who"])


@app.job(name="logs.flaky", queue="logs", retry=Backoff(kind="fixed", base=0.05, jitter="none"))
def flaky(ctx: JobContext, payload: dict[str, Any]) -> str:
    ctx.log(f"try {ctx.attempt}")
    if ctx.attempt == 1:
        raise Retry(after=0.05, reason="first try fails")
    return "ok"


@app.job(name="logs.chatty", queue="logs", log_lines=5)
def chatty(ctx: JobContext, payload: dict[str, Any]) -> None:
    for i in range(payload["n"]):
        ctx.log(f"line {i}")


@app.job(name="logs.wordy", queue="logs", log_bytes=400)
def wordy(ctx: JobContext, payload: dict[str, Any]) -> None:
    for i in range(payload["n"]):
        ctx.log(f"line {i} " + "x" * 100)


@app.job(name="logs.secret", queue="logs")
def secret(ctx: JobContext, payload: dict[str, Any]) -> None:
    ctx.log("connecting to postgresql://app:hunter2@db.internal/orders",
            api_token="tok-abcdef123456", user="ada")
    ctx.log("sent header Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig")


@app.job(name="logs.slow", queue="logs", timeout=0.5, max_attempts=1)
def slow(ctx: JobContext, payload: dict[str, Any]) -> None:
    ctx.log("starting a long wait")
    ctx.cancelled.wait(30)
    ctx.log("told to stop")


@app.job(name="logs.silent", queue="logs")
def silent(ctx: JobContext, payload: dict[str, Any]) -> int:
    return int(payload.get("i", 0))


@app.job(name="logs.held", queue="logs")
def held(ctx: JobContext, payload: dict[str, Any]) -> None:
    """Runs until told to stop (the test takes its lease away)."""
    ctx.log("holding the job")
    ctx.cancelled.wait(30)
    ctx.log(f"told to stop: {ctx.cancel_reason}")


@app.job(name="logs.napper", queue="logs")
def napper(ctx: JobContext, payload: dict[str, Any]) -> None:
    ctx.log("before the nap")
    ctx.sleep_sync("nap", 3600)  # parks the job: the attempt ends with no outcome


@app.job(name="logs.keyed", queue="logs-keyed",
         concurrency=[Key(lambda p: p["account"], limit=1, name="account")])
def keyed(ctx: JobContext, payload: dict[str, Any]) -> None:
    """One at a time per account: a settled job's slot passes to the next in its write."""
    ctx.log(f"job {payload['i']} of {payload['account']}")


@app.job(name="logs.odd", queue="logs")
def odd(ctx: JobContext, payload: dict[str, Any]) -> None:
    """Text PostgreSQL cannot store as it is, and values JSON has no words for."""
    ctx.log("nul\x00 and a lone \ud800 surrogate", nan=float("nan"), obj=object(),
            nested={"a": [1, 2], "password": "pw1"}, ok=True, n=None)
