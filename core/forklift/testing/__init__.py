"""Testing jobs: run them for real in the test's process, inline for unit tests, with faults.

- :func:`drain` / :func:`drain_async`: a real worker in this process runs every due job of a
  queue to its end (real claim, execution and fenced settle), then stops.
- :func:`inline`: enqueue runs the job at once and stores nothing. It bypasses the queue; use it
  for unit tests of handlers, not of forklift.
- :class:`Faults`: make the next attempts of a kind raise, or lose their lease.

The pytest plugin (:mod:`forklift.testing.pytest_plugin`, loaded automatically) wraps these in
fixtures with a fresh database per test.
"""

from forklift.testing._drain import DrainReport, DrainTimeout, drain, drain_async
from forklift.testing._faults import Faults, InjectedFault
from forklift.testing._inline import InlineRuns, inline

__all__ = [
    "DrainReport",
    "DrainTimeout",
    "Faults",
    "InjectedFault",
    "InlineRuns",
    "drain",
    "drain_async",
    "inline",
]
