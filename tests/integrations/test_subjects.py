"""Personal data on real tables: coverage refuses before a row is touched, an erase leaves no
marked value of the person in any marked table, it is idempotent and audited without the
subject's key, and an export is one JSON document of the person's rows."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql

from forklift import Forklift
from forklift.subjects import (
    PersonalData,
    PersonalDataUnerased,
    Reach,
    anonymize,
    delete,
    retain,
)
from forklift.testing import drain

ALICE = "u-alice-7f3a9"
BOB = "u-bob-51c2e"

TABLES = """
CREATE TABLE public.users (id text PRIMARY KEY, email text NOT NULL, name text, plan text);
COMMENT ON COLUMN public.users.email IS 'personal: contact address';
CREATE TABLE public.addresses (id serial PRIMARY KEY, user_id text REFERENCES public.users (id),
                               street text, city text);
COMMENT ON COLUMN public.addresses.street IS 'Personal';
COMMENT ON COLUMN public.addresses.city IS 'personal: where they live';
CREATE TABLE public.orders (id serial PRIMARY KEY, user_id text REFERENCES public.users (id),
                            total int NOT NULL, ship_name text);
COMMENT ON COLUMN public.orders.ship_name IS 'personal';
COMMENT ON COLUMN public.orders.total IS 'a personalised total is not a mark';
CREATE TABLE public.order_notes (id serial PRIMARY KEY, order_id int REFERENCES public.orders (id),
                                 body text);
CREATE TABLE public.invoices (id serial PRIMARY KEY, customer text, amount int, billed_to text);
COMMENT ON COLUMN public.invoices.billed_to IS 'personal: legal name on the invoice';
"""


def seed(conn: psycopg.Connection[Any], who: str) -> dict[str, str]:
    """One person's rows; returns the distinctive value of each marked column."""
    values = {"email": f"{who}@mail.example", "name": f"Name of {who}",
              "street": f"1 {who} Street", "city": f"City of {who}",
              "ship_name": f"Ship {who}", "body": f"note about {who}",
              "billed_to": f"Billed {who}"}
    conn.execute("INSERT INTO public.users VALUES (%s, %s, %s, 'pro')",
                 (who, values["email"], values["name"]))
    conn.execute("INSERT INTO public.addresses (user_id, street, city) VALUES (%s, %s, %s)",
                 (who, values["street"], values["city"]))
    for total in (10, 20):
        (order,) = conn.execute(
            "INSERT INTO public.orders (user_id, total, ship_name) VALUES (%s, %s, %s)"
            " RETURNING id", (who, total, values["ship_name"])).fetchone() or (0,)
        conn.execute("INSERT INTO public.order_notes (order_id, body) VALUES (%s, %s)",
                     (order, values["body"]))
    conn.execute("INSERT INTO public.invoices (customer, amount, billed_to) VALUES (%s, 30, %s)",
                 (who, values["billed_to"]))
    return values


class Shop:
    def __init__(self, dsn: str, *, user_erase: Any = None) -> None:
        self.app = Forklift(dsn)
        self.data = PersonalData(self.app)
        self.data.mark("order_notes", "body")
        self.user = self.data.subject(
            "user", table="users", personal=["name"],
            erase=user_erase or anonymize(email="erased@example.invalid", name=None),
            reaches=[
                Reach("addresses", erase=delete()),
                Reach("orders", erase=anonymize("ship_name")),
                Reach("order_notes", parent="orders", erase=delete()),
                Reach("invoices", via="customer", erase=retain("kept ten years for the tax office"),
                      ),
            ])
        self.export = self.data.export_kind(self.user)
        self.erase = self.data.erase_kind(self.user)


@pytest.fixture
def db(conn: psycopg.Connection[Any]) -> psycopg.Connection[Any]:
    conn.execute(TABLES)
    return conn


@pytest.fixture
def shop(dsn: str, db: psycopg.Connection[Any]) -> Iterator[Shop]:
    s = Shop(dsn)
    yield s
    s.app.close()


def marked_values(conn: psycopg.Connection[Any], data: PersonalData) -> list[str]:
    """Every value of every marked column of every marked table, as text."""
    from forklift.subjects.catalog import read_catalog
    from forklift.subjects.coverage import marked_columns

    marks, _ = marked_columns(read_catalog(conn, "public"), data.declared_marks())
    found: list[str] = []
    for table, columns in marks.items():
        for column in columns:
            found += [str(v) for (v,) in conn.execute(
                sql.SQL("SELECT {} FROM {} WHERE {} IS NOT NULL").format(
                    sql.Identifier(column), sql.Identifier("public", table),
                    sql.Identifier(column)))]
    return found


def job_row(conn: psycopg.Connection[Any], job_id: int) -> tuple[str, Any, list[Any]]:
    row = conn.execute("SELECT state, result, errors FROM forklift.jobs WHERE id = %s",
                       (job_id,)).fetchone()
    assert row is not None
    return row[0], row[1], row[2]


def test_the_walk_covers_every_marked_column(db: psycopg.Connection[Any], shop: Shop) -> None:
    assert shop.data.check(db) == []


def test_an_erase_leaves_no_marked_value_of_the_person_in_any_marked_table(
        db: psycopg.Connection[Any], shop: Shop) -> None:
    alice, bob = seed(db, ALICE), seed(db, BOB)
    # The invoice is retained by a stated reason: its legal name is the one marked value kept.
    kept = {alice["billed_to"]}
    job = shop.erase.enqueue({"key": ALICE})
    drain(shop.app, "subjects")
    state, result, _ = job_row(db, job.id)
    assert state == "completed"
    assert result["tables"]["addresses"] == {"action": "delete", "rows": 1}
    assert result["tables"]["order_notes"] == {"action": "delete", "rows": 2}
    assert result["tables"]["invoices"]["action"] == "retain"
    values = marked_values(db, shop.data)
    leaked = [v for v in values if any(mine in v for mine in set(alice.values()) - kept)]
    assert leaked == []
    assert set(bob.values()) <= set(values)  # the other person is untouched
    assert db.execute("SELECT email, name, plan FROM public.users WHERE id = %s",
                      (ALICE,)).fetchone() == ("erased@example.invalid", None, "pro")
    assert db.execute("SELECT count(*) FROM public.orders WHERE user_id = %s",
                      (ALICE,)).fetchone() == (2,)  # the orders stay, anonymized


def test_a_declaration_missing_one_column_is_named_and_refused(
        dsn: str, db: psycopg.Connection[Any]) -> None:
    alice = seed(db, ALICE)
    shop = Shop(dsn, user_erase=anonymize(email="erased@example.invalid"))  # forgets name
    try:
        problems = shop.data.check(db)
        assert [(p.code, p.table, p.columns) for p in problems] == [
            ("personal_data_unerased", "users", ("name",))]
        job = shop.erase.enqueue({"key": ALICE})
        export = shop.export.enqueue({"key": ALICE})
        drain(shop.app, "subjects")
        for refused in (job.id, export.id):
            state, _, errors = job_row(db, refused)
            assert state == "dead"
            assert errors[-1]["code"] == "personal_data_unerased"
            assert "users" in errors[-1]["message"] and "name" in errors[-1]["message"]
        # Refused before a row was touched: every one of her values is still there.
        assert set(alice.values()) <= set(marked_values(db, shop.data))
        with pytest.raises(PersonalDataUnerased) as refused_now:
            shop.data.erase_now(db, "user", ALICE)
        assert refused_now.value.detail["columns"] == ["name"]
        audit = db.execute("SELECT outcome, target FROM forklift.audit"
                           " WHERE action = 'subject.erase'").fetchall()
        assert [(o, t["error"]) for o, t in audit] == [("refused", "personal_data_unerased")]
    finally:
        shop.app.close()


def test_a_marked_table_no_subject_reaches_is_named(dsn: str, db: psycopg.Connection[Any],
                                                    shop: Shop) -> None:
    db.execute("CREATE TABLE public.newsletter (id serial PRIMARY KEY, address text);"
               " COMMENT ON COLUMN public.newsletter.address IS 'personal: subscriber'")
    shop.data.mark("orders", "no_such_column")
    got = {(p.code, p.table, p.columns) for p in shop.data.check(db)}
    assert got == {("personal_data_unreached", "newsletter", ("address",)),
                   ("subject_declaration_invalid", "orders", ("no_such_column",))}


def test_an_erase_is_idempotent_and_audited_without_the_key(db: psycopg.Connection[Any],
                                                            shop: Shop) -> None:
    alice = seed(db, ALICE)
    first = shop.erase.enqueue({"key": ALICE})
    drain(shop.app, "subjects")
    second = shop.erase.enqueue({"key": ALICE})
    drain(shop.app, "subjects")
    after_first = db.execute("SELECT * FROM public.users ORDER BY id").fetchall()
    _, r1, _ = job_row(db, first.id)
    state, r2, _ = job_row(db, second.id)
    assert state == "completed"
    assert sum(t["rows"] for t in r1["tables"].values()) == 1 + 1 + 2 + 2
    assert all(t["rows"] == 0 for t in r2["tables"].values()), r2
    assert db.execute("SELECT * FROM public.users ORDER BY id").fetchall() == after_first
    audit = db.execute("SELECT actor, outcome, count, target FROM forklift.audit"
                       " WHERE action = 'subject.erase' ORDER BY id").fetchall()
    assert [(a, o, c) for a, o, c, _ in audit] == [
        ("forklift.subjects", "done", 6), ("forklift.subjects", "done", 0)]
    assert [(t["job"], t["subject"]) for *_, t in audit] == [(first.id, "user"),
                                                            (second.id, "user")]
    trail = json.dumps([t for *_, t in audit])
    assert ALICE not in trail
    assert not [v for v in alice.values() if v in trail]


def test_export_is_one_json_document_of_the_persons_rows(db: psycopg.Connection[Any],
                                                         shop: Shop) -> None:
    alice, bob = seed(db, ALICE), seed(db, BOB)
    job = shop.export.enqueue({"key": ALICE})
    drain(shop.app, "subjects")
    state, document, _ = job_row(db, job.id)
    assert state == "completed"
    assert document["subject"] == "user" and document["key"] == ALICE
    tables = document["tables"]
    assert set(tables) == {"users", "addresses", "orders", "order_notes", "invoices"}
    assert [u["email"] for u in tables["users"]] == [alice["email"]]
    assert [a["city"] for a in tables["addresses"]] == [alice["city"]]
    assert sorted(o["total"] for o in tables["orders"]) == [10, 20]
    assert [n["body"] for n in tables["order_notes"]] == [alice["body"]] * 2
    assert [i["billed_to"] for i in tables["invoices"]] == [alice["billed_to"]]
    assert not [v for v in bob.values() if v in json.dumps(document)]


def test_export_to_a_sink_keeps_the_rows_out_of_the_job(dsn: str,
                                                        db: psycopg.Connection[Any]) -> None:
    seed(db, ALICE)
    db.execute("CREATE TABLE public.exports (document jsonb)")
    app = Forklift(dsn)
    data = PersonalData(app)
    user = data.subject("user", table="users", personal=["name"],
                        erase=anonymize(email="x", name=None),
                        reaches=[Reach("addresses", erase=delete()),
                                 Reach("orders", erase=anonymize("ship_name")),
                                 Reach("invoices", via="customer", erase=retain("tax"))])
    data.mark("order_notes", "body")
    data.subject("note", table="order_notes", erase=delete())

    def sink(document: dict[str, Any], conn: psycopg.Connection[Any]) -> None:
        conn.execute("INSERT INTO public.exports VALUES (%s)", (psycopg.types.json.Jsonb(document),))

    kind = data.export_kind(user, sink=sink)
    try:
        job = kind.enqueue({"key": ALICE})
        drain(app, "subjects")
    finally:
        app.close()
    state, result, _ = job_row(db, job.id)
    assert state == "completed"
    assert result["tables"] == {"users": 1, "addresses": 1, "orders": 2, "invoices": 1}
    stored = db.execute("SELECT document FROM public.exports").fetchone()
    assert stored is not None and stored[0]["tables"]["users"][0]["id"] == ALICE


def test_a_numeric_key_as_a_number_or_as_text_and_a_walk_without_foreign_keys(
        dsn: str, conn: psycopg.Connection[Any]) -> None:
    conn.execute("""
        CREATE TABLE public.members (id bigint PRIMARY KEY, phone text);
        COMMENT ON COLUMN public.members.phone IS 'personal';
        CREATE TABLE public.logins (member bigint, ip text, other bigint);
        COMMENT ON COLUMN public.logins.ip IS 'personal';
        INSERT INTO public.members VALUES (41, '+44 41'), (42, '+44 42');
        INSERT INTO public.logins VALUES (41, '10.0.0.41', 42), (42, '10.0.0.42', 41);
    """)
    app = Forklift(dsn)
    try:
        data = PersonalData(app)
        unjoined = data.subject("member", table="members", erase=delete(),
                                reaches=[Reach("logins", erase=delete())])
        # No foreign key and no via= given: the walk stops there, so logins is unreached too.
        assert [(p.code, p.table) for p in data.check(conn)] == [
            ("subject_declaration_invalid", "logins"), ("personal_data_unreached", "logins")]
        data.subjects.clear()
        member = data.subject("member", table="members", erase=anonymize("phone"),
                              reaches=[Reach("logins", via="member", erase=anonymize("ip"))])
        assert unjoined.name == member.name and data.check(conn) == []
        erase = data.erase_kind(member)
        export = data.export_kind(member)
        erased = erase.enqueue({"key": 41})
        exported = export.enqueue({"key": "42"})
        drain(app, "subjects")
    finally:
        app.close()
    assert conn.execute("SELECT id, phone FROM public.members ORDER BY id").fetchall() == [
        (41, None), (42, "+44 42")]
    assert conn.execute("SELECT member, ip FROM public.logins ORDER BY member").fetchall() == [
        (41, None), (42, "10.0.0.42")]
    assert job_row(conn, erased.id)[0] == "completed"
    state, document, _ = job_row(conn, exported.id)
    assert state == "completed" and document["tables"]["logins"] == [
        {"member": 42, "ip": "10.0.0.42", "other": 41}]


def test_an_erase_that_fails_midway_changes_nothing_and_is_audited_as_failed(
        dsn: str, db: psycopg.Connection[Any]) -> None:
    alice = seed(db, ALICE)
    before = {t: db.execute(sql.SQL("SELECT count(*) FROM {}").format(
        sql.Identifier("public", t))).fetchone() for t in ("users", "addresses", "order_notes")}
    # users.email is NOT NULL: the root, treated last, refuses after its children were done.
    shop = Shop(dsn, user_erase=anonymize("email", "name"))
    try:
        job = shop.erase.enqueue({"key": ALICE})
        drain(shop.app, "subjects")
    finally:
        shop.app.close()
    state, _, errors = job_row(db, job.id)
    assert state == "retryable" and errors[-1]["type"].endswith("NotNullViolation")
    assert {t: db.execute(sql.SQL("SELECT count(*) FROM {}").format(
        sql.Identifier("public", t))).fetchone() for t in before} == before
    assert set(alice.values()) <= set(marked_values(db, shop.data))
    audit = db.execute("SELECT outcome, count, target FROM forklift.audit"
                       " WHERE action = 'subject.erase'").fetchall()
    assert [(o, c, t["error"], t["job"]) for o, c, t in audit] == [
        ("failed", 0, "NotNullViolation", job.id)]
