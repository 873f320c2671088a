"""A value sealed with a subject's key: what a job's payload or result holds in its place."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Sealed"]


@dataclass(frozen=True)
class Sealed:
    """AES-256-GCM ciphertext of a JSON value (base64), its nonce, and which key sealed it.

    It names the subject kind and a random key id, never the subject's key, so a job row
    holding it says nothing of the person once the key is destroyed. Annotate a payload or
    result field with it; :meth:`SubjectKeys.open` gives the value back.
    """

    subject: str
    key_id: str
    nonce: str
    data: str

    def to_json(self) -> dict[str, Any]:
        return {"subject": self.subject, "key_id": self.key_id, "nonce": self.nonce,
                "data": self.data}
