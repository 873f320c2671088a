"""Compacted SQL: the hot path's long statements stay within psycopg's conversion cache."""

from __future__ import annotations

import pytest
from psycopg import _queries

from forklift._db.sqltext import compact, render
from forklift._features.flow.handoff import statement
from forklift._worker import settle


def test_compact_drops_comments_and_layout_but_not_quoted_text() -> None:
    text = """
    SELECT 'a -- b' , x   -- the worker's buffer ("quoted" in a comment)
      FROM "we--ird"  ( y ) WHERE z = 'it''s  two'  -- end
    """
    assert compact(text) == "SELECT 'a -- b',x FROM \"we--ird\"(y)WHERE z='it''s  two'"


@pytest.mark.parametrize("text", ["SELECT $$x$$", "SELECT E'a\\nb'", "SELECT e'x'"])
def test_compact_refuses_what_it_cannot_read(text: str) -> None:
    with pytest.raises(ValueError, match="dollar-quoted or E''"):
        compact(text)


def test_compact_keeps_a_literal_ending_in_e() -> None:
    assert compact("SELECT 'type'  ,  'e'") == "SELECT 'type','e'"


@pytest.mark.parametrize("settle_sql", [settle.COMPLETE_SQL, settle.SETTLE_SQL],
                         ids=["complete", "settle"])
def test_the_handoff_is_converted_once(settle_sql: str) -> None:
    """A statement longer than psycopg caches is parsed again, in Python, at every execute:
    about a tenth of a flow worker's py-spy samples when the hand-off was 4,829 bytes."""
    sql = statement(render(settle_sql, "forklift"), "forklift").encode()
    assert len(sql) <= _queries.MAX_CACHED_STATEMENT_LENGTH  # psycopg's own limit
    assert b"--" not in sql
