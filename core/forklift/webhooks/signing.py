"""Standard Webhooks signatures: ``webhook-id``, ``webhook-timestamp`` and ``webhook-signature``.

The signed content is ``"{id}.{timestamp}.{body}"``; its signature is ``v1,`` and the base64 of
its HMAC-SHA256 under the secret's key. A secret is ``whsec_`` and the key in base64. During a
rotation a sender signs with both secrets (the header holds both signatures, space-separated)
and a receiver accepts either, so the two sides change secrets one at a time. Signatures are
compared with :func:`hmac.compare_digest`, never ``==``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets as _random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from forklift.webhooks.errors import InvalidSecret, SignatureRefused

__all__ = [
    "ID_HEADER",
    "SIGNATURE_HEADER",
    "TIMESTAMP_HEADER",
    "Secret",
    "headers",
    "new_secret",
    "secrets_of",
    "sign",
    "verify",
]

ID_HEADER = "webhook-id"
TIMESTAMP_HEADER = "webhook-timestamp"
SIGNATURE_HEADER = "webhook-signature"
PREFIX = "whsec_"


@dataclass(frozen=True, repr=False)
class Secret:
    """A signing key, parsed from ``whsec_<base64>``; its repr never shows the key."""

    key: bytes

    @classmethod
    def parse(cls, text: object, field: str = "secrets") -> Secret:
        if isinstance(text, Secret):
            return text
        if not isinstance(text, str) or not text.startswith(PREFIX):
            raise InvalidSecret(f"{field}: a secret is 'whsec_' followed by base64", field=field)
        try:
            key = base64.b64decode(text[len(PREFIX):], validate=True)
        except (binascii.Error, ValueError):
            raise InvalidSecret(f"{field}: the part after 'whsec_' is not base64",
                                field=field) from None
        if len(key) < 16:
            raise InvalidSecret(f"{field}: a secret's key is at least 16 bytes, not {len(key)}",
                                field=field)
        return cls(key)

    def __repr__(self) -> str:
        return "Secret(...)"

    def signature(self, msg_id: str, timestamp: int, body: bytes) -> str:
        content = f"{msg_id}.{timestamp}.".encode() + body
        digest = hmac.new(self.key, content, hashlib.sha256).digest()
        return "v1," + base64.b64encode(digest).decode("ascii")


def new_secret() -> str:
    """A fresh secret (24 random bytes) in the ``whsec_`` form, to give an endpoint's owner."""
    return PREFIX + base64.b64encode(_random.token_bytes(24)).decode("ascii")


def secrets_of(values: Iterable[str | Secret], field: str = "secrets") -> tuple[Secret, ...]:
    """One or two secrets (two while rotating), parsed; a clear error naming ``field``."""
    if isinstance(values, (str, Secret)):
        values = [values]
    parsed = tuple(Secret.parse(v, field) for v in values)
    if not 1 <= len(parsed) <= 2:
        raise InvalidSecret(f"{field}: one secret, or two while rotating, not {len(parsed)}",
                            field=field)
    return parsed


def sign(keys: Sequence[Secret], msg_id: str, timestamp: int, body: bytes) -> str:
    """The ``webhook-signature`` value: one ``v1,...`` per secret, space-separated."""
    return " ".join(k.signature(msg_id, timestamp, body) for k in keys)


def headers(keys: Sequence[Secret], msg_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    """The three signature headers of one delivery attempt."""
    return {ID_HEADER: msg_id, TIMESTAMP_HEADER: str(timestamp),
            SIGNATURE_HEADER: sign(keys, msg_id, timestamp, body)}


def verify(keys: Sequence[Secret], received: Mapping[str, str], body: bytes, *, now: float,
           tolerance: float) -> tuple[str, int]:
    """Check a delivery's headers (lower-case names) against ``keys``; its ``(id, timestamp)``.

    Raises :class:`SignatureRefused` with the reason: ``missing_headers``, ``bad_timestamp``,
    ``stale`` (further than ``tolerance`` seconds from ``now``, either way) or ``bad_signature``.
    """
    msg_id = received.get(ID_HEADER, "")
    stamp = received.get(TIMESTAMP_HEADER, "")
    offered = received.get(SIGNATURE_HEADER, "")
    if not msg_id or not stamp or not offered:
        raise SignatureRefused("missing_headers", "webhook-id, webhook-timestamp and"
                               " webhook-signature are required")
    if not stamp.isascii() or not stamp.isdigit() or len(stamp) > 12:
        raise SignatureRefused("bad_timestamp", "webhook-timestamp is not unix seconds")
    timestamp = int(stamp)
    if abs(now - timestamp) > tolerance:
        raise SignatureRefused("stale", f"webhook-timestamp is more than {tolerance:g}s away")
    candidates = [part.encode() for part in offered.split(" ") if part.startswith("v1,")]
    for key in keys:
        expected = key.signature(msg_id, timestamp, body).encode()
        # every candidate is compared, so the time taken does not say which one matched
        matched = [hmac.compare_digest(expected, c) for c in candidates]
        if any(matched):
            return msg_id, timestamp
    raise SignatureRefused("bad_signature", "no signature matches")
