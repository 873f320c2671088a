"""The errors of outbound webhooks and the receiver, each with a stable ``code``."""

from __future__ import annotations

from forklift._base.errors import ConfigError, ForkliftError

__all__ = ["DeliveryFailed", "EndpointNotFound", "InvalidSecret", "SignatureRefused"]


class InvalidSecret(ConfigError):
    """A signing secret that is not ``whsec_`` followed by base64 (the field is named)."""

    code = "invalid_secret"


class DeliveryFailed(ForkliftError):
    """One delivery attempt got no 2xx answer and may succeed later: the job retries it.
    ``detail``: ``endpoint``, ``status`` (None when nothing answered) and ``size``."""

    code = "delivery_failed"


class SignatureRefused(ForkliftError):
    """A delivery the receiver refused before it became a job; ``reason`` is the label its
    refusals are counted under (``missing_headers``, ``bad_timestamp``, ``stale``,
    ``bad_signature``). The message never holds the payload."""

    code = "signature_refused"

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message, reason=reason)
        self.reason = reason


class EndpointNotFound(ForkliftError):
    """No endpoint of that name has delivered yet or been disabled by an operator."""

    code = "webhook_endpoint_not_found"
