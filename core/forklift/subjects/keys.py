"""Crypto-shredding: a key per person, values sealed with it, and the key destroyed by the
person's erase, so whatever was sealed and retained (job payloads and results, their history)
cannot be read any more.

The keys live in a table of the application's schema, created by :meth:`SubjectKeys.create`.
A key row is found by the subject kind and a SHA-256 of the subject's key (the erase needs to
find it; the hash goes with the row). Encryption is AES-256-GCM from ``cryptography`` (the
``subjects`` extra), with a random 96-bit nonce per value and the subject kind and key id as
associated data, so a sealed value cannot be passed off under another key.
"""

from __future__ import annotations

import base64
import hashlib
import importlib
import json
import os
import uuid
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import sql

from forklift._base.errors import ConfigError
from forklift.subjects.errors import SubjectKeyShredded
from forklift.subjects.sealed import Sealed
from forklift.subjects.subject import Subject

if TYPE_CHECKING:
    from forklift.subjects.registry import PersonalData

__all__ = ["SubjectKeys"]

CREATE_SQL = """
CREATE TABLE IF NOT EXISTS {t} (
    subject     text        NOT NULL,
    lookup      text        NOT NULL,
    key_id      uuid        NOT NULL UNIQUE,
    secret      bytea       NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (subject, lookup)
)
"""
TAKE_SQL = """
WITH made AS (
    INSERT INTO {t} (subject, lookup, key_id, secret) VALUES (%(subject)s, %(lookup)s, %(id)s,
                                                              %(secret)s)
    ON CONFLICT (subject, lookup) DO NOTHING
    RETURNING key_id, secret
)
SELECT key_id, secret FROM made
UNION ALL
SELECT key_id, secret FROM {t} WHERE subject = %(subject)s AND lookup = %(lookup)s
LIMIT 1
"""
FIND_SQL = "SELECT key_id, secret FROM {t} WHERE subject = %s AND lookup = %s"
OPEN_SQL = "SELECT secret FROM {t} WHERE key_id = %s AND subject = %s"
SHRED_SQL = "DELETE FROM {t} WHERE subject = %s AND lookup = %s"


def _aesgcm(secret: bytes) -> Any:
    try:  # imported by name: an optional extra, typed or not wherever it is installed
        aead = importlib.import_module("cryptography.hazmat.primitives.ciphers.aead")
    except ImportError:
        raise ConfigError("sealing values needs the cryptography package: pip install"
                          " 'forklift[subjects]'") from None
    return aead.AESGCM(secret)


class SubjectKeys:
    """Per-person keys for the subjects of ``data``, in ``schema.table`` (the registry's schema
    by default). Erasing a person through ``data`` destroys their key in the same transaction.
    """

    def __init__(self, data: PersonalData, *, table: str = "subject_keys",
                 schema: str | None = None) -> None:
        self.data = data
        self.table = table
        self.schema = schema or data.schema
        data.erase_hooks.append(self.shred)

    def _sql(self, text: str) -> sql.Composed:
        return sql.SQL(text).format(t=sql.Identifier(self.schema, self.table))

    @staticmethod
    def _lookup(subject: Subject, key: Any) -> str:
        return hashlib.sha256(f"{subject.name}\x00{key}".encode()).hexdigest()

    def create(self, conn: psycopg.Connection[Any]) -> None:
        """Create the key table if it does not exist."""
        conn.execute(self._sql(CREATE_SQL))

    def seal(self, conn: psycopg.Connection[Any], subject: Subject, key: Any,
             value: Any) -> Sealed:
        """``value`` (anything JSON holds) sealed with the person's key, made on first use."""
        lookup = self._lookup(subject, key)
        row = conn.execute(self._sql(TAKE_SQL), {
            "subject": subject.name, "lookup": lookup, "id": uuid.uuid4(),
            "secret": os.urandom(32)}).fetchone()
        if row is None:  # made by a transaction that committed while this statement ran
            row = conn.execute(self._sql(FIND_SQL), (subject.name, lookup)).fetchone()
        assert row is not None
        key_id, secret = str(row[0]), bytes(row[1])
        nonce = os.urandom(12)
        data = _aesgcm(secret).encrypt(nonce, json.dumps(value).encode(),
                                       f"{subject.name}:{key_id}".encode())
        return Sealed(subject.name, key_id, base64.b64encode(nonce).decode(),
                      base64.b64encode(data).decode())

    def open(self, conn: psycopg.Connection[Any], sealed: Sealed | dict[str, Any]) -> Any:
        """The value ``sealed`` holds; raises :class:`SubjectKeyShredded` once the person's
        erase destroyed the key."""
        box = sealed if isinstance(sealed, Sealed) else Sealed(**sealed)
        try:
            key_id = uuid.UUID(box.key_id)
        except ValueError:
            raise ConfigError(f"not a sealed value: key_id {box.key_id!r}",
                              field="key_id") from None
        row = conn.execute(self._sql(OPEN_SQL), (key_id, box.subject)).fetchone()
        if row is None:
            raise SubjectKeyShredded(
                f"the {box.subject} key that sealed this value was destroyed by an erase",
                subject=box.subject, key_id=box.key_id)
        plain = _aesgcm(bytes(row[0])).decrypt(base64.b64decode(box.nonce),
                                               base64.b64decode(box.data),
                                               f"{box.subject}:{box.key_id}".encode())
        return json.loads(plain)

    def shred(self, conn: psycopg.Connection[Any], subject: Subject, key: Any) -> None:
        """Destroy the person's key (the erase calls this inside its transaction)."""
        conn.execute(self._sql(SHRED_SQL), (subject.name, self._lookup(subject, key)))
