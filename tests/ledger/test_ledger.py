"""Postings on a real table: balanced, unbalanced, multi-currency, replayed and conflicting,
and a storm of concurrent and repeated enqueues run by two real workers, after which every
currency of the book sums to zero and every key holds its lines once."""

from __future__ import annotations

import asyncio
import random
import threading
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from apps.basic import running_worker
from helpers import wait_until

from forklift import EnqueueRefused, Forklift
from forklift.ledger import (
    InvalidPosting,
    LedgerKind,
    PostingConflict,
    TableBook,
    UnbalancedPosting,
    assert_balanced,
    ledger,
)


def posting(key: str, *lines: tuple[str, int, str], tenant: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"key": key, "entries": [
        {"account": account, "amount": {"minor": minor, "currency": currency}}
        for account, minor, currency in lines]}
    if tenant is not None:
        out["tenant"] = tenant
    return out


PAY = posting("pay_1", ("cash", 1299, "EUR"), ("revenue", -1099, "EUR"), ("vat", -200, "EUR"))


@pytest.fixture
def app(dsn: str) -> Iterator[Forklift]:
    fl = Forklift(dsn, pool_size=8)
    try:
        yield fl
    finally:
        fl.close()


@pytest.fixture
def book(conn: psycopg.Connection[Any]) -> TableBook:
    made = TableBook.named("public.ledger_lines")
    made.create(conn)
    return made


@pytest.fixture
def payments(app: Forklift, book: TableBook) -> LedgerKind:
    return ledger(app, name="payments.post", book=book)


def lines(conn: psycopg.Connection[Any], key: str | None = None) -> list[tuple[Any, ...]]:
    where = "" if key is None else " WHERE posting_key = %s"
    return conn.execute(
        "SELECT tenant, posting_key, line, account, currency, amount_minor FROM"
        f" public.ledger_lines{where} ORDER BY tenant, posting_key, line",
        () if key is None else (key,)).fetchall()


def job_state(conn: psycopg.Connection[Any], job_id: int) -> dict[str, Any]:
    row = conn.execute("SELECT state, result, errors FROM forklift.jobs WHERE id = %s",
                       (job_id,)).fetchone()
    assert row is not None
    return {"state": row[0], "result": row[1], "errors": row[2]}


def finished(conn: psycopg.Connection[Any], ids: list[int]) -> bool:
    row = conn.execute("SELECT count(*) FROM forklift.jobs WHERE id = ANY(%s) AND state IN"
                       " ('completed', 'dead', 'cancelled')", (ids,)).fetchone()
    return row is not None and row[0] == len(ids)


# -- the checks, before anything is written ------------------------------------------------------
@pytest.mark.parametrize(("bad", "field", "reason"), [
    (posting("k", ("cash", 100, "EUR")), "entries", "too_few"),
    (posting("k", ("cash", 100, "EUR"), ("  ", -100, "EUR")), "entries[1].account", "blank"),
    (posting(" ", ("cash", 100, "EUR"), ("bank", -100, "EUR")), "key", "blank"),
    (posting("k", ("cash", 100, "EUR"), ("bank", -100, "EURO")), "entries[1].amount.currency",
     "unknown_currency"),
    (posting("k", ("cash", 100, "eur"), ("bank", -100, "eur")), "entries[0].amount.currency",
     "unknown_currency"),
    (posting("k", ("cash", 2**63, "EUR"), ("bank", -(2**63), "EUR")), "entries[0].amount.minor",
     "out_of_range"),
    ({"key": "k", "entries": [{"account": "cash", "amount": {"minor": 1.5, "currency": "EUR"}},
                              {"account": "bank", "amount": {"minor": -1.5, "currency": "EUR"}}]},
     "entries[0].amount.minor", "int_type"),
    ({"key": "k", "entries": [{"account": "cash", "amount": {"minor": "100", "currency": "EUR"}},
                              {"account": "bank", "amount": {"minor": -100, "currency": "EUR"}}]},
     "entries[0].amount.minor", "int_type"),
    (posting("k", ("cash", 100, "EUR"), ("bank", -100, "EUR"), tenant=""), "tenant", "blank"),
    ({"key": "k", "entries": [{"account": "cash", "amount": {"minor": 1, "currency": "EUR"},
                               "memo": "x"},
                              {"account": "bank", "amount": {"minor": -1, "currency": "EUR"}}]},
     "entries[0].memo", "extra_forbidden"),
])
def test_a_posting_that_is_not_money_is_refused_naming_the_field(
        bad: dict[str, Any], field: str, reason: str) -> None:
    with pytest.raises(InvalidPosting) as caught:
        assert_balanced(bad)
    assert caught.value.code == "ledger_entry_invalid"
    assert (caught.value.detail["field"], caught.value.detail["reason"]) == (field, reason)
    assert isinstance(caught.value, EnqueueRefused)


def test_each_currency_balances_on_its_own() -> None:
    fx = posting("fx_1", ("eur-cash", -1000, "EUR"), ("fx", 1000, "EUR"),
                 ("fx", -1085, "USD"), ("usd-cash", 1085, "USD"))
    assert assert_balanced(fx).key == "fx_1"
    netted = posting("fx_2", ("eur-cash", -1000, "EUR"), ("usd-cash", 1000, "USD"))
    with pytest.raises(UnbalancedPosting) as caught:
        assert_balanced(netted)
    assert caught.value.code == "ledger_unbalanced"
    assert caught.value.detail["sums"] == {"EUR": -1000, "USD": 1000}


# -- through the kind, on a real table ---------------------------------------------------------
def test_an_unbalanced_posting_is_refused_at_enqueue_and_stores_nothing(
        payments: LedgerKind, conn: psycopg.Connection[Any]) -> None:
    with pytest.raises(UnbalancedPosting):
        payments.enqueue(posting("pay_x", ("cash", 100, "EUR"), ("revenue", -99, "EUR")))
    assert conn.execute("SELECT count(*) FROM forklift.jobs").fetchone() == (0,)
    assert lines(conn) == []


def test_enqueue_returns_the_live_job_joins_the_callers_transaction_and_has_an_async_twin(
        payments: LedgerKind, dsn: str, conn: psycopg.Connection[Any]) -> None:
    first = payments.enqueue(PAY)
    assert payments.enqueue(PAY).id == first.id  # live: the same job, not a second one
    assert payments.enqueue({**PAY, "tenant": "acme"}).id != first.id
    with psycopg.connect(dsn) as mine:
        payments.enqueue({**PAY, "key": "pay_2"}, conn=mine)
        mine.rollback()
    assert asyncio.run(payments.enqueue_async(PAY)).id == first.id
    assert conn.execute("SELECT args->>'key', args->>'tenant' FROM forklift.jobs ORDER BY id"
                        ).fetchall() == [("pay_1", None), ("pay_1", "acme")]


def test_a_job_enqueued_by_name_that_does_not_balance_dies_terminally_writing_nothing(
        app: Forklift, payments: LedgerKind, conn: psycopg.Connection[Any]) -> None:
    # app.enqueue validates the shape only: the kind's run is the last line of defence.
    job = app.enqueue("payments.post", posting("pay_x", ("cash", 100, "EUR"),
                                               ("revenue", -99, "EUR")))
    with running_worker(app, concurrency=2):
        wait_until(lambda: finished(conn, [job.id]), timeout=30, message="the job ended")
    state = job_state(conn, job.id)
    assert state["state"] == "dead"
    assert [e["code"] for e in state["errors"]] == ["ledger_unbalanced"]
    assert lines(conn) == []


def test_a_balanced_multi_currency_posting_is_written_once_in_order(
        app: Forklift, payments: LedgerKind, conn: psycopg.Connection[Any]) -> None:
    fx = posting("fx_1", ("eur-cash", -1000, "EUR"), ("fx", 1000, "EUR"),
                 ("fx", -1085, "USD"), ("usd-cash", 1085, "USD"))
    job = payments.enqueue(fx)
    with running_worker(app, concurrency=2):
        wait_until(lambda: finished(conn, [job.id]), timeout=30, message="the job ended")
    state = job_state(conn, job.id)
    assert state["state"] == "completed"
    assert state["result"] == {"key": "fx_1", "tenant": None, "lines": 4, "written": True}
    assert lines(conn) == [("", "fx_1", 0, "eur-cash", "EUR", -1000),
                           ("", "fx_1", 1, "fx", "EUR", 1000),
                           ("", "fx_1", 2, "fx", "USD", -1085),
                           ("", "fx_1", 3, "usd-cash", "USD", 1085)]
    check = TableBook.named("public.ledger_lines").check(conn)
    assert check.balanced
    assert [(c.currency, c.total, c.lines, c.postings) for c in check.currencies] == [
        ("EUR", 0, 2, 1), ("USD", 0, 2, 1)]


def test_a_replay_posts_nothing_new_and_a_conflict_writes_nothing(
        payments: LedgerKind, conn: psycopg.Connection[Any]) -> None:
    first = payments.post(PAY)
    again = payments.post(PAY)
    assert (first.written, again.written) == (True, False)
    stored = lines(conn)
    other = posting("pay_1", ("cash", 1299, "EUR"), ("revenue", -1299, "EUR"))
    longer = posting("pay_1", *[(e["account"], e["amount"]["minor"], e["amount"]["currency"])
                                for e in PAY["entries"]], ("x", 0, "EUR"))
    for conflicting in (other, longer):
        with pytest.raises(PostingConflict) as caught:
            payments.post(conflicting)
        assert caught.value.code == "ledger_posting_conflict"
        assert caught.value.detail == {"key": "pay_1", "tenant": None}
    assert lines(conn) == stored


def test_a_conflict_in_a_job_is_terminal_and_keeps_the_first_posting(
        app: Forklift, payments: LedgerKind, conn: psycopg.Connection[Any]) -> None:
    payments.post(PAY)
    job = payments.enqueue(posting("pay_1", ("cash", 5, "EUR"), ("revenue", -5, "EUR")))
    with running_worker(app, concurrency=2):
        wait_until(lambda: finished(conn, [job.id]), timeout=30, message="the job ended")
    state = job_state(conn, job.id)
    assert (state["state"], [e["code"] for e in state["errors"]]) == (
        "dead", ["ledger_posting_conflict"])
    assert [r[5] for r in lines(conn)] == [1299, -1099, -200]


def test_one_key_is_one_posting_per_tenant(
        app: Forklift, book: TableBook, conn: psycopg.Connection[Any]) -> None:
    open_book = ledger(app, name="any.post", book=book)
    acme = ledger(app, name="acme.post", book=book, tenant="acme")
    assert open_book.post({**PAY, "tenant": "globex"}).written
    assert acme.post(PAY).written  # the kind's tenant fills the posting's
    assert open_book.post(PAY).written  # no tenant is a tenant of its own
    assert not acme.post({**PAY, "tenant": "acme"}).written
    with pytest.raises(InvalidPosting) as caught:
        acme.post({**PAY, "tenant": "globex"})
    assert caught.value.detail["reason"] == "tenant_mismatch"
    assert sorted({r[0] for r in lines(conn)}) == ["", "acme", "globex"]
    assert [c.total for c in book.check(conn, tenant="acme").currencies] == [0]
    assert book.check(conn, tenant="acme").currencies[0].postings == 1


def test_post_joins_the_callers_transaction(payments: LedgerKind, dsn: str,
                                            conn: psycopg.Connection[Any]) -> None:
    with psycopg.connect(dsn) as mine:
        payments.post(PAY, conn=mine)
        mine.rollback()
    assert lines(conn) == []
    with psycopg.connect(dsn) as mine:
        payments.post(PAY, conn=mine)
        mine.commit()
    assert len(lines(conn)) == 3


def test_an_apps_own_table_is_a_book_by_naming_it_and_its_columns(
        app: Forklift, conn: psycopg.Connection[Any]) -> None:
    # The shape a Django model gives: a surrogate id, its own column names, no tenant.
    conn.execute(
        "CREATE TABLE shop_entry (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,"
        " ref text NOT NULL, seq integer NOT NULL, acct text NOT NULL, cur text NOT NULL,"
        " cents bigint NOT NULL, UNIQUE (ref, seq))")
    book = TableBook.named("shop_entry", tenant_column=None, key_column="ref",
                           line_column="seq", account_column="acct", currency_column="cur",
                           amount_column="cents", job_column=None)
    shop = ledger(app, name="shop.post", book=book)
    assert shop.post(PAY).written and not shop.post(PAY).written
    with pytest.raises(InvalidPosting):
        shop.post({**PAY, "tenant": "acme"})
    assert conn.execute("SELECT ref, seq, acct, cur, cents FROM shop_entry ORDER BY seq"
                        ).fetchall() == [("pay_1", 0, "cash", "EUR", 1299),
                                         ("pay_1", 1, "revenue", "EUR", -1099),
                                         ("pay_1", 2, "vat", "EUR", -200)]
    assert book.check(conn).balanced


# -- the storm -----------------------------------------------------------------------------------
def storm_posting(i: int) -> dict[str, Any]:
    rng = random.Random(i)
    currencies = rng.sample(["EUR", "USD", "JPY", "GBP"], rng.randint(1, 3))
    entries: list[tuple[str, int, str]] = []
    for currency in currencies:
        amounts = [rng.randint(-10_000, 10_000) for _ in range(rng.randint(1, 3))]
        entries += [(f"acct-{rng.randint(0, 9)}", a, currency) for a in amounts]
        entries.append(("clearing", -sum(amounts), currency))
    return posting(f"storm_{i}", *entries, tenant=rng.choice([None, "acme", "globex"]))


def test_a_storm_of_concurrent_and_repeated_enqueues_leaves_every_currency_at_zero(
        app: Forklift, payments: LedgerKind, book: TableBook,
        conn: psycopg.Connection[Any]) -> None:
    keys = 60
    ids: list[int] = []
    guard = threading.Lock()
    failures: list[BaseException] = []

    def producer(seed: int) -> None:
        rng = random.Random(seed)
        try:
            for _ in range(keys * 2):
                p = storm_posting(rng.randrange(keys))
                # Half with the live-job key (deduped at enqueue), half without: those run
                # side by side and meet only at the book's unique key.
                options = {} if rng.random() < 0.5 else {"unique_key": None}
                job = payments.enqueue(p, **options)
                with guard:
                    ids.append(job.id)
        except BaseException as exc:
            failures.append(exc)

    with running_worker(app, concurrency=8), running_worker(app, concurrency=8):
        threads = [threading.Thread(target=producer, args=(seed,)) for seed in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not failures, failures
        # And every key once more, after its first jobs finished: replays of stored postings.
        wait_until(lambda: finished(conn, sorted(set(ids))), timeout=120,
                   message="the storm's jobs ended")
        ids += [payments.enqueue(storm_posting(i), unique_key=None).id for i in range(keys)]
        wait_until(lambda: finished(conn, sorted(set(ids))), timeout=120,
                   message="the replays ended")

    states = conn.execute("SELECT state, count(*) FROM forklift.jobs GROUP BY 1").fetchall()
    assert states == [("completed", len(set(ids)))]
    written = conn.execute(
        "SELECT result->>'key', count(*) FILTER (WHERE (result->>'written')::boolean)"
        " FROM forklift.jobs GROUP BY 1 ORDER BY 1").fetchall()
    assert len(written) == keys
    assert {count for _, count in written} == {1}  # each key written by exactly one job
    for i in range(keys):
        p = storm_posting(i)
        stored = conn.execute(
            "SELECT account, currency, amount_minor FROM public.ledger_lines WHERE tenant = %s"
            " AND posting_key = %s ORDER BY line", (p.get("tenant", ""), p["key"])).fetchall()
        assert stored == [(e["account"], e["amount"]["currency"], e["amount"]["minor"])
                          for e in p["entries"]]
    check = book.check(conn)
    assert check.balanced and {c.currency for c in check.currencies} <= {"EUR", "USD", "JPY", "GBP"}
    assert sum(c.postings for c in check.currencies) >= keys
