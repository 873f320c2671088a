"""Recording the keys a worker's kinds declare (``flow_keys``), so limits hold fleet-wide.

The flow claim reads a key's limits from its ``flow_keys`` row, never from code: every worker
then applies the same numbers, and an operator's change (``forklift keys limit``) reaches all
of them at their next claim. A key no worker has recorded yet has no row, and its jobs wait
(a missing row is never read as "no limit"). Each worker records its kinds' keys when it
starts and again whenever its app declares more (forklift._worker.keys); an operator's override
is kept until ``forklift keys reset``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any, Protocol

import psycopg

from forklift._db.sqltext import render
from forklift._features.flow.keys import Declared

log = logging.getLogger("forklift.flow")



class HasKinds(Protocol):
    """An app, as far as its keys go: its kinds by name (a kind with keys has ``flow``)."""

    @property
    def kinds(self) -> Mapping[str, Any]: ...


# One row per key name; a row is rewritten only when the declaration or its kinds changed.
DECLARE_SQL = """
INSERT INTO {s}.flow_keys AS k (name, concurrency, rate_limit, rate_per, rate_burst, declared,
                                kinds, declared_at)
SELECT d.name, d.concurrency, d.rate_limit, d.rate_per, d.rate_burst, d.declared,
       string_to_array(d.kinds, chr(31)), now()
FROM unnest(%s::text[], %s::int4[], %s::int4[], %s::float8[], %s::int4[], %s::jsonb[], %s::text[])
     AS d(name, concurrency, rate_limit, rate_per, rate_burst, declared, kinds)
ORDER BY d.name
ON CONFLICT (name) DO UPDATE SET
    declared = excluded.declared, declared_at = now(), updated_at = now(),
    kinds = ARRAY(SELECT DISTINCT x FROM unnest(k.kinds || excluded.kinds) AS x ORDER BY x),
    concurrency = CASE WHEN k.overridden THEN k.concurrency ELSE excluded.concurrency END,
    rate_limit = CASE WHEN k.overridden THEN k.rate_limit ELSE excluded.rate_limit END,
    rate_per = CASE WHEN k.overridden THEN k.rate_per ELSE excluded.rate_per END,
    rate_burst = CASE WHEN k.overridden THEN k.rate_burst ELSE excluded.rate_burst END
WHERE k.declared IS DISTINCT FROM excluded.declared OR NOT k.kinds @> excluded.kinds
RETURNING k.name
"""


def declarations(app: HasKinds) -> dict[str, tuple[Declared, list[str]]]:
    """Every key the app's kinds declare: name -> (its declaration, the kinds declaring it).
    Two kinds declaring one name differently: the first (by kind name) is recorded, logged."""
    out: dict[str, tuple[Declared, list[str]]] = {}
    for kind_name in sorted(app.kinds):
        flow = getattr(app.kinds[kind_name], "flow", None)
        if flow is None:
            continue
        for d in flow.declared():
            seen = out.get(d.name)
            if seen is None:
                out[d.name] = (d, [kind_name])
                continue
            if seen[0] != d:
                log.warning("key %r is declared differently by %s and %s; recording %s's",
                            d.name, seen[1][0], kind_name, seen[1][0])
            seen[1].append(kind_name)
    return out


def declare_params(found: dict[str, tuple[Declared, list[str]]]) -> tuple[list[Any], ...]:
    rows = [(d.name, d.limit, d.rate.limit if d.rate else None, d.rate.per if d.rate else None,
             d.rate.capacity if d.rate else None, json.dumps(d.to_json(), sort_keys=True),
             "\x1f".join(kinds)) for d, kinds in found.values()]
    return tuple(list(c) for c in zip(*rows, strict=True)) if rows else ([],) * 7


async def record(conn: psycopg.AsyncConnection[Any], schema: str, app: HasKinds) -> int:
    """Record the app's keys; how many rows changed."""
    found = declarations(app)
    if not found:
        return 0
    cur = await conn.execute(render(DECLARE_SQL, schema), declare_params(found))
    return len(await cur.fetchall())


def record_sync(conn: psycopg.Connection[Any], schema: str, app: HasKinds) -> int:
    """:func:`record` on a sync connection (tools, tests)."""
    found = declarations(app)
    if not found:
        return 0
    return len(conn.execute(render(DECLARE_SQL, schema), declare_params(found)).fetchall())
