"""What an export and an erase do to the app's tables, on a connection the caller gives, once
coverage is clean. The jobs (forklift.subjects.registry) add the transaction and the audit."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import psycopg
from psycopg import sql

from forklift.subjects.plan import Plan

__all__ = ["erase_rows", "export_document"]


def export_document(conn: psycopg.Connection[Any], plan: Plan, key: Any) -> dict[str, Any]:
    """One JSON document of the subject's rows: every reached table, whole rows, in key order
    of the walk (retained tables included: they are the person's data too)."""
    tables: dict[str, list[Any]] = {}
    for index, step in enumerate(plan.steps):
        query = sql.SQL("SELECT to_jsonb(t) FROM {} AS t WHERE {} ORDER BY {}").format(
            plan.table(step.table), plan.rows_of(index), sql.Identifier(step.via))
        tables[step.table] = [row[0] for row in conn.execute(query, {"key": key})]
    return {"subject": plan.subject.name, "key": key,
            "exported_at": datetime.now(UTC).isoformat(), "tables": tables}


def erase_rows(conn: psycopg.Connection[Any], plan: Plan, key: Any) -> dict[str, dict[str, Any]]:
    """Apply each table's treatment, the deepest tables first (a child row goes before the row
    it references). Returns per table the action and how many rows it changed: a second erase
    of the same person changes none. The root rows are locked first, so two erases of one
    person run one after the other."""
    if not plan.steps:
        return {}
    conn.execute(sql.SQL("SELECT 1 FROM {} WHERE {} FOR UPDATE").format(
        plan.table(plan.steps[0].table), plan.rows_of(0)), {"key": key}).fetchall()
    done: dict[str, dict[str, Any]] = {}
    for index in reversed(range(len(plan.steps))):
        step = plan.steps[index]
        treatment = step.treatment
        where = plan.rows_of(index)
        params: dict[str, Any] = {"key": key}
        if treatment.action == "delete":
            cur = conn.execute(sql.SQL("DELETE FROM {} WHERE {}").format(
                plan.table(step.table), where), params)
            count = cur.rowcount
        elif treatment.action == "anonymize":
            sets, changed = [], []
            for n, (column, value) in enumerate(sorted(treatment.values.items())):
                params[f"v{n}"] = value
                sets.append(sql.SQL("{} = {}").format(sql.Identifier(column),
                                                      sql.Placeholder(f"v{n}")))
                changed.append(sql.SQL("{} IS DISTINCT FROM {}").format(
                    sql.Identifier(column), sql.Placeholder(f"v{n}")))
            cur = conn.execute(sql.SQL("UPDATE {} SET {} WHERE {} AND ({})").format(
                plan.table(step.table), sql.SQL(", ").join(sets), where,
                sql.SQL(" OR ").join(changed)), params)
            count = cur.rowcount
        else:
            count = 0
        done[step.table] = {**treatment.to_json(), "rows": count}
    return dict(reversed(list(done.items())))
