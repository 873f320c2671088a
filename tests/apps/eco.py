"""The ecosystem tests' app (logs, hooks, metrics, tracing), run in-process or as
``forklift worker --app apps.eco:app`` (cwd tests/).

Payloads carry a marker (``SECRET``) and results another (``RESULT``) that no log line, span or
metric may ever contain.
"""

from __future__ import annotations

import logging
from typing import Any

from forklift import Backoff, Fail, Forklift, JobContext

app = Forklift()
SECRET = "payload-secret-7f3a"
RESULT = "result-marker-91c2"
FIXED = Backoff(kind="fixed", base=0.05, jitter="none")
log = logging.getLogger("eco.handler")


@app.job(name="eco.ok", queue="eco", retry=FIXED)
async def ok(ctx: JobContext, payload: dict[str, Any]) -> str:
    log.info("handling job %s", ctx.job_id)
    return RESULT


@app.job(name="eco.sync_ok", queue="eco", retry=FIXED)
def sync_ok(ctx: JobContext, payload: dict[str, Any]) -> str:
    return RESULT


@app.job(name="eco.boom", queue="eco", max_attempts=2, retry=FIXED)
def boom(ctx: JobContext, payload: dict[str, Any]) -> None:
    raise ValueError(f"bad input, password=hunter2 {payload.get('secret', '')[:0]}")


@app.job(name="eco.fatal", queue="eco", failure_codes=["no_such_account"])
async def fatal(ctx: JobContext, payload: dict[str, Any]) -> None:
    raise Fail("no_such_account", "account 42 is closed")
