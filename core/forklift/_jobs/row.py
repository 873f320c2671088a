"""One job ready to insert: the :class:`Row`, the checks of its options, and what every insert
path shares about unique keys and the table's defaults."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, Literal

from forklift._base.errors import InvalidOption, UniqueConflict
from forklift._base.names import check_name
from forklift._jobs.job import LIVE_STATES_SQL

__all__ = ["COPY_DEFAULTS", "ON_CONFLICT", "ON_KEY", "UNIQUE_ROUNDS", "OnConflict", "Row",
           "check_on_conflict", "check_options", "check_weight", "conflict", "flag_weighted"]

OnConflict = Literal["return_existing", "replace", "raise"]
ON_CONFLICT: Final[tuple[OnConflict, ...]] = ("return_existing", "replace", "raise")

#: The conflict target of a unique key (a live job of the kind holds it).
ON_KEY = (
    " ON CONFLICT (kind, unique_key) WHERE unique_key IS NOT NULL AND state IN " + LIVE_STATES_SQL
)
# A COPY sends only the columns some row needs: the rest take the table's defaults
# (0001_jobs.sql; a test keeps these in step). Each column left out saves about a microsecond
# a row on the client and again on the server.
COPY_DEFAULTS: dict[str, Any] = {
    "priority": 0, "max_attempts": 20, "unique_key": None, "tags": [], "meta": "{}", "retry": None,
    "traceparent": None,  # untraced (no tracer provider): never sent
    "keys": None,  # a kind without keys (forklift._features.flow.keys)
    "tenant": None, "enqueued_by": None,  # a job that names neither
    "expires_at": None,  # a job without a start-by deadline
    "payload_version": None,  # a kind that declares no payload version
    "weight": None,  # a job that takes one slot
}


def flag_weighted(rows: str) -> str:
    """The statement (for a WITH) that flags the queues of ``rows`` weighted, as the insert
    trigger does for an inserted job (functions/flow_v2.sql): for a job made weighted by a
    replacing or debouncing enqueue, an update that the trigger does not see. ``rows``: a
    FROM clause whose rows have ``queue`` and ``weight`` columns."""
    return ("INSERT INTO {s}.queues AS q (name, flow, weighted)"
            " SELECT DISTINCT x.queue, true, true FROM " + rows + " AS x WHERE x.weight IS NOT NULL"
            " ON CONFLICT (name) DO UPDATE SET flow = true, weighted = true, updated_at = now()"
            " WHERE NOT (q.flow AND q.weighted)")

#: A live holder can finish between our insert and our read of it: try again, this often.
UNIQUE_ROUNDS: Final = 5


@dataclass(frozen=True)
class Row:
    """One job ready to insert: validated, serialised, with its options resolved.

    ``__init__`` fills the fields in one ``__dict__`` update (see :meth:`many`); the generated
    one set them one ``object.__setattr__`` at a time, a tenth of a single enqueue's Python.
    """

    queue: str
    kind: str
    args: str
    priority: int
    max_attempts: int
    at: datetime | None
    delay: float
    unique_key: str | None
    tags: list[str]
    meta: str
    retry: str | None
    traceparent: str | None = None  # the enqueue's producer span (forklift.otel), if traced
    #: Key values (forklift._features.flow.keys), computed from the payload; None for unkeyed kinds.
    keys: list[str] | None = None
    #: The job's tenant and who enqueued it (checked names), None when the enqueue names neither.
    tenant: str | None = None
    enqueued_by: str | None = None
    #: The start-by deadline: a job not started by then never starts (it goes dead, expired).
    expires_at: datetime | None = None
    #: The payload version the producing kind declares (forklift._jobs.payload_versions);
    #: None for a kind that declares none.
    payload_version: int | None = None
    #: The slots the job takes (forklift._features.flow.claim), None for one.
    weight: int | None = None

    def __init__(self, queue: str, kind: str, args: str, priority: int, max_attempts: int,
                 at: datetime | None, delay: float, unique_key: str | None, tags: list[str],
                 meta: str, retry: str | None, traceparent: str | None = None,
                 keys: list[str] | None = None, tenant: str | None = None,
                 enqueued_by: str | None = None, expires_at: datetime | None = None,
                 payload_version: int | None = None, weight: int | None = None) -> None:
        self.__dict__.update(
            queue=queue, kind=kind, args=args, priority=priority, max_attempts=max_attempts,
            at=at, delay=delay, unique_key=unique_key, tags=tags, meta=meta, retry=retry,
            traceparent=traceparent, keys=keys, tenant=tenant, enqueued_by=enqueued_by,
            expires_at=expires_at, payload_version=payload_version, weight=weight)

    @classmethod
    def many(cls, fields: dict[str, Any], payloads: Iterable[str]) -> list[Row]:
        """Rows that differ only in their payload (``fields``: every other field, checked).

        Built without ``__init__``: a frozen dataclass sets each of its eleven fields through
        ``object.__setattr__``, which cost as much as validating and serialising the payload.
        """
        base = {**fields, "args": ""}
        out = []
        for text in payloads:
            row = object.__new__(cls)
            row.__dict__.update(base)
            row.__dict__["args"] = text
            out.append(row)
        return out

    @classmethod
    def many_keyed(cls, fields: dict[str, Any], items: Iterable[tuple[str, list[str]]]
                   ) -> list[Row]:
        """:meth:`many` for a keyed kind: each row's (payload, key values)."""
        base = {**fields, "args": "", "keys": None}
        out = []
        for text, keys in items:
            row = object.__new__(cls)
            row.__dict__.update(base)
            row.__dict__["args"] = text
            row.__dict__["keys"] = keys
            out.append(row)
        return out

    @classmethod
    def many_each(cls, fields: dict[str, Any], items: Iterable[dict[str, Any]]) -> list[Row]:
        """:meth:`many` for rows that differ in more than their payload (a kind that derives
        the tenant from it): each item holds the fields of its own row (``args`` at least)."""
        out = []
        for own in items:
            row = object.__new__(cls)
            row.__dict__.update(fields)
            row.__dict__.update(own)
            out.append(row)
        return out

    def params(self) -> tuple[Any, ...]:
        return (
            self.queue,
            self.kind,
            self.args,
            self.priority,
            self.max_attempts,
            self.unique_key,
            self.tags,
            self.meta,
            self.retry,
            self.traceparent,
            self.keys,
            self.tenant,
            self.enqueued_by,
            self.expires_at,
            self.payload_version,
            self.weight,
            self.at,
            self.delay,
        )


def check_options(
    *, priority: int, max_attempts: int, delay: float | None, at: datetime | None, queue: str
) -> None:
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise InvalidOption(f"priority must be an integer, not {priority!r}", field="priority")
    if not -32768 <= priority <= 32767:
        raise InvalidOption(f"priority {priority} is out of range (-32768..32767)", field="priority")
    if isinstance(max_attempts, bool) or not isinstance(max_attempts, int):
        raise InvalidOption(f"max_attempts must be an integer, not {max_attempts!r}",
                            field="max_attempts")
    if not 1 <= max_attempts <= 2**31 - 1:
        raise InvalidOption(f"max_attempts must be at least 1, not {max_attempts}", field="max_attempts")
    if delay is not None and at is not None:
        raise InvalidOption("give delay or at, not both", field="delay")
    if delay is not None and not delay >= 0:  # NaN too
        raise InvalidOption(f"delay must not be negative, not {delay}", field="delay")
    check_name(queue, "queue")


def check_on_conflict(value: object) -> OnConflict:
    if value not in ON_CONFLICT:
        raise InvalidOption(
            f"on_conflict must be one of {', '.join(ON_CONFLICT)}, not {value!r}",
            field="on_conflict",
        )
    return value


def conflict(row: Row) -> UniqueConflict:
    return UniqueConflict(
        f"a live {row.kind} job already holds unique key {row.unique_key!r}",
        kind=row.kind,
        unique_key=row.unique_key,
    )


#: The most a job may weigh: more slots than any worker, queue or key is likely to have, and
#: small enough for the column (smallint).
MAX_WEIGHT: Final = 1000


def check_weight(weight: object) -> int | None:
    """A job's weight as stored: None for one slot (the column's empty default), else the
    number; anything but a whole number from 1 to MAX_WEIGHT is refused, naming the field."""
    if isinstance(weight, bool) or not isinstance(weight, int) or not 1 <= weight <= MAX_WEIGHT:
        raise InvalidOption(f"weight must be a whole number of slots from 1 to {MAX_WEIGHT},"
                            f" not {weight!r}", field="weight")
    return None if weight == 1 else weight
