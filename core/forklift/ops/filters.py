"""Job filters, sort keys and cursors: operator input turned into SQL parameters, never SQL text.

Every value a filter carries travels as a query parameter. The SQL around it is fixed text chosen
from allow-lists (columns, sort keys, directions). LIKE patterns are escaped so ``%`` and ``_``
match themselves, and NUL characters, which PostgreSQL text cannot hold, are refused up front.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field, fields, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from forklift._job import STATES
from forklift.ops.errors import InvalidFilter
from forklift.ops.shape import jsonable

__all__ = [
    "MAX_TEXT",
    "MAX_VALUES",
    "SORT_KEYS",
    "TIME_FIELDS",
    "Cursor",
    "JobFilter",
    "Sort",
    "check_text",
    "duration",
    "like_pattern",
    "moment",
]

#: Columns a list can be sorted by; the cursor remembers which one it belongs to.
#: ``changed_at``: when the job last moved (finished, else attempted, else created).
SORT_KEYS: tuple[str, ...] = ("id", "created_at", "run_at", "attempted_at", "finished_at", "priority",
                              "state", "queue", "kind", "attempt", "changed_at")
#: Columns a time range can apply to.
TIME_FIELDS: tuple[str, ...] = ("created_at", "run_at", "attempted_at", "finished_at")
_NULLABLE = {"attempted_at", "finished_at"}
_TIMESTAMPS = {"created_at", "run_at", "attempted_at", "finished_at", "changed_at"}
_TEXTS = {"state", "queue", "kind"}
#: Sort keys that are expressions, not columns ({a}: the table's alias).
_EXPRESSIONS = {"changed_at": "coalesce({a}.finished_at, {a}.attempted_at, {a}.created_at)"}
MAX_TEXT = 500
MAX_VALUES = 100

_DURATION = re.compile(r"^\s*(?:(\d+(?:\.\d+)?)\s*(ms|w|d|h|m|s)\s*)+$", re.I)
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|w|d|h|m|s)", re.I)
_UNIT = {"w": 604800.0, "d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


def check_text(value: str, what: str) -> str:
    if "\x00" in value:
        raise InvalidFilter(
            f"{what} contains a NUL character (\\x00), which PostgreSQL text cannot hold;"
            " remove it",
            field=what,
        )
    if len(value) > MAX_TEXT:
        raise InvalidFilter(f"{what} is longer than {MAX_TEXT} characters", field=what)
    return value


def duration(value: str | float | timedelta, what: str = "duration") -> timedelta:
    """``90``, ``"90s"``, ``"15m"``, ``"1h30m"``, ``"7d"``, ``"2w"`` or a timedelta."""
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, (int, float)):
        seconds = float(value)
    else:
        text = check_text(value, what).strip()
        try:
            seconds = float(text)
        except ValueError:
            if not _DURATION.match(text):
                raise InvalidFilter(
                    f"{what} {text!r} is not a duration: use e.g. 90s, 15m, 2h, 7d or 1h30m",
                    field=what,
                ) from None
            seconds = sum(float(n) * _UNIT[u.lower()] for n, u in _DURATION_PART.findall(text))
    if seconds < 0 or seconds != seconds or seconds > 10 * 365 * 86400:
        raise InvalidFilter(f"{what} must be between 0 and ten years", field=what)
    return timedelta(seconds=seconds)


def moment(value: str | datetime, what: str = "time", *, now: datetime | None = None) -> datetime:
    """An ISO 8601 time (naive means UTC) or a duration meaning that long ago (``"2h"``)."""
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    text = check_text(value, what).strip()
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        try:
            ago = duration(text, what)
        except InvalidFilter:
            raise InvalidFilter(
                f"{what} {text!r} is neither an ISO 8601 time (2024-05-01T12:00:00+00:00) nor a"
                " duration ago (2h)",
                field=what,
            ) from None
        return (now or datetime.now(UTC)) - ago
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def like_pattern(text: str) -> str:
    """A substring match where ``%``, ``_`` and ``\\`` stand for themselves."""
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def _group_id(group: str) -> str:
    from forklift.ops.dead import check_group_id  # ops.dead imports this module

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


@dataclass(frozen=True)
class JobFilter:
    """Which jobs: every field narrows the selection; an empty filter matches every job.

    ``states``/``queues``/``kinds``: any of; ``tags``: the job carries all of them; ``text``: a
    substring (case-insensitive) of the args' or the error history's JSON text; ``id_min``/
    ``id_max``: inclusive; ``after``/``before``: a half-open range [after, before) on
    ``time_field``; ``ids``: exactly these jobs; ``dead_group``: the dead jobs of one
    dead-letter group (its 16-hex-digit id, :mod:`forklift.ops.dead`).
    """

    states: tuple[str, ...] = ()
    queues: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    batch_id: int | None = None
    text: str | None = None
    id_min: int | None = None
    id_max: int | None = None
    time_field: str = "created_at"
    after: datetime | None = None
    before: datetime | None = None
    ids: tuple[int, ...] = field(default=())
    dead_group: str | None = None

    @classmethod
    def build(
        cls,
        *,
        states: Iterable[str] | str | None = None,
        queues: Iterable[str] | str | None = None,
        kinds: Iterable[str] | str | None = None,
        tags: Iterable[str] | str | None = None,
        batch_id: int | None = None,
        text: str | None = None,
        id_min: int | None = None,
        id_max: int | None = None,
        time_field: str = "created_at",
        after: str | datetime | None = None,
        before: str | datetime | None = None,
        ids: Iterable[int] | None = None,
        dead_group: str | None = None,
    ) -> JobFilter:
        """A validated filter from loose input (comma-separated strings, ISO times, durations)."""
        now = datetime.now(UTC)
        return cls(
            states=_strings(states, "state"),
            queues=_strings(queues, "queue"),
            kinds=_strings(kinds, "kind"),
            tags=_strings(tags, "tag"),
            batch_id=batch_id,
            text=check_text(text, "text") if text else None,
            id_min=id_min,
            id_max=id_max,
            time_field=time_field,
            after=moment(after, "after", now=now) if after is not None else None,
            before=moment(before, "before", now=now) if before is not None else None,
            ids=tuple(dict.fromkeys(int(i) for i in ids or ())),
            dead_group=_group_id(dead_group) if dead_group else None,
        ).validate()

    def validate(self) -> JobFilter:
        bad = [s for s in self.states if s not in STATES]
        if bad:
            raise InvalidFilter(
                f"unknown state {bad[0]!r}: use one of {', '.join(STATES)}", field="state"
            )
        for what, values in (("queue", self.queues), ("kind", self.kinds), ("tag", self.tags)):
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


# -- sorting and cursors ----------------------------------------------------------------------
@dataclass(frozen=True)
class Sort:
    key: str = "id"
    descending: bool = True

    def __post_init__(self) -> None:
        if self.key not in SORT_KEYS:  # the key is spliced into ORDER BY by name
            raise InvalidFilter(
                f"cannot sort by {self.key!r}: use one of {', '.join(SORT_KEYS)}", field="sort"
            )

    @classmethod
    def parse(cls, text: str | None) -> Sort:
        """``"id"``, ``"-created_at"`` (descending) or ``"created_at:asc"``; default newest first."""
        if not text:
            return cls()
        text = check_text(text, "sort").strip()
        descending = text.startswith("-")
        key = text.lstrip("-+")
        if ":" in key:
            key, _, direction = key.partition(":")
            if direction not in ("asc", "desc"):
                raise InvalidFilter(f"sort direction {direction!r} must be asc or desc", field="sort")
            descending = direction == "desc"
        if key not in SORT_KEYS:
            raise InvalidFilter(
                f"cannot sort by {key!r}: use one of {', '.join(SORT_KEYS)}", field="sort"
            )
        return cls(key, descending)

    def column(self, alias: str = "t") -> str:
        """The key as SQL: a column, or an allow-listed expression."""
        expr = _EXPRESSIONS.get(self.key)
        return expr.format(a=alias) if expr else f"{alias}.{self.key}"

    def order_by(self, alias: str = "t") -> str:
        d = "DESC" if self.descending else "ASC"
        if self.key == "id":
            return f"{alias}.id {d}"
        return f"{self.column(alias)} {d} NULLS LAST, {alias}.id {d}"

    def after(self, cursor: Cursor, alias: str = "t") -> tuple[str, list[Any]]:
        """The keyset condition for the page that follows ``cursor``."""
        op = "<" if self.descending else ">"
        col, ident = self.column(alias), f"{alias}.id"
        if self.key == "id":
            return f"{ident} {op} %s", [cursor.id]
        if cursor.value is None:  # already in the NULLS LAST tail
            return f"({col} IS NULL AND {ident} {op} %s)", [cursor.id]
        nulls = f" OR {col} IS NULL" if self.key in _NULLABLE else ""
        return (
            f"({col} {op} %s OR ({col} = %s AND {ident} {op} %s){nulls})",
            [cursor.value, cursor.value, cursor.id],
        )

    def value_of(self, row: dict[str, Any]) -> Any:
        if self.key == "changed_at":
            return row["finished_at"] or row["attempted_at"] or row["created_at"]
        return row[self.key]


@dataclass(frozen=True)
class Cursor:
    """Where a page ended: the sort it belongs to, the last row's sort value and id."""

    key: str
    descending: bool
    value: Any
    id: int

    def encode(self) -> str:
        value = self.value.isoformat() if isinstance(self.value, datetime) else self.value
        raw = json.dumps([1, self.key, self.descending, value, self.id], separators=(",", ":"))
        return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")

    @classmethod
    def decode(cls, text: str, sort: Sort) -> Cursor:
        try:
            raw = base64.urlsafe_b64decode(check_text(text, "cursor") + "=" * (-len(text) % 4))
            version, key, descending, value, ident = json.loads(raw)
            if version != 1 or not isinstance(ident, int) or isinstance(ident, bool):
                raise ValueError
            if key in _TIMESTAMPS and value is not None:
                value = datetime.fromisoformat(value)
            elif key in _TEXTS:
                if not isinstance(value, str):
                    raise ValueError
                check_text(value, "cursor")
            elif value is not None and (not isinstance(value, int) or isinstance(value, bool)):
                raise ValueError
        except (ValueError, TypeError, binascii.Error, UnicodeDecodeError):
            raise InvalidFilter(
                "the cursor is not one this API handed out; start again without --cursor",
                field="cursor",
            ) from None
        if key != sort.key or descending != sort.descending:
            raise InvalidFilter(
                f"the cursor belongs to a list sorted by {'-' if descending else ''}{key};"
                " pass the same sort or start again without it",
                field="cursor",
            )
        return cls(key, descending, value, ident)
