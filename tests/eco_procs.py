"""Real ``forklift worker`` subprocesses for the ecosystem tests (Django, logs, tracing, metrics).

``Procs`` starts them with a log file each and stops them at the end of the test (SIGTERM, then
SIGKILL if one will not go); their logs are printed so a failing test shows them.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent


class WorkerProc:
    def __init__(self, args: list[str], *, env: dict[str, str], cwd: Path, log_path: Path) -> None:
        self.log_path = log_path
        cmd = [sys.executable, "-m", "forklift.cli.main", "worker", *args]
        full = dict(os.environ, PYTHONUNBUFFERED="1", **env)
        full.pop("FORKLIFT_APP", None)
        with open(log_path, "ab") as out:
            self.popen = subprocess.Popen(
                cmd, cwd=cwd, env=full, stdout=out, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True,
            )

    def alive(self) -> bool:
        return self.popen.poll() is None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self, timeout: float = 30.0) -> int | None:
        if self.alive():
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.popen.pid, signal.SIGTERM)
            try:
                return self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.popen.pid, signal.SIGKILL)
                return self.popen.wait(timeout)
        return self.popen.returncode


class Procs:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.workers: list[WorkerProc] = []

    def start(self, *args: str, env: dict[str, str], cwd: Path = TESTS) -> WorkerProc:
        w = WorkerProc(list(args), env=env, cwd=cwd,
                       log_path=self.tmp / f"worker-{len(self.workers)}.log")
        self.workers.append(w)
        return w

    def close(self) -> None:
        for w in self.workers:
            w.stop()

    def logs(self) -> str:
        return "\n".join(f"--- worker {i} ---\n{w.log()[-6000:]}" for i, w in enumerate(self.workers))


@pytest.fixture
def procs(tmp_path: Path) -> Iterator[Procs]:
    p = Procs(tmp_path)
    try:
        yield p
    finally:
        p.close()
        print(p.logs())
