"""Dependencies: ``kind.enqueue(args, after=[job_a, job_b])``.

The dependent is stored held: ``scheduled`` at :data:`HELD_UNTIL`, so the stager never finds it
due and the claim never sees it (the claim statement does not change, and jobs without
dependencies pay nothing). Its ``job_deps`` rows name what it waits for. When the dependent's
transaction commits, a deferred trigger marks each dependency ``has_dependents`` and looks at
the dependent once; afterwards every dependency that settles looks at its dependents in the
transaction of that settle (``functions/workflows_v1.sql`` and ``_v2.sql``). The dependent becomes
``available`` once every dependency is terminal and, under the ``cancel`` policy (the default),
none ended ``dead`` or ``cancelled``; then it is cancelled at once instead, with an error entry
``dependency_failed`` naming the dependency. Under ``run`` it runs whatever they became.

Cycles cannot be made: every dependency must exist when the dependent is enqueued (an unknown
id refuses the enqueue with ``unknown_dependency``, nothing stored), and a job's id is new.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any, Literal

from forklift._base.errors import InvalidOption
from forklift._db.sqltext import render
from forklift._db.steps import Query, Steps
from forklift._features.durable.errors import UnknownDependency
from forklift._jobs.insert import Row
from forklift._jobs.job import Job

Policy = Literal["cancel", "run"]
POLICIES: tuple[Policy, ...] = ("cancel", "run")
#: run_at of a job held by a durable condition (its dependencies, a wait without a deadline).
HELD_UNTIL = datetime(9999, 12, 31, tzinfo=UTC)
MAX_DEPENDENCIES = 1000

# One statement: the dependent and its rows, only if every dependency exists.
INSERT_SQL = """
WITH want AS (SELECT DISTINCT unnest(%(after)s::bigint[]) AS id),
known AS (SELECT count(*) AS n FROM {s}.jobs j JOIN want ON j.id = want.id),
job AS (
    INSERT INTO {s}.jobs (queue, kind, args, state, priority, max_attempts, run_at, tags, meta,
                          retry, keys, tenant, enqueued_by, expires_at, payload_version,
                          weight)
    SELECT %(queue)s, %(kind)s, %(args)s::jsonb, 'scheduled', %(priority)s, %(max_attempts)s,
           %(held)s, %(tags)s::text[], %(meta)s::jsonb, %(retry)s::jsonb, %(keys)s::text[],
           %(tenant)s, %(enqueued_by)s, %(expires_at)s::timestamptz, %(version)s::int4,
           %(weight)s::int2
    FROM known WHERE known.n = cardinality(%(after)s::bigint[])
    RETURNING id, state, run_at, created_at
), deps AS (
    INSERT INTO {s}.job_deps (job_id, depends_on, policy)
    SELECT job.id, want.id, %(policy)s FROM job CROSS JOIN want
)
SELECT * FROM job
"""
MISSING_SQL = "SELECT array_agg(x ORDER BY x) FROM unnest(%s::bigint[]) AS x" \
    " WHERE NOT EXISTS (SELECT 1 FROM {s}.jobs j WHERE j.id = x)"


def check(after: Iterable[int | Job], policy: object, row: Row) -> list[int]:
    """The dependency ids, checked (a typed refusal otherwise)."""
    if policy not in POLICIES:
        raise InvalidOption(f"if_dependency_fails must be 'cancel' or 'run', not {policy!r}",
                            field="if_dependency_fails")
    if isinstance(after, (str, bytes, int, Job)):
        raise InvalidOption("after= takes a list of jobs or job ids", field="after")
    ids = []
    for dep in after:
        value = dep.id if isinstance(dep, Job) else dep
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InvalidOption(f"after= holds {value!r}, not a job or a job id", field="after")
        ids.append(value)
    ids = sorted(set(ids))
    if len(ids) > MAX_DEPENDENCIES:
        raise InvalidOption(f"a job may wait for at most {MAX_DEPENDENCIES} jobs", field="after")
    if row.unique_key is not None or row.at is not None or row.delay:
        raise InvalidOption("after= cannot be combined with unique_key, delay or at",
                            field="after")
    return ids


def _params(row: Row, ids: list[int], policy: str) -> dict[str, Any]:
    return {"after": ids, "queue": row.queue, "kind": row.kind, "args": row.args,
            "priority": row.priority, "max_attempts": row.max_attempts, "held": HELD_UNTIL,
            "tags": row.tags, "meta": row.meta, "retry": row.retry, "policy": policy,
            "keys": row.keys, "tenant": row.tenant, "enqueued_by": row.enqueued_by,
            "expires_at": row.expires_at, "version": row.payload_version,
            "weight": row.weight}  # a keyed kind's values (forklift._features.flow.keys): its limits hold


def _job(row: Row, got: tuple[Any, ...]) -> Job:
    return Job(id=got[0], queue=row.queue, kind=row.kind, args=json.loads(row.args), state=got[1],
               priority=row.priority, attempt=0, max_attempts=row.max_attempts, run_at=got[2],
               created_at=got[3], tags=list(row.tags), meta=json.loads(row.meta),
               tenant=row.tenant, enqueued_by=row.enqueued_by, expires_at=row.expires_at,
               payload_version=row.payload_version, weight=row.weight)


def _unknown(missing: Any, ids: list[int]) -> UnknownDependency:
    gone = list(missing or ids)
    return UnknownDependency(
        f"after= names job {gone[0]}, which does not exist: a job can only wait for jobs"
        " already stored", missing=gone)


def insert_steps(schema: str, row: Row, ids: list[int], policy: str) -> Steps[Job]:
    """Store the held job and its dependency rows (one statement), or refuse an unknown id."""
    got = yield Query(render(INSERT_SQL, schema), _params(row, ids, policy), "one")
    if got is None:
        missing = yield Query(render(MISSING_SQL, schema), (ids,), "one")
        raise _unknown(missing[0] if missing else None, ids)
    return _job(row, got)
