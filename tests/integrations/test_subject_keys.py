"""Crypto-shredding on real tables: payloads and results sealed with a person's key hold no
plaintext in the job rows, open while the key lives, and cannot be read once the person's
erase destroyed it; another person's sealed values still open."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import psycopg
import pytest

from forklift import Fail, Forklift, JobContext
from forklift.subjects import PersonalData, Sealed, SubjectKeys, SubjectKeyShredded, anonymize
from forklift.testing import drain

pytest.importorskip("cryptography")

ADA_EMAIL = "ada-7e1f@mail.example"
BOB_EMAIL = "bob-90c4@mail.example"


@dataclass
class Receipt:
    user: str
    to: Sealed


class Mailer:
    def __init__(self, dsn: str, conn: psycopg.Connection[Any]) -> None:
        conn.execute("CREATE TABLE public.users (id text PRIMARY KEY, email text);"
                     " COMMENT ON COLUMN public.users.email IS 'personal';"
                     f" INSERT INTO public.users VALUES ('ada', '{ADA_EMAIL}'),"
                     f" ('bob', '{BOB_EMAIL}')")
        self.app = Forklift(dsn)
        self.data = PersonalData(self.app)
        self.user = self.data.subject("user", table="users", erase=anonymize("email"))
        self.keys = SubjectKeys(self.data)
        self.keys.create(conn)
        self.erase = self.data.erase_kind(self.user)
        keys, user, app = self.keys, self.user, self.app

        @app.job(name="receipts.send", queue="subjects", failure_codes=["subject_key_shredded"])
        def send(ctx: JobContext, receipt: Receipt) -> Sealed:
            with app.pool().connection() as own:
                try:
                    address = keys.open(own, receipt.to)
                except SubjectKeyShredded as exc:
                    raise Fail(exc.code, exc.message) from None
                return keys.seal(own, user, receipt.user, {"delivered_to": address})

        self.send = send

    def enqueue(self, conn: psycopg.Connection[Any], who: str, email: str) -> int:
        sealed = self.keys.seal(conn, self.user, who, email)
        return self.send.enqueue({"user": who, "to": sealed}).id


@pytest.fixture
def mailer(dsn: str, conn: psycopg.Connection[Any]) -> Iterator[Mailer]:
    m = Mailer(dsn, conn)
    yield m
    m.app.close()


def job(conn: psycopg.Connection[Any], job_id: int) -> tuple[str, Any, Any, list[Any]]:
    row = conn.execute("SELECT state, args, result, errors FROM forklift.jobs WHERE id = %s",
                       (job_id,)).fetchone()
    assert row is not None
    return row[0], row[1], row[2], row[3]


def test_an_erase_makes_the_persons_sealed_history_unreadable(
        conn: psycopg.Connection[Any], mailer: Mailer) -> None:
    ada, bob = mailer.enqueue(conn, "ada", ADA_EMAIL), mailer.enqueue(conn, "bob", BOB_EMAIL)
    drain(mailer.app, "subjects")
    _, ada_args, ada_result, _ = job(conn, ada)
    state, bob_args, bob_result, _ = job(conn, bob)
    assert state == "completed"
    stored = json.dumps([ada_args, ada_result, bob_args, bob_result])
    assert ADA_EMAIL not in stored and BOB_EMAIL not in stored and "ada" in stored
    assert mailer.keys.open(conn, ada_result) == {"delivered_to": ADA_EMAIL}
    assert mailer.keys.open(conn, ada_args["to"]) == ADA_EMAIL

    late = mailer.enqueue(conn, "ada", ADA_EMAIL)  # still queued when she is erased
    mailer.data.erase_now(conn, "user", "ada")
    for sealed in (ada_args["to"], ada_result):
        with pytest.raises(SubjectKeyShredded):
            mailer.keys.open(conn, sealed)
    assert mailer.keys.open(conn, bob_result) == {"delivered_to": BOB_EMAIL}
    assert conn.execute("SELECT count(*) FROM public.subject_keys").fetchone() == (1,)

    drain(mailer.app, "subjects")
    state, _, _, errors = job(conn, late)
    assert state == "dead" and errors[-1]["code"] == "subject_key_shredded"


def test_a_person_has_one_key_however_many_values_are_sealed(
        conn: psycopg.Connection[Any], mailer: Mailer) -> None:
    first = mailer.keys.seal(conn, mailer.user, "ada", 1)
    second = mailer.keys.seal(conn, mailer.user, "ada", {"n": 2})
    assert first.key_id == second.key_id and first.nonce != second.nonce
    assert mailer.keys.open(conn, second.to_json()) == {"n": 2}
    assert conn.execute("SELECT count(*) FROM public.subject_keys").fetchone() == (1,)
    # The row is found by a hash of the person's key, never the key itself.
    assert [(s, len(h)) for s, h in conn.execute(
        "SELECT subject, lookup FROM public.subject_keys WHERE lookup <> 'ada'")] == [("user", 64)]
