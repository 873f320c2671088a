"""Job filters: operator input turned into SQL parameters, never SQL text.

Every value a filter carries travels as a query parameter. The SQL around it is fixed text chosen
from allow-lists (columns, sort keys, directions). LIKE patterns are escaped so ``%`` and ``_``
match themselves, and NUL characters, which PostgreSQL text cannot hold, are refused up front.
The input checks live in :mod:`forklift.ops._parse`, the sort keys and cursors in
:mod:`forklift.ops._sort`; both are importable from here, as they always were.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field, fields, replace
from datetime import UTC, datetime
from typing import Any

from forklift._jobs.job import STATES
from forklift.ops._parse import (
    MAX_TEXT,
    MAX_VALUES,
    check_group_id,
    check_text,
    duration,
    like_pattern,
    moment,
)
from forklift.ops._sort import SORT_KEYS, Cursor, Sort
from forklift.ops.args_match import ArgsMatch
from forklift.ops.errors import InvalidFilter
from forklift.ops.shape import jsonable

__all__ = [
    "MAX_TEXT",
    "MAX_VALUES",
    "SORT_KEYS",
    "TIME_FIELDS",
    "ArgsMatch",
    "Cursor",
    "JobFilter",
    "Sort",
    "check_text",
    "duration",
    "like_pattern",
    "moment",
]

#: Columns a time range can apply to.
TIME_FIELDS: tuple[str, ...] = ("created_at", "run_at", "attempted_at", "finished_at")


def _group_id(group: str) -> str:
    return check_group_id(group)


def _strings(values: Iterable[str] | str | None, what: str) -> tuple[str, ...]:
    if values is None:
        return ()
    if isinstance(values, str):
        values = [values]
    out = []
    for v in values:
        for part in str(v).split(","):
            part = check_text(part, what).strip()
            if part:
                out.append(part)
    if len(out) > MAX_VALUES:
        raise InvalidFilter(f"at most {MAX_VALUES} values for {what}", field=what)
    return tuple(dict.fromkeys(out))


def _args(values: Iterable[str | ArgsMatch] | str | None) -> tuple[ArgsMatch, ...]:
    if values is None:
        return ()
    if isinstance(values, str):
        values = [values]
    out = [v if isinstance(v, ArgsMatch) else ArgsMatch.parse(v) for v in values]
    if len(out) > MAX_VALUES:
        raise InvalidFilter(f"at most {MAX_VALUES} payload fields", field="args")
    return tuple(dict.fromkeys(out))


def _versions(values: Iterable[int | str] | int | str | None) -> tuple[int, ...]:
    """Payload versions from loose input (``2``, ``"1,2"``, ``[1, 2]``), deduplicated."""
    if values is None:
        return ()
    if isinstance(values, (int, str)):
        values = [values]
    out: list[int] = []
    for value in values:
        for part in str(value).split(",") if isinstance(value, str) else [value]:
            text = part.strip() if isinstance(part, str) else part
            try:
                number = int(text)
            except (TypeError, ValueError):
                raise InvalidFilter(f"payload version {text!r} is not a whole number from 1",
                                    field="payload_version") from None
            out.append(number)
    if len(out) > MAX_VALUES:
        raise InvalidFilter(f"at most {MAX_VALUES} payload versions", field="payload_version")
    return tuple(dict.fromkeys(out))


@dataclass(frozen=True)
class JobFilter:
    """Which jobs: every field narrows the selection; an empty filter matches every job.

    ``states``/``queues``/``kinds``/``tenants``/``enqueued_by``: any of; ``tags``: the job
    carries all of them; ``text``: a
    substring (case-insensitive) of the args' or the error history's JSON text; ``id_min``/
    ``id_max``: inclusive; ``after``/``before``: a half-open range [after, before) on
    ``time_field``; ``ids``: exactly these jobs; ``dead_group``: the dead jobs of one
    dead-letter group (its 16-hex-digit id, :mod:`forklift.ops.dead`); ``args``: payload
    fields, all of them (``args.customer.id:42``, :mod:`forklift.ops.args_match`);
    ``payload_versions``: any of these payload versions (a job of a kind without versions is
    version 1).
    """

    states: tuple[str, ...] = ()
    queues: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    tenants: tuple[str, ...] = ()
    enqueued_by: tuple[str, ...] = ()
    batch_id: int | None = None
    text: str | None = None
    id_min: int | None = None
    id_max: int | None = None
    time_field: str = "created_at"
    after: datetime | None = None
    before: datetime | None = None
    ids: tuple[int, ...] = field(default=())
    dead_group: str | None = None
    args: tuple[ArgsMatch, ...] = ()
    payload_versions: tuple[int, ...] = ()

    @classmethod
    def build(
        cls,
        *,
        states: Iterable[str] | str | None = None,
        queues: Iterable[str] | str | None = None,
        kinds: Iterable[str] | str | None = None,
        tags: Iterable[str] | str | None = None,
        tenants: Iterable[str] | str | None = None,
        enqueued_by: Iterable[str] | str | None = None,
        batch_id: int | None = None,
        text: str | None = None,
        id_min: int | None = None,
        id_max: int | None = None,
        time_field: str = "created_at",
        after: str | datetime | None = None,
        before: str | datetime | None = None,
        ids: Iterable[int] | None = None,
        dead_group: str | None = None,
        args: Iterable[str | ArgsMatch] | str | None = None,
        payload_versions: Iterable[int | str] | int | str | None = None,
    ) -> JobFilter:
        """A validated filter from loose input (comma-separated strings, ISO times, durations)."""
        now = datetime.now(UTC)
        return cls(
            states=_strings(states, "state"),
            queues=_strings(queues, "queue"),
            kinds=_strings(kinds, "kind"),
            tags=_strings(tags, "tag"),
            tenants=_strings(tenants, "tenant"),
            enqueued_by=_strings(enqueued_by, "enqueued_by"),
            batch_id=batch_id,
            text=check_text(text, "text") if text else None,
            id_min=id_min,
            id_max=id_max,
            time_field=time_field,
            after=moment(after, "after", now=now) if after is not None else None,
            before=moment(before, "before", now=now) if before is not None else None,
            ids=tuple(dict.fromkeys(int(i) for i in ids or ())),
            dead_group=_group_id(dead_group) if dead_group else None,
            args=_args(args),
            payload_versions=_versions(payload_versions),
        ).validate()

    def validate(self) -> JobFilter:
        bad = [s for s in self.states if s not in STATES]
        if bad:
            raise InvalidFilter(
                f"unknown state {bad[0]!r}: use one of {', '.join(STATES)}", field="state"
            )
        for what, values in (("queue", self.queues), ("kind", self.kinds), ("tag", self.tags),
                             ("tenant", self.tenants), ("enqueued_by", self.enqueued_by)):
            for v in values:
                check_text(v, what)
        if self.text is not None:
            check_text(self.text, "text")
        if self.time_field not in TIME_FIELDS:
            raise InvalidFilter(
                f"cannot filter times on {self.time_field!r}: use one of {', '.join(TIME_FIELDS)}",
                field="time_field",
            )
        if self.id_min is not None and self.id_max is not None and self.id_min > self.id_max:
            raise InvalidFilter(
                f"impossible id range: {self.id_min} > {self.id_max}", field="id_range"
            )
        if self.after is not None and self.before is not None and self.after >= self.before:
            raise InvalidFilter(
                f"impossible time range: after {self.after.isoformat()} is not before"
                f" {self.before.isoformat()}",
                field="time_range",
            )
        if self.dead_group is not None and _group_id(self.dead_group) != self.dead_group:
            raise InvalidFilter(f"{self.dead_group!r} is not a dead-letter group id in its"
                                " canonical form (16 lowercase hex digits)", field="group")
        if len(self.args) > MAX_VALUES:
            raise InvalidFilter(f"at most {MAX_VALUES} payload fields", field="args")
        for version in self.payload_versions:
            if isinstance(version, bool) or not isinstance(version, int) \
                    or not 1 <= version <= 2**31 - 1:
                raise InvalidFilter(f"payload version {version!r} is not a whole number from 1",
                                    field="payload_version")
        for n in (self.id_min, self.id_max, self.batch_id, *self.ids):
            if n is not None and not (-(2**63) <= n < 2**63):
                raise InvalidFilter(f"{n} is out of range for a job id", field="id")
        return self

    def is_empty(self) -> bool:
        return self == JobFilter()

    def narrowed(self, allowed: tuple[str, ...], action: str) -> JobFilter:
        """This filter limited to the states an action applies to; refuses an empty overlap."""
        if not self.states:
            return replace(self, states=allowed)
        keep = tuple(s for s in self.states if s in allowed)
        if not keep:
            raise InvalidFilter(
                f"{action} applies to {', '.join(allowed)} jobs; the filter's states"
                f" ({', '.join(self.states)}) match none of them",
                field="state",
            )
        return replace(self, states=keep)

    def where(self, alias: str = "t") -> tuple[str, list[Any]]:
        """A SQL condition (fixed text, ``%s`` placeholders) and its parameters."""
        self.validate()  # the time column is spliced in by name: only allow-listed ones
        a = alias
        parts: list[str] = []
        params: list[Any] = []
        if self.ids:
            parts.append(f"{a}.id = ANY(%s::bigint[])")
            params.append(list(self.ids))
        if self.dead_group is not None:
            # By the dead_letters index (migration 0008); a requeued job leaves the group.
            parts.append(f"{a}.state = 'dead' AND {a}.id IN"
                         " (SELECT d.job_id FROM {s}.dead_letters d WHERE d.group_key = %s)")
            params.append(self.dead_group)
        if self.states:
            # Spelled as OR'd literals (each checked against STATES above) so the planner can
            # combine the partial indexes on live states instead of scanning finished rows.
            assert all(st in STATES for st in self.states)
            parts.append("(" + " OR ".join(f"{a}.state = '{st}'" for st in self.states) + ")")
        if self.queues:
            parts.append(f"{a}.queue = ANY(%s::text[])")
            params.append(list(self.queues))
        if self.kinds:
            parts.append(f"{a}.kind = ANY(%s::text[])")
            params.append(list(self.kinds))
        if self.tags:
            parts.append(f"{a}.tags @> %s::text[]")
            params.append(list(self.tags))
        if len(self.tenants) == 1:
            # by jobs_tenant_idx (tenant, id), already in id order: no sort of a big tenant
            parts.append(f"{a}.tenant = %s")
            params.append(self.tenants[0])
        elif self.tenants:
            parts.append(f"{a}.tenant = ANY(%s::text[])")
            params.append(list(self.tenants))
        if self.enqueued_by:
            parts.append(f"{a}.enqueued_by = ANY(%s::text[])")
            params.append(list(self.enqueued_by))
        if self.payload_versions:
            parts.append(f"coalesce({a}.payload_version, 1) = ANY(%s::int4[])")
            params.append(list(self.payload_versions))
        if self.batch_id is not None:
            parts.append(f"{a}.batch_id = %s")
            params.append(self.batch_id)
        if self.text:
            # The columns are JSON text, where a quote or a backslash inside a string is
            # escaped: look for the text as typed and as JSON writes it.
            patterns = list(dict.fromkeys(
                like_pattern(t) for t in (self.text, json.dumps(self.text, ensure_ascii=False)[1:-1])
            ))
            parts.append("(" + " OR ".join(
                f"{a}.{col}::text ILIKE %s ESCAPE '\\'"
                for col in ("args", "errors") for _ in patterns
            ) + ")")
            params += [p for _ in ("args", "errors") for p in patterns]
        for match in self.args:
            text, values = match.condition(a)
            parts.append(text)
            params += values
        if self.id_min is not None:
            parts.append(f"{a}.id >= %s")
            params.append(self.id_min)
        if self.id_max is not None:
            parts.append(f"{a}.id <= %s")
            params.append(self.id_max)
        column = f"{a}.{self.time_field}"  # time_field is checked against TIME_FIELDS
        if self.after is not None:
            parts.append(f"{column} >= %s")
            params.append(self.after)
        if self.before is not None:
            parts.append(f"{column} < %s")
            params.append(self.before)
        return (" AND ".join(parts) or "true"), params

    def to_json(self) -> dict[str, Any]:
        """Only the fields that narrow the selection."""
        default = JobFilter()
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value != getattr(default, f.name) or (
                f.name == "time_field" and (self.after or self.before)
            ):
                out[f.name] = jsonable(value)
        return out
