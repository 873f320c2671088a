"""Reading jobs for operators."""

from __future__ import annotations

from typing import Any

import psycopg

from forklift.errors import JobNotFound
from forklift.job import JOB_COLUMNS, Job
from forklift.sqltext import render

GET_SQL = "SELECT " + JOB_COLUMNS + " FROM {s}.jobs WHERE id = %s"


def get_job(conn: psycopg.Connection[Any], schema: str, job_id: int) -> Job:
    row = conn.execute(render(GET_SQL, schema), (job_id,)).fetchone()
    if row is None:
        raise JobNotFound(f"no job with id {job_id}", job_id=job_id)
    return Job.from_row(row)


def count_by_state(
    conn: psycopg.Connection[Any], schema: str, ids: list[int] | None = None
) -> dict[str, int]:
    """Jobs per state, over the whole table or the given ids (small tables and demos only)."""
    if ids is None:
        rows = conn.execute(render("SELECT state, count(*) FROM {s}.jobs GROUP BY state", schema))
    else:
        rows = conn.execute(
            render("SELECT state, count(*) FROM {s}.jobs WHERE id = ANY(%s) GROUP BY state", schema),
            (ids,),
        )
    return {str(s): int(n) for s, n in rows}
