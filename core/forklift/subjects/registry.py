"""An app's personal data: its subjects, its marked columns, the coverage check, and the
export and erase kinds built from them."""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import psycopg

from forklift import JobContext
from forklift._base.errors import ConfigError
from forklift._base.retry import Fail
from forklift.subjects import audit
from forklift.subjects.catalog import read_catalog
from forklift.subjects.coverage import marked_columns, problems
from forklift.subjects.errors import (
    PersonalDataUnerased,
    PersonalDataUnreached,
    SubjectDeclarationInvalid,
    SubjectError,
)
from forklift.subjects.plan import Plan, plan
from forklift.subjects.problem import Problem
from forklift.subjects.reach import Reach
from forklift.subjects.ref import SubjectRef
from forklift.subjects.runs import erase_rows, export_document
from forklift.subjects.subject import Subject
from forklift.subjects.treatment import Treatment

if TYPE_CHECKING:
    from forklift import Forklift, JobKind

__all__ = ["REFUSAL_CODES", "PersonalData", "registry_of"]

#: The codes a refused export or erase ends ``dead`` with (terminal: the declaration is wrong,
#: and attempt five would find it as wrong as attempt one).
REFUSAL_CODES = (PersonalDataUnerased.code, PersonalDataUnreached.code,
                 SubjectDeclarationInvalid.code)

#: What an erase also runs inside its transaction (e.g. destroying the subject's sealing key).
EraseHook = Callable[[psycopg.Connection[Any], Subject, Any], None]
#: Where an export's document goes, inside the export's transaction; without one it is the
#: job's result.
Sink = Callable[[dict[str, Any], psycopg.Connection[Any]], None]

log = logging.getLogger("forklift.subjects")

_REGISTRIES: weakref.WeakKeyDictionary[Any, PersonalData] = weakref.WeakKeyDictionary()


def registry_of(app: Forklift) -> PersonalData | None:
    """The app's :class:`PersonalData`, or None when it declares none."""
    return _REGISTRIES.get(app)


class PersonalData:
    """The subjects of one app, over tables in ``schema`` (the app's, not forklift's).

    A column is personal data when it is marked: by :meth:`mark`, by ``personal=`` on a subject
    or a reach, or by a column comment starting with ``personal``. Before an export or erase
    touches a row, :meth:`check` must find no problem; ``forklift subjects check`` lists them.
    """

    def __init__(self, app: Forklift, *, schema: str = "public", queue: str = "subjects") -> None:
        if app in _REGISTRIES:
            raise ConfigError("this app already has its PersonalData; declare every subject on it")
        self.app = app
        self.schema = schema
        self.queue = queue
        self.subjects: dict[str, Subject] = {}
        self.marks: dict[str, list[str]] = {}
        self.erase_hooks: list[EraseHook] = []
        _REGISTRIES[app] = self

    # -- declaring -------------------------------------------------------------------------------
    def mark(self, table: str, *columns: str) -> None:
        """Mark ``columns`` of ``table`` as personal data."""
        if not columns:
            raise ConfigError(f"mark({table!r}) names no column", field="columns")
        listed = self.marks.setdefault(table, [])
        listed.extend(c for c in columns if c not in listed)

    def subject(self, name: str, *, table: str, erase: Treatment, key: str = "id",
                reaches: Sequence[Reach] = (), personal: Sequence[str] = ()) -> Subject:
        """Declare a subject: its root table and key, what an erase does to the root row, and
        the tables reached from it."""
        if name in self.subjects:
            raise ConfigError(f"subject {name!r} is already declared", field="name")
        declared = Subject(name, table, key, erase, reaches, personal)
        self.subjects[name] = declared
        return declared

    def declared_marks(self) -> dict[str, list[str]]:
        marks = {t: list(c) for t, c in self.marks.items()}
        for s in self.subjects.values():
            for table, columns in ((s.table, s.personal), *((r.table, r.personal) for r in s.reaches)):
                listed = marks.setdefault(table, [])
                listed.extend(c for c in columns if c not in listed)
        return {t: c for t, c in marks.items() if c}

    # -- checking --------------------------------------------------------------------------------
    def plans(self, conn: psycopg.Connection[Any]) -> tuple[dict[str, Plan], list[Problem]]:
        """Every subject's walk resolved against the database, and every coverage problem."""
        catalog = read_catalog(conn, self.schema)
        marks, bad = marked_columns(catalog, self.declared_marks())
        plans = {name: plan(s, self.schema, catalog) for name, s in self.subjects.items()}
        return plans, [*bad, *problems(list(plans.values()), marks)]

    def check(self, conn: psycopg.Connection[Any]) -> list[Problem]:
        """Every coverage problem (empty when exports and erases may run)."""
        return self.plans(conn)[1]

    def _plan(self, conn: psycopg.Connection[Any], subject: Subject) -> Plan:
        plans, found = self.plans(conn)
        if found:
            first = found[0].error()
            more = f" (and {len(found) - 1} more: forklift subjects check)" if len(found) > 1 else ""
            raise type(first)(first.message + more, **first.detail)
        return plans[subject.name]

    # -- running ---------------------------------------------------------------------------------
    def export_now(self, conn: psycopg.Connection[Any], subject: Subject | str,
                   key: Any) -> dict[str, Any]:
        """The subject's document, read in one repeatable-read snapshot on ``conn`` (or in the
        transaction ``conn`` has open); raises a :class:`SubjectError` before reading a row when
        coverage has a problem."""
        chosen = self._subject(subject)
        idle = conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        with conn.transaction():
            if idle:  # a transaction of its own: one snapshot for every table
                conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            return export_document(conn, self._plan(conn, chosen), key)

    def erase_now(self, conn: psycopg.Connection[Any], subject: Subject | str, key: Any,
                  audit_target: dict[str, Any] | None = None) -> dict[str, dict[str, Any]]:
        """Erase one person in one transaction on ``conn``, audited; per table, what was done.
        Raises a :class:`SubjectError` before touching a row when coverage has a problem."""
        chosen = self._subject(subject)
        target = {"subject": chosen.name, **(audit_target or {})}
        with conn.transaction():
            tables = erase_rows(conn, self._plan(conn, chosen), key)
            for hook in self.erase_hooks:
                hook(conn, chosen, key)
            audit.record(conn, self.app.schema, {**target, "tables": tables},
                         sum(t["rows"] for t in tables.values()), "done")
        return tables

    def _subject(self, subject: Subject | str) -> Subject:
        name = subject if isinstance(subject, str) else subject.name
        try:
            return self.subjects[name]
        except KeyError:
            raise ConfigError(f"no subject named {name!r} is declared", field="subject") from None

    # -- the kinds -------------------------------------------------------------------------------
    def export_kind(self, subject: Subject, *, name: str | None = None,
                    sink: Sink | None = None) -> JobKind[SubjectRef, dict[str, Any]]:
        """A kind exporting one person: payload ``{"key": ...}``; result the document, or with
        ``sink`` (called in the export's transaction) the tables' row counts."""
        chosen = self._subject(subject)

        def export(ctx: JobContext, ref: SubjectRef) -> dict[str, Any]:
            with self.app.pool().connection() as conn:
                try:
                    document = self.export_now(conn, chosen, ref.key)
                except SubjectError as exc:
                    raise Fail(exc.code, exc.message) from None
                if sink is None:
                    return document
                with conn.transaction():
                    sink(document, conn)
            return {"subject": chosen.name,
                    "tables": {t: len(rows) for t, rows in document["tables"].items()}}

        kind: JobKind[SubjectRef, dict[str, Any]] = self.app.job(
            name=name or f"subjects.{chosen.name}.export", queue=self.queue,
            failure_codes=REFUSAL_CODES, max_attempts=5)(export)
        return kind

    def erase_kind(self, subject: Subject, *,
                   name: str | None = None) -> JobKind[SubjectRef, dict[str, Any]]:
        """A kind erasing one person in one transaction, audited (subject kind, job, attempt,
        rows; never the key), and idempotent: running it again changes nothing."""
        chosen = self._subject(subject)

        def erase(ctx: JobContext, ref: SubjectRef) -> dict[str, Any]:
            target = {"job": ctx.job_id, "attempt": ctx.attempt}
            with self.app.pool().connection() as conn:
                try:
                    tables = self.erase_now(conn, chosen, ref.key, target)
                except SubjectError as exc:
                    self._audit_failure(conn, chosen, target, "refused", exc.code)
                    raise Fail(exc.code, exc.message) from None
                except Exception as exc:
                    self._audit_failure(conn, chosen, target, "failed", type(exc).__name__)
                    raise
            return {"subject": chosen.name, "tables": tables}

        kind: JobKind[SubjectRef, dict[str, Any]] = self.app.job(
            name=name or f"subjects.{chosen.name}.erase", queue=self.queue,
            failure_codes=REFUSAL_CODES, max_attempts=10)(erase)
        return kind

    def _audit_failure(self, conn: psycopg.Connection[Any], subject: Subject,
                       target: dict[str, Any], outcome: str, why: str) -> None:
        """The attempt that did not erase is on record too, in a transaction of its own (the
        erase's rolled back); a failure to write it must not hide the erase's own error."""
        try:
            with conn.transaction():
                audit.record(conn, self.app.schema,
                             {"subject": subject.name, **target, "error": why}, 0, outcome)
        except psycopg.Error as db_exc:
            log.warning("subject %s: the %s erase could not be audited (%s)", subject.name,
                        outcome, type(db_exc).__name__)
