"""An app with a schedule, for the tests of the worker's services (tests/architecture/test_worker_services.py)."""

from __future__ import annotations

from typing import Any

from forklift import Forklift, JobContext

app = Forklift()


@app.periodic("* * * * * */2", name="services.tick", policy="skip")
@app.job(name="services.tick", queue="services")
async def tick(ctx: JobContext, args: dict[str, Any]) -> None:
    return None


@app.job(name="services.quick", queue="services")
async def quick(ctx: JobContext, args: dict[str, Any]) -> str:
    return "done"
