"""Partitioned history for tools and operator reads (see forklift._features.history).

    from forklift.ops import history
    history.enable(conn, "forklift")              # what `forklift migrate --partitioned-history` does
    sql = history.render_read("SELECT count(*) FROM {s}.jobs WHERE state = 'dead'", conn, "forklift")

:func:`render_read` is the one place operator reads learn where job history lives: the jobs
table, or (partitioned) the jobs table and ``jobs_history`` as one relation. :func:`restore`
moves jobs back from history before an action changes them.
"""

from __future__ import annotations

from forklift._features.history import enable, partitioned, render_read, restore, source

__all__ = ["enable", "partitioned", "render_read", "restore", "source"]
