"""Flow control across the fleet: locks with fencing tokens, per-key concurrency limits, rate
limits and fair share. Every piece lives in the database, so it holds across workers and hosts.

- :mod:`~forklift._features.flow.locks`: the lock a handler (``ctx.lock``) or any code (``app.lock``)
  takes, and its SQL; :mod:`~forklift._features.flow.book`: the leases a process holds, which both
  renewers share; :mod:`~forklift._features.flow.steps`: work written once for sync and async drivers;
- :mod:`~forklift._worker.locks`: the worker's lock service (acquire, renew, lose);
- :mod:`~forklift._features.flow.app_locks`: the same outside jobs, for an app process.
- :mod:`~forklift._features.flow.claim`: the flow claim; :mod:`~forklift._features.flow.handoff`: a settled
  keyed job's slots passed to its values' next job in the outcome write.

Nothing here is imported by ``import forklift``; the worker imports what it runs.
"""
