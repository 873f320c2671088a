"""Coverage: every marked column is erased by every subject that reaches its table, and every
marked table is reached by some subject. Marks come from declarations and from column comments.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from forklift.subjects.catalog import Catalog
from forklift.subjects.errors import (
    PersonalDataUnerased,
    PersonalDataUnreached,
    SubjectDeclarationInvalid,
)
from forklift.subjects.plan import Plan
from forklift.subjects.problem import Problem

__all__ = ["marked_columns", "problems"]


def marked_columns(
    catalog: Catalog, declared: Mapping[str, Sequence[str]]
) -> tuple[dict[str, frozenset[str]], list[Problem]]:
    """Every marked column per table (comments and declarations), and the declared marks that
    name a table or column the database does not have."""
    marks: dict[str, set[str]] = {t: set(c) for t, c in catalog.commented.items()}
    bad: list[Problem] = []
    for table, columns in declared.items():
        for column in columns:
            if not catalog.has(table, column):
                bad.append(Problem(SubjectDeclarationInvalid.code, table,
                                   f"column {table}.{column} is marked as personal data but does"
                                   " not exist", columns=(column,)))
                continue
            marks.setdefault(table, set()).add(column)
    return {t: frozenset(c) for t, c in marks.items()}, bad


def problems(plans: Sequence[Plan], marks: Mapping[str, frozenset[str]]) -> list[Problem]:
    """The walk's own problems, then unerased and unreached personal data, in table order."""
    found: list[Problem] = [p for plan in plans for p in plan.problems]
    reached: set[str] = set()
    for plan in plans:
        for step in plan.steps:
            reached.add(step.table)
            left = step.treatment.covers(marks.get(step.table, frozenset()))
            if left:
                found.append(Problem(
                    PersonalDataUnerased.code, step.table,
                    f"subject {plan.subject.name!r} anonymizes {step.table} without its marked"
                    f" column{'s' if len(left) > 1 else ''} {', '.join(sorted(left))}: an erase"
                    " would leave them", columns=tuple(sorted(left)), subject=plan.subject.name))
    for table in sorted(marks):
        if table not in reached and marks[table]:
            found.append(Problem(
                PersonalDataUnreached.code, table,
                f"table {table} holds personal data ({', '.join(sorted(marks[table]))}) and no"
                " subject reaches it", columns=tuple(sorted(marks[table]))))
    return found
