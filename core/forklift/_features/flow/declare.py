"""Recording the keys a worker's kinds declare (``flow_keys``), so limits hold fleet-wide.

The flow claim reads a key's limits from its ``flow_keys`` row, never from code: every worker
then applies the same numbers, and an operator's change (``forklift keys limit``) reaches all
of them at their next claim. A key no worker has recorded yet has no row, and its jobs wait
(a missing row is never read as "no limit"). Each worker records its kinds' keys when it
starts and again whenever its app declares more; an operator's override is kept until
``forklift keys reset``.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import TYPE_CHECKING, Any

import psycopg

from forklift._db.session import DB_ERRORS
from forklift._db.sqltext import render
from forklift._features.flow.keys import Declared

if TYPE_CHECKING:
    from forklift._app.app import Forklift
    from forklift._worker.worker import Worker

log = logging.getLogger("forklift.flow")

RECHECK = 30.0  # seconds between looks at the app's declarations

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


def declarations(app: Forklift) -> dict[str, tuple[Declared, list[str]]]:
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


async def record(conn: psycopg.AsyncConnection[Any], schema: str, app: Forklift) -> int:
    """Record the app's keys; how many rows changed."""
    found = declarations(app)
    if not found:
        return 0
    cur = await conn.execute(render(DECLARE_SQL, schema), declare_params(found))
    return len(await cur.fetchall())


def record_sync(conn: psycopg.Connection[Any], schema: str, app: Forklift) -> int:
    """:func:`record` on a sync connection (tools, tests)."""
    found = declarations(app)
    if not found:
        return 0
    return len(conn.execute(render(DECLARE_SQL, schema), declare_params(found)).fetchall())


class KeyDeclarations:
    """The worker's service that records its kinds' keys (at start, then when they change)."""

    name = "flow-keys"

    def __init__(self, worker: Worker) -> None:
        self.w = worker
        self._db: Any = None
        self._recorded: Any = None
        #: set once the kinds' keys are recorded (or there are none): see :meth:`first`
        self.recorded = asyncio.Event()

    async def first(self, timeout: float) -> None:
        """Until the keys are recorded once, the worker stops claiming, or ``timeout`` passes.
        Keyed jobs wait for their keys' rows, so a claim sent before them finds nothing for
        those kinds; the worker waits for this before its first claim."""
        await self.w.wait_any(self.recorded, self.w._stop_claiming, timeout=timeout)

    async def run(self) -> None:
        w = self.w
        while True:
            found = declarations(w.app)
            if found and found != self._recorded:
                if self._db is None:
                    self._db = w.session("flow")
                try:
                    changed = await self._db.run(lambda c: record(c, w.schema, w.app))
                except DB_ERRORS as exc:
                    if not w._closing:
                        log.warning("recording the kinds' keys failed (%s); retrying", exc)
                    await asyncio.sleep(1.0)
                    continue
                self._recorded = found
                if changed:
                    w.producer.wake.set()  # jobs that waited for these rows may go now
            self.recorded.set()
            await asyncio.sleep(RECHECK)
