"""A subject's walk resolved against the database: one step per table, each knowing how to
select the subject's rows, and the declaration problems found on the way."""

from __future__ import annotations

from dataclasses import dataclass

from psycopg import sql

from forklift.subjects.catalog import Catalog
from forklift.subjects.errors import SubjectDeclarationInvalid
from forklift.subjects.problem import Problem
from forklift.subjects.step import Step
from forklift.subjects.subject import Subject

__all__ = ["Plan", "plan"]

INVALID = SubjectDeclarationInvalid.code


@dataclass(frozen=True)
class Plan:
    subject: Subject
    schema: str
    steps: tuple[Step, ...]
    problems: tuple[Problem, ...]

    def rows_of(self, index: int) -> sql.Composable:
        """``WHERE`` condition selecting step ``index``'s rows; binds ``%(key)s``."""
        step = self.steps[index]
        if step.parent is None:
            return sql.SQL("{} = %(key)s").format(sql.Identifier(step.via))
        parent = self.steps[step.parent]
        assert step.parent_key is not None
        return sql.SQL("{} IN (SELECT {} FROM {} WHERE {})").format(
            sql.Identifier(step.via), sql.Identifier(step.parent_key), self.table(parent.table),
            self.rows_of(step.parent))

    def table(self, name: str) -> sql.Composable:
        return sql.Identifier(self.schema, name)


def _walk_key(catalog: Catalog, subject: Subject, table: str, parent: str,
              via: str | None, parent_key: str | None) -> tuple[str, str] | Problem:
    """The (via, parent_key) pair joining ``table`` to ``parent``, or why there is none."""
    if via is not None:
        return via, parent_key or (subject.key if parent == subject.table else "id")
    keys = catalog.foreign_keys.get((table, parent), [])
    if parent_key is not None:
        keys = [k for k in keys if k[1] == parent_key]
    if len(keys) == 1:
        return keys[0]
    why = "no foreign key" if not keys else f"{len(keys)} foreign keys"
    return Problem(INVALID, table,
                   f"subject {subject.name!r}: table {table!r} has {why} to {parent!r}; name the"
                   " column with via=", subject=subject.name)


def plan(subject: Subject, schema: str, catalog: Catalog) -> Plan:
    problems: list[Problem] = []
    steps: list[Step] = []
    index: dict[str, int] = {}

    def missing(table: str, column: str | None, what: str) -> bool:
        if catalog.has(table, column):
            return False
        thing = f"table {table!r}" if column is None else f"column {table}.{column}"
        problems.append(Problem(INVALID, table, f"subject {subject.name!r}: {what} {thing} does"
                                f" not exist in schema {schema!r}",
                                columns=() if column is None else (column,),
                                subject=subject.name))
        return True

    if not missing(subject.table, None, "its") and not missing(subject.table, subject.key, "its key"):
        index[subject.table] = len(steps)
        steps.append(Step(subject.table, subject.erase, subject.key))
    for reach in subject.reaches:
        parent = reach.parent or subject.table
        if parent not in index or missing(reach.table, None, "reached"):
            continue
        got = _walk_key(catalog, subject, reach.table, parent, reach.via, reach.parent_key)
        if isinstance(got, Problem):
            problems.append(got)
            continue
        via, parent_key = got
        if missing(reach.table, via, "the walk's") or missing(parent, parent_key, "the walk's"):
            continue
        index[reach.table] = len(steps)
        steps.append(Step(reach.table, reach.erase, via, index[parent], parent_key))
    keys = {(s.table, s.via) for s in steps} | {
        (steps[s.parent].table, s.parent_key) for s in steps if s.parent is not None}
    for step in steps:
        for column in sorted(step.treatment.erased_columns):
            if missing(step.table, column, "anonymized"):
                continue
            if (step.table, column) in keys:
                problems.append(Problem(
                    INVALID, step.table, f"subject {subject.name!r}: {step.table}.{column} is a"
                    " key of the walk; anonymizing it would lose the rows it leads to",
                    columns=(column,), subject=subject.name))
    return Plan(subject, schema, tuple(steps), tuple(problems))
