"""A search reindex on real tables: a run racing real writer threads ends with the index equal
to the table; a replayed page never overwrites a newer document nor brings a deleted row back;
the sweep removes the documents of rows that are gone or moved tenant."""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from apps.basic import running_worker
from helpers import wait_until

from forklift import ConfigError, Forklift
from forklift.ops import backfills as ops
from forklift.ops.context import OpsContext
from forklift.reindex import Document, Listed, PgSearchIndex, Reindex, reindex
from forklift.testing import drain

OPS = OpsContext(schema="forklift", actor="tester")
ROWS = 300

TABLE = """
CREATE SEQUENCE public.post_versions;
CREATE TABLE public.posts (
    id bigint PRIMARY KEY, org text NOT NULL, title text NOT NULL, body text,
    version bigint NOT NULL DEFAULT nextval('public.post_versions'));
INSERT INTO public.posts (id, org, title, body)
SELECT i, 'org' || (i % 3), 'title ' || i, 'body of post ' || i FROM generate_series(1, {rows}) i;
"""


class Blog:
    def __init__(self, dsn: str, conn: psycopg.Connection[Any], page_size: int = 10) -> None:
        self.app = Forklift(dsn)
        self.index = PgSearchIndex("posts_search")
        self.index.create(conn)
        self.rx: Reindex = reindex(self.app, "posts.reindex", table="posts", version="version",
                                   searchable=["title", "body"], tenant="org", index=self.index,
                                   page_size=page_size, rate=40.0)

    # The app's own writes: the row and its document in one transaction.
    def update(self, conn: psycopg.Connection[Any], post: int, title: str) -> None:
        with conn.transaction():
            if conn.execute("UPDATE public.posts SET title = %s,"
                            " version = nextval('public.post_versions') WHERE id = %s",
                            (title, post)).rowcount:
                self.rx.index_rows(conn, [post])

    def delete(self, conn: psycopg.Connection[Any], post: int) -> None:
        with conn.transaction():
            row = conn.execute("DELETE FROM public.posts WHERE id = %s RETURNING version",
                               (post,)).fetchone()
            if row is not None:
                self.rx.remove(conn, post, row[0])

    def insert(self, conn: psycopg.Connection[Any], post: int, org: str) -> None:
        with conn.transaction():
            conn.execute("INSERT INTO public.posts (id, org, title, body) VALUES (%s, %s, %s, 'new')"
                         " ON CONFLICT (id) DO NOTHING", (post, org, f"new {post}"))
            self.rx.index_rows(conn, [post])


@pytest.fixture
def blog(dsn: str, conn: psycopg.Connection[Any]) -> Iterator[Blog]:
    conn.execute(TABLE.format(rows=ROWS))
    b = Blog(dsn, conn)
    yield b
    b.app.close()


def table_docs(conn: psycopg.Connection[Any]) -> list[tuple[Any, ...]]:
    return conn.execute(
        "SELECT id::text, version, org, jsonb_build_object('title', title, 'body', body)"
        " FROM public.posts ORDER BY 1").fetchall()


def index_docs(conn: psycopg.Connection[Any]) -> list[tuple[Any, ...]]:
    return conn.execute("SELECT id, version, tenant, document FROM public.posts_search"
                        " WHERE NOT deleted ORDER BY 1").fetchall()


def lose_data(conn: psycopg.Connection[Any], blog: Blog) -> None:
    """An index that missed writes: half the rows absent, some documents older than their row,
    and documents of rows deleted while it was down."""
    blog.index.put(conn, [Document(str(i), 0, {"title": "stale"}, "stale", "org0")
                          for i in range(1, ROWS + 1, 5)])
    blog.index.put(conn, [Document(str(i), 10**6, {"title": "ghost"}, "ghost", "org1")
                          for i in range(10_001, 10_040)])


def test_a_reindex_racing_writers_and_deletes_ends_with_the_index_equal_to_the_table(
        dsn: str, conn: psycopg.Connection[Any], blog: Blog) -> None:
    lose_data(conn, blog)
    done = threading.Event()
    writes = [0, 0]
    failures: list[BaseException] = []

    def writer(n: int) -> None:
        rnd = random.Random(n)
        try:
            with psycopg.connect(dsn, autocommit=True) as own:
                while not done.is_set():
                    post = rnd.randint(1, ROWS + 60)
                    choice = rnd.random()
                    if choice < 0.5:
                        blog.update(own, post, f"edited by {n} #{writes[n]}")
                    elif choice < 0.75:
                        blog.delete(own, post)
                    else:
                        blog.insert(own, post, f"org{rnd.randint(0, 2)}")
                    writes[n] += 1
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(2)]
    for t in threads:
        t.start()
    try:
        wait_until(lambda: min(writes) > 20, timeout=30, message="the writers did not start")
        with running_worker(blog.app, concurrency=2, leader_interval=0.1):
            started = ops.start(conn, OPS, "posts.reindex", definition=blog.app.backfills["posts.reindex"])
            assert started.outcome == "started"
            before = list(writes)
            wait_until(lambda: ops.get_backfill(conn, OPS, "posts.reindex").state == "completed",
                       timeout=60, message=lambda: str(ops.get_backfill(conn, OPS, "posts.reindex")))
            during = [b - a for a, b in zip(before, writes, strict=True)]
    finally:
        done.set()
        for t in threads:
            t.join(timeout=30)
    assert not failures, failures
    assert min(during) > 0, "the writers did not race the reindex"
    run = ops.get_backfill(conn, OPS, "posts.reindex")
    assert run.pages_done > ROWS // 10  # both phases, page by page
    assert index_docs(conn) == table_docs(conn)
    assert not conn.execute("SELECT count(*) FROM public.posts_search WHERE NOT deleted AND"
                            " document->>'title' IN ('stale', 'ghost')").fetchone()[0]  # type: ignore[index]


def test_a_replayed_page_never_overwrites_a_newer_document_or_resurrects_a_deleted_row(
        conn: psycopg.Connection[Any], blog: Blog) -> None:
    page, cursor = blog.rx.read(None, 20, conn)
    assert cursor == {"phase": "rows", "after": "20"} and len(page) == 20
    blog.rx.process(page, conn)
    blog.update(conn, 3, "newer title")
    blog.delete(conn, 4)
    for _ in range(2):  # the page again, as after a crash before its checkpoint
        blog.rx.process(page, conn)
    docs = {i: (v, d) for i, v, _, d in index_docs(conn)}
    assert docs["3"][1]["title"] == "newer title"
    assert "4" not in docs
    assert len(docs) == 19

    # A sweep page listed before post 7 was deleted and written again: the newer one stays.
    listed = blog.index.listed(conn, None, 100)
    blog.delete(conn, 7)
    blog.insert(conn, 7, "org2")
    blog.delete(conn, 8)  # and one deleted for good: its removal stands
    blog.rx.process(listed, conn)
    docs = {i: (v, d) for i, v, _, d in index_docs(conn)}
    assert docs["7"][1]["title"] == "new 7"
    assert "8" not in docs
    assert blog.rx.gone(conn, [Listed("7", 1, "org2"), Listed("8", 1, "org2"),
                               Listed("9", 1, "org1"), Listed("10", 1, "org1")]) == [
        Listed("8", 1, "org2"), Listed("9", 1, "org1")]  # 9 is org0's now: moved tenant


def test_the_sweep_removes_documents_whose_row_is_gone_or_moved_tenant(
        conn: psycopg.Connection[Any], blog: Blog) -> None:
    blog.rx.process(blog.rx.read(None, ROWS, conn)[0], conn)
    # Behind the index's back: a row deleted, a row moved tenant (version unchanged).
    conn.execute("DELETE FROM public.posts WHERE id = 11")
    conn.execute("UPDATE public.posts SET org = 'elsewhere' WHERE id = 12")
    cursor: Any = {"phase": "sweep", "after": None}
    while cursor is not None:
        items, cursor = blog.rx.read(cursor, 50, conn)
        if items:
            blog.rx.process(items, conn)
    left = {i for i, *_ in index_docs(conn)}
    assert "11" not in left and "12" not in left and len(left) == ROWS - 2
    assert blog.index.search(conn, "post 13")[0][0] == "13"
    assert [i for i, _ in blog.index.search(conn, "title", tenant="org0", limit=500)] == sorted(
        str(i) for i in range(3, ROWS + 1, 3) if i != 12)


def test_a_declaration_naming_a_missing_column_is_refused(dsn: str,
                                                         conn: psycopg.Connection[Any]) -> None:
    conn.execute(TABLE.format(rows=3))
    app = Forklift(dsn)
    try:
        bad = reindex(app, "posts.bad", table="posts", version="version",
                      searchable=["title", "summary"])
        with pytest.raises(ConfigError, match="summary"):
            bad.read(None, 10, conn)
        with pytest.raises(ConfigError, match="searchable"):
            reindex(app, "posts.none", table="posts", version="version", searchable=[])
    finally:
        app.close()


def test_a_run_for_one_tenant_rebuilds_and_sweeps_only_that_tenant(
        conn: psycopg.Connection[Any], blog: Blog) -> None:
    blog.index.put(conn, [Document("20001", 5, {"title": "ghost"}, "ghost", "org1"),
                          Document("20002", 5, {"title": "ghost"}, "ghost", "org2")])
    started = ops.start(conn, OPS, "posts.reindex", from_cursor={"tenant": "org1"},
                        definition=blog.app.backfills["posts.reindex"])
    assert started.outcome == "started"
    drain(blog.app, "backfills", timeout=60)
    assert ops.get_backfill(conn, OPS, "posts.reindex").state == "completed"
    indexed = {(i, t) for i, _, t, _ in index_docs(conn)}
    org1 = {(i, t) for i, _, t, _ in table_docs(conn) if t == "org1"}
    assert indexed == org1 | {("20002", "org2")}  # org2's ghost is not this run's to sweep

    with pytest.raises(ConfigError, match="no tenant column"):
        Reindex(blog.app, "untenanted", table="posts", version="version",
                searchable=["title"]).read({"tenant": "org1"}, 10, conn)


def test_another_searchable_column_shows_as_code_changed(
        dsn: str, conn: psycopg.Connection[Any], blog: Blog) -> None:
    """A completed reindex declared again with other searchable columns: `backfills start`
    says its code changed (the index needs every row again); the same declaration does not."""
    assert ops.start(conn, OPS, "posts.reindex",
                     definition=blog.app.backfills["posts.reindex"]).outcome == "started"
    drain(blog.app, "backfills", timeout=60)
    assert ops.get_backfill(conn, OPS, "posts.reindex").state == "completed"

    def start_again(searchable: list[str]) -> Any:
        app = Forklift(dsn)
        try:
            again = reindex(app, "posts.reindex", table="posts", version="version",
                            searchable=searchable, tenant="org", index=blog.index)
            return ops.start(conn, OPS, "posts.reindex", definition=app.backfills[again.name])
        finally:
            app.close()

    same = start_again(["title", "body"])
    assert (same.outcome, same.changed) == ("completed", False), same
    other = start_again(["title"])
    assert (other.outcome, other.changed) == ("completed", True), other
    assert "code changed" in other.message
