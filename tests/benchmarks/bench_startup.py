"""Start-up cost: ``import forklift`` against ``import psycopg``, and ``forklift stats --json``
on an empty database against ``python -c "import psycopg"`` (prints figures; asserts nothing).

    python tests/benchmarks/bench_startup.py [--repeats 15] [--dsn DSN]

Each figure is the median wall time of ``--repeats`` fresh interpreters (the sides alternate,
so load drifts hit both alike), from process start to exit; the ratios are printed against the
targets (1.3x for the import, 2x for the command). The database: ``--dsn`` or
FORKLIFT_BENCH_DSN (a role that may CREATE DATABASE), else an embedded server under
FORKLIFT_BENCH_HOME (default: a directory in the system temp dir). A fresh database is created
and migrated for the stats command and dropped at the end. Also printed, for information:
``from forklift import Forklift`` (what an app that enqueues imports) and the modules
``import forklift`` loads.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psycopg
from bench_stats import admin_dsn, with_db  # the same server and database helpers
from psycopg import sql

IMPORT_TARGET = 1.3
STATS_TARGET = 2.0


def wall(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          check=False)
    took = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed: {done.stderr.decode()[-500:]}")
    return took


def medians(sides: dict[str, list[str]], repeats: int, env: dict[str, str]) -> dict[str, float]:
    times: dict[str, list[float]] = {name: [] for name in sides}
    for argv in sides.values():  # warm the file system cache and the .pyc files
        wall(argv, env)
    for _ in range(repeats):
        for name, argv in sides.items():
            times[name].append(wall(argv, env))
    return {name: statistics.median(values) for name, values in times.items()}


def loaded_by_import(env: dict[str, str]) -> list[str]:
    code = "import sys, json; import forklift; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True).stdout
    before = set(json.loads(subprocess.run(
        [sys.executable, "-c", "import sys, json; print(json.dumps(sorted(sys.modules)))"],
        env=env, capture_output=True, text=True, check=True).stdout))
    return sorted(set(json.loads(out)) - before)


def line(label: str, ours: float, base: float, target: float | None) -> str:
    ratio = ours / base
    verdict = "" if target is None else (f"target <= {target:.1f}x "
                                         + ("ok" if ratio <= target else "MISSED"))
    return f"{label:<44} {ours * 1000:8.1f} ms  {base * 1000:8.1f} ms  {ratio:5.2f}x  {verdict}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--dsn", default=None)
    args = parser.parse_args()

    env = {k: v for k, v in os.environ.items() if not k.startswith("FORKLIFT_")}
    env["PYTHONDONTWRITEBYTECODE"] = "0"
    py = sys.executable
    forklift_cli = shutil.which("forklift", path=str(Path(py).parent)) or "forklift"

    if args.dsn:
        os.environ["FORKLIFT_BENCH_DSN"] = args.dsn
    admin = admin_dsn()
    name = f"forklift_startup_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(admin, autocommit=True) as a:
        a.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        dsn = with_db(admin, name)
        from forklift._db.migrate import migrate

        migrate(dsn)
        sides = {
            "psycopg": [py, "-c", "import psycopg"],
            "forklift": [py, "-c", "import forklift"],
            "enqueue_app": [py, "-c", "from forklift import Forklift"],
            "stats": [forklift_cli, "stats", "--json", "--dsn", dsn],
        }
        got = medians(sides, args.repeats, env)
    finally:
        with psycopg.connect(admin, autocommit=True) as a:
            a.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                sql.Identifier(name)))

    print(f"medians of {args.repeats} runs each (wall time, fresh interpreters), Python "
          f"{sys.version.split()[0]}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}")
    print(f"{'':<44} {'ours':>11}  {'baseline':>11}  ratio")
    print(line('import forklift  vs  import psycopg', got["forklift"], got["psycopg"],
               IMPORT_TARGET))
    print(line('from forklift import Forklift  vs  psycopg', got["enqueue_app"], got["psycopg"],
               None))
    print(line('forklift stats --json  vs  python -c psycopg', got["stats"], got["psycopg"],
               STATS_TARGET))
    print("modules `import forklift` loads:", ", ".join(loaded_by_import(env)) or "(none)")


if __name__ == "__main__":
    main()
