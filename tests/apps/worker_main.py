"""Run a Worker in this process with options given as JSON (those the CLI has no flag for).

``python -m apps.worker_main MODULE:ATTR '{"concurrency": 1, "prefetch_horizon": 1000}'`` (cwd
tests/, FORKLIFT_DSN set): logs like ``forklift worker`` and exits through ``run_worker``.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import sys

from forklift import Worker, run_worker


def main() -> int:
    target, options = sys.argv[1], json.loads(sys.argv[2])
    module, attr = target.split(":")
    app = getattr(importlib.import_module(module), attr)
    app.use(os.environ["FORKLIFT_DSN"])
    logging.basicConfig(level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    return run_worker(Worker(app, **options))


if __name__ == "__main__":
    sys.exit(main())
