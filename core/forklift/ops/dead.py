"""Dead letters grouped on the server, and acting on a whole group.

A group is every dead job with the same kind, last error code and message shape (numbers,
uuids, hex and quoted values replaced: ``user <n> not found``). The grouping covers all dead
jobs, not a recent sample: triggers keep ``{schema}.dead_letters`` (one narrow row per dead
job, migration 0008) equal to the dead jobs, so listing the groups is one scan of that table
and a group's jobs are found by index.

    from forklift.ops import Operator

    with Operator() as op:
        for g in op.dead_groups().groups:
            print(g.id, g.count, g.kind, g.code, g.fingerprint)
        op.requeue_dead_group("3f2a9c01b2e4d5f6", dry_run=True)   # a BulkReport

Requeue and delete run as the other bulk actions do (:func:`forklift.ops.actions.bulk`): at
most ``cap`` jobs a call, in server-side batches of ``batch_size``, each batch its own
transaction and audit row, every job re-checked (still dead, still in the group) under its
row lock.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg

from forklift._base.errors import ForkliftError
from forklift._db.sqltext import render
from forklift.ops import actions
from forklift.ops._parse import check_group_id, check_text
from forklift.ops.context import OpsContext
from forklift.ops.errors import InvalidFilter
from forklift.ops.shape import Shape

__all__ = [
    "DeadGroup",
    "DeadGroupFilter",
    "DeadGroupNotFound",
    "DeadGroups",
    "act_on_group",
    "get_group",
    "groups",
]

#: Groups one call returns at most.
MAX_GROUPS = 1000

# Every group first (their count, the total), then the page, then per group shown its newest
# dead job (by index) and that job's last message (by primary key).
GROUPS_SQL = """
WITH g AS (
    SELECT group_key, kind, code, fingerprint, count(*) AS n,
           array_agg(DISTINCT queue ORDER BY queue) AS queues,
           count(*) FILTER (WHERE finished_at > now() - interval '1 hour') AS hour,
           count(*) FILTER (WHERE finished_at > now() - interval '1 day') AS day,
           count(*) FILTER (WHERE finished_at > now() - interval '7 days') AS week,
           min(finished_at) AS first_at, max(finished_at) AS last_at
    FROM {s}.dead_letters
    WHERE (%(queue)s::text IS NULL OR queue = %(queue)s)
      AND (%(kind)s::text IS NULL OR kind = %(kind)s)
      AND (%(group)s::text IS NULL OR group_key = %(group)s)
    GROUP BY group_key, kind, code, fingerprint
), page AS (
    SELECT g.*, count(*) OVER () AS groups, sum(n) OVER () AS total FROM g
    ORDER BY hour DESC, day DESC, n DESC, group_key
    LIMIT %(limit)s
)
SELECT p.group_key, p.kind, p.code, p.fingerprint, p.n, p.queues, p.hour, p.day, p.week,
       p.first_at, p.last_at, s.job_id, j.errors -> -1 ->> 'message', p.groups, p.total
FROM page p
CROSS JOIN LATERAL (
    SELECT d.job_id FROM {s}.dead_letters d
    WHERE d.group_key = p.group_key AND (%(queue)s::text IS NULL OR d.queue = %(queue)s)
    ORDER BY d.finished_at DESC, d.job_id DESC LIMIT 1
) s
LEFT JOIN {s}.jobs j ON j.id = s.job_id
ORDER BY p.hour DESC, p.day DESC, p.n DESC, p.group_key
"""


class DeadGroupNotFound(ForkliftError):
    """No dead job is in that group (any more): it was requeued, deleted or pruned."""

    code = "dead_group_not_found"


@dataclass(frozen=True)
class DeadGroup(Shape):
    #: 16 hex digits, stable for (kind, code, fingerprint): what `forklift dead requeue` takes.
    id: str
    kind: str
    code: str
    #: The message's shape: ``user <n> not found``.
    fingerprint: str
    count: int
    queues: list[str]
    #: Of ``count``, how many died in the last hour, day, week.
    last_hour: int
    last_day: int
    last_week: int
    first_at: datetime
    last_at: datetime
    #: The newest dead job of the group, and its last error's message (scrubbed when written).
    sample_job_id: int
    sample_message: str | None


@dataclass(frozen=True)
class DeadGroups(Shape):
    groups: list[DeadGroup]
    #: Every group and every dead job (matching the queue/kind given), not only those shown.
    group_count: int
    dead: int
    #: More groups exist than ``limit`` let through.
    more: bool


@dataclass(frozen=True)
class DeadGroupFilter:
    """The jobs of one dead group, as a bulk action's selection (see actions.Selection)."""

    group: str
    states: tuple[str, ...] = ("dead",)
    #: For the audit trail and reports: what the group is.
    kind: str | None = None
    code: str | None = None
    fingerprint: str | None = None

    def validate(self) -> DeadGroupFilter:
        check_group_id(self.group)
        return self

    def narrowed(self, allowed: tuple[str, ...], action: str) -> DeadGroupFilter:
        if "dead" not in allowed:
            raise InvalidFilter(f"{action} does not apply to dead jobs", field="state")
        return self

    def where(self, alias: str = "t") -> tuple[str, list[Any]]:
        check_group_id(self.group)
        return (
            f"{alias}.state = 'dead' AND {alias}.id IN"
            " (SELECT d.job_id FROM {s}.dead_letters d WHERE d.group_key = %s)",
            [self.group],
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"dead_group": self.group, "states": list(self.states)}
        for name in ("kind", "code", "fingerprint"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        return out


def _group(row: tuple[Any, ...]) -> DeadGroup:
    return DeadGroup(
        id=row[0], kind=row[1], code=row[2], fingerprint=row[3], count=int(row[4]),
        queues=list(row[5] or []), last_hour=int(row[6]), last_day=int(row[7]),
        last_week=int(row[8]), first_at=row[9], last_at=row[10], sample_job_id=int(row[11]),
        sample_message=row[12],
    )


def groups(
    conn: psycopg.Connection[Any],
    ctx: OpsContext,
    *,
    queue: str | None = None,
    kind: str | None = None,
    limit: int = 100,
) -> DeadGroups:
    """Every dead job grouped by kind, error code and message shape; the most recent first
    (died in the last hour, then day, then the largest)."""
    params = {
        "queue": check_text(queue, "queue") if queue else None,
        "kind": check_text(kind, "kind") if kind else None,
        "group": None,
        "limit": max(1, min(int(limit), MAX_GROUPS)),
    }
    rows = conn.execute(render(GROUPS_SQL, ctx.schema), params).fetchall()
    if not rows:
        return DeadGroups(groups=[], group_count=0, dead=0, more=False)
    count, dead = int(rows[0][13]), int(rows[0][14])
    return DeadGroups(groups=[_group(r) for r in rows], group_count=count, dead=dead,
                      more=count > len(rows))


def get_group(conn: psycopg.Connection[Any], ctx: OpsContext, group: str) -> DeadGroup:
    group = check_group_id(group)
    params = {"queue": None, "kind": None, "group": group, "limit": 1}
    row = conn.execute(render(GROUPS_SQL, ctx.schema), params).fetchone()
    if row is None:
        raise DeadGroupNotFound(
            f"no dead jobs in group {group}: it was requeued, deleted or pruned; see"
            " `forklift dead groups`",
            group=group,
        )
    return _group(row)


def act_on_group(
    conn: psycopg.Connection[Any],
    ctx: OpsContext,
    action: str,
    group: str,
    *,
    dry_run: bool = False,
    cap: int = actions.DEFAULT_CAP,
    batch_size: int = actions.DEFAULT_BATCH,
    reason: str | None = None,
) -> actions.BulkReport:
    """Requeue or delete the jobs of a dead group (a bulk action; see the module docstring)."""
    if action not in ("requeue", "delete"):
        raise InvalidFilter(f"a dead group can be requeued or deleted, not {action!r}",
                            field="action")
    g = get_group(conn, ctx, group)
    flt = DeadGroupFilter(g.id, kind=g.kind, code=g.code, fingerprint=g.fingerprint)
    return actions.bulk(conn, ctx, action, flt, dry_run=dry_run, cap=cap,
                        batch_size=batch_size, reason=reason)
