"""A two-phase search reindex over an application table.

:func:`reindex` declares it as a paced backfill (``forklift backfills start NAME``): the rows
phase sends each row's document to a :class:`SearchIndex`, the sweep removes the documents of
rows that are gone or moved tenant. :class:`PgSearchIndex`, a PostgreSQL full-text table, is
the default index. The index keeps only the newer version of each id, so neither a replayed
page nor a stale read overwrites a newer document or brings a deleted row back.
"""

from forklift.reindex.document import Document
from forklift.reindex.listed import Listed
from forklift.reindex.pg_index import PgSearchIndex
from forklift.reindex.reindex import Reindex, reindex
from forklift.reindex.search_index import SearchIndex

__all__ = ["Document", "Listed", "PgSearchIndex", "Reindex", "SearchIndex", "reindex"]
