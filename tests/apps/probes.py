"""An app for the probe tests (tests/worker/test_probes.py): a handler that blocks the event
loop with a busy wait, and one that holds its slot until the test removes a file (no database
of its own, so a frozen server leaves it alone)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from forklift import Forklift, JobContext

app = Forklift()


@app.job(name="probes.block", queue="probes", max_attempts=1)
async def block(ctx: JobContext, args: dict[str, Any]) -> None:
    """Blocks the worker's event loop and hogs the CPU: a busy wait inside an async handler
    (holding the interpreter but for its switch interval)."""
    end = time.monotonic() + float(args["seconds"])
    while time.monotonic() < end:
        pass


@app.job(name="probes.hold", queue="probes", max_attempts=1)
async def hold(ctx: JobContext, args: dict[str, Any]) -> None:
    """Holds its slot while the file ``args["while"]`` exists."""
    gate = Path(args["while"])
    while await asyncio.to_thread(gate.exists):  # noqa: ASYNC110 - the gate is a file
        await asyncio.sleep(0.05)
