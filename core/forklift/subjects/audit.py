"""The erase's audit row: which subject kind, which job and attempt, how many rows, and the
outcome, written in the erase's own transaction. Never the subject's key, which an app may make
an email address: the job id leads to it for as long as the job row is kept."""

from __future__ import annotations

import json
from typing import Any

import psycopg
from psycopg import sql

__all__ = ["ACTION", "ACTOR", "record"]

ACTOR = "forklift.subjects"
ACTION = "subject.erase"


def record(conn: psycopg.Connection[Any], schema: str, target: dict[str, Any], count: int,
           outcome: str) -> None:
    """Append one row to forklift's audit trail on ``conn`` (inside the caller's transaction)."""
    conn.execute(
        sql.SQL("INSERT INTO {} (actor, action, target, count, outcome)"
                " VALUES (%s, %s, %s::jsonb, %s, %s)").format(sql.Identifier(schema, "audit")),
        (ACTOR, ACTION, json.dumps(target), count, outcome),
    )
