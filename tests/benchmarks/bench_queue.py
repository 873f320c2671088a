"""The queue benchmark: forklift against plain SQL in one run (prints figures; asserts nothing).

    /work/.venv/bin/python tests/benchmarks/bench_queue.py [--dsn DSN] [--quick] [--json]
        [--only e2e,c1,enqueue,enqueue_16,bulk,latency,e2e_4w,e2e_2w,stats,claim_backlog,memory]

The same as ``forklift bench``: the server is --dsn, else FORKLIFT_DSN / DATABASE_URL, else the
embedded server (fsync on). Every scenario runs in a fresh database created there and dropped
afterwards. See forklift.cli.bench for how each figure is taken.
"""

from __future__ import annotations

import argparse
import json
import sys

from forklift.cli.bench import SCENARIOS, format_report, run_bench


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--only", default=",".join(SCENARIOS))
    args = parser.parse_args()
    only = [s.strip() for s in args.only.split(",") if s.strip()]
    report = run_bench(args.dsn, scenarios=only, quick=args.quick,
                       progress=lambda m: print(m, file=sys.stderr, flush=True))
    print(json.dumps(report.to_json(), indent=2) if args.json else format_report(report))
    return 1 if report.errors else 0


if __name__ == "__main__":
    sys.exit(main())
