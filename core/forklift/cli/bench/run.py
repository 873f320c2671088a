"""Running the chosen scenarios on one server and collecting their figures into a report."""

from __future__ import annotations

import contextlib
import logging
import os
import platform
import secrets
import shutil
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import psutil
import psycopg

from forklift.cli.bench import registry
from forklift.cli.bench.measure import Bench
from forklift.cli.bench.report import FULL, QUICK, BenchReport, Figure, Sizes, ordered
from forklift.cli.bench.server import SCHEMA, Server

log = logging.getLogger("forklift.cli.bench")


def scenario_names() -> tuple[str, ...]:
    return tuple(s.name for s in registry.scenarios())


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
        "load": round(os.getloadavg()[0], 1),
    }


def run_bench(
    dsn: str | None,
    *,
    scenarios: Iterable[str] | None = None,
    quick: bool = False,
    sizes: Sizes | None = None,
    progress: Callable[[str], None] | None = None,
) -> BenchReport:
    """Run the chosen scenarios (default: all but the opt-in ones) against ``dsn`` (or the configured / embedded
    server).

    Needs the right to create databases on that server: each scenario runs in a fresh one,
    dropped afterwards. Figures are measured, never asserted.
    """
    known = scenario_names()
    wanted = ({s.name for s in registry.scenarios() if s.default} if scenarios is None
              else set(scenarios))
    unknown = wanted - set(known)
    if unknown:
        noun = "scenario" if len(unknown) == 1 else "scenarios"
        raise ValueError(f"unknown {noun}: {', '.join(sorted(unknown))}; known: {', '.join(known)}")
    chosen = [s for s in registry.scenarios() if s.name in wanted]
    sz = sizes or (QUICK if quick else FULL)
    started = time.time()
    t0 = time.perf_counter()
    note = progress or (lambda _m: None)
    figures: list[Figure] = []
    errors: dict[str, str] = {}
    with _server_for(dsn, note) as (target, origin):
        server = Server(target, origin)
        info = server.info()
        try:
            bench = Bench(server, sz)
            for s in chosen:
                note(f"running {s.name}")
                try:
                    figures.extend(f.judged() for f in s.run(bench))
                except Exception as exc:  # one scenario failing still reports the others
                    log.exception("scenario %s failed", s.name)
                    errors[s.name] = f"{type(exc).__name__}: {exc}"
        finally:
            server.close()
    return BenchReport(
        started_at=started,
        seconds=time.perf_counter() - t0,
        quick=quick,
        sizes=sz,
        machine=machine(),
        server=info,
        figures=ordered(figures, registry.figure_keys()),
        errors=errors,
    )


@contextlib.contextmanager
def _server_for(dsn: str | None, note: Callable[[str], None]) -> Iterator[tuple[str, str]]:
    """The server to measure on: the one configured (``dsn``, FORKLIFT_DSN, DATABASE_URL), else
    a throwaway embedded server under ``<FORKLIFT_HOME>/bench/``, removed afterwards with its
    data (also what root keeps under /var/lib/forklift), so a bench leaves nothing behind."""
    from forklift.ops import connect as config

    if dsn or os.environ.get("FORKLIFT_DSN") or os.environ.get("DATABASE_URL"):
        source = config.resolve(dsn, schema=SCHEMA, migrate=False)
        yield source.dsn, source.origin
        return
    from forklift import embedded

    scratch = config.home() / "bench" / f"{os.getpid()}-{secrets.token_hex(3)}"
    note(f"starting a throwaway embedded server in {scratch}")
    try:
        yield embedded.ensure_server(scratch), "embedded (throwaway)"
    finally:
        embedded.remove_server(scratch)
        shutil.rmtree(scratch, ignore_errors=True)
        with contextlib.suppress(OSError):
            scratch.parent.rmdir()  # only when no other bench is running
