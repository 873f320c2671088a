"""Exceptions with a stable ``code``: callers branch on the code, people read the message."""

from __future__ import annotations

from typing import Any, ClassVar


class ForkliftError(Exception):
    """Base of every error forklift raises on purpose.

    ``code`` is stable across releases and safe to show or branch on; ``detail`` carries
    structured facts (a field path, a limit) for ``--json`` output and HTTP layers.
    """

    code: ClassVar[str] = "forklift_error"

    def __init__(self, message: str, **detail: Any) -> None:
        super().__init__(message)
        self.message = message
        self.detail = detail

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, **self.detail}


class ConfigError(ForkliftError):
    code = "config_error"


class DatabaseUnavailable(ForkliftError):
    """The database cannot be reached; the message names the host and the reason."""

    code = "database_unavailable"


class SchemaOutdated(ForkliftError):
    code = "schema_outdated"


class KindAlreadyDeclared(ForkliftError):
    code = "kind_already_declared"


class EnqueueRefused(ForkliftError):
    """Base of every refusal at enqueue: nothing was stored."""

    code = "enqueue_refused"


class UnknownKind(EnqueueRefused):
    code = "unknown_kind"


class InvalidPayload(EnqueueRefused):
    code = "invalid_payload"


class NotJSON(EnqueueRefused):
    code = "not_json"


class PayloadTooLarge(EnqueueRefused):
    code = "payload_too_large"


class NulCharacter(EnqueueRefused):
    code = "nul_character"


class InvalidOption(EnqueueRefused):
    code = "invalid_option"


class InvalidName(InvalidOption):
    """An identifier (queue, kind, tag, schedule, key...) that would hide characters from the
    reader, is empty, or is over its cap; ``detail``: ``field``, ``value`` (escaped), ``reason``."""

    code = "invalid_name"


class TenantRequired(EnqueueRefused):
    """The kind requires a tenant (``tenant_required=True``) and the enqueue named none, nor
    did the payload yield one; ``detail``: ``field`` (``tenant``), ``kind``."""

    code = "tenant_required"


class TenantMismatch(EnqueueRefused):
    """The enqueue named a tenant and the kind derived another from the payload; ``detail``:
    ``field`` (``tenant``), ``kind``, ``given`` and ``derived``."""

    code = "tenant_mismatch"


class UniqueConflict(EnqueueRefused):
    """A live job already holds the unique key and the policy is ``raise``."""

    code = "unique_conflict"


class EnqueueOutcomeUnknown(ForkliftError):
    """The connection failed at or after the commit of an enqueue's own transaction: the
    server may have stored the job (or jobs), and the reply that would say so was lost.

    Not an :class:`EnqueueRefused`: something may have been stored. Retrying with the same
    unique key is safe (the retry returns the job if the first call stored it); without one a
    retry may store a second job. ``detail``: ``unique_key`` (one job) or ``unique_keys``
    (a bulk, one entry a job, None where a job had none), and ``jobs``, how many were sent.
    """

    code = "enqueue_outcome_unknown"


class JobNotFound(ForkliftError):
    code = "job_not_found"


class NotRequeueable(ForkliftError):
    code = "not_requeueable"


class ReadOnly(ForkliftError):
    code = "read_only"


class BatchRefused(EnqueueRefused):
    """Base of the refusals of a batch submit; nothing was stored.

    An HTTP layer maps ``too_many_targets`` and ``batch_key_conflict`` to 422 (the request
    itself is wrong) and ``caller_busy`` and ``busy`` to 429 (try again later).
    """

    code = "batch_refused"


class TooManyTargets(BatchRefused):
    code = "too_many_targets"


class CallerBusy(BatchRefused):
    """The caller already has as many live batches as it may have (default 1)."""

    code = "caller_busy"


class Busy(BatchRefused):
    """As many batches as allowed are live in total (default 8)."""

    code = "busy"


class BatchKeyConflict(BatchRefused):
    """The caller's idempotency key already names a live batch of another kind."""

    code = "batch_key_conflict"


class BatchNotFound(ForkliftError):
    code = "batch_not_found"


class LockNotAcquired(ForkliftError):
    """Another holder kept the lock until ``wait`` ran out; ``detail`` names it: ``key``,
    ``holder_job``, ``holder_worker``, ``holder_owner``, ``holder_token``, ``expires_at``."""

    code = "lock_not_acquired"


class LockLost(ForkliftError):
    """A lock ran out or was taken while its block ran: the block's work was not exclusive.

    Raised when the block is left, even if its body returned; ``detail``: ``key``, ``token``.
    """

    code = "lock_lost"


class InvalidKey(EnqueueRefused):
    """A kind's key function raised or returned something other than a usable string;
    ``detail``: ``kind``, ``key`` (the key's name) and ``reason``. Nothing was stored."""

    code = "invalid_key"


class QueueFull(EnqueueRefused):
    """The queue is past a ceiling an operator set (``forklift queues ceiling``) and the
    enqueue's ``on_full`` is ``"raise"`` (or a ``Wait`` ran out). Nothing was stored.

    ``detail``: ``queue``, ``ceiling`` (``depth`` or ``age``), ``figure`` (the depth or the
    oldest wait in seconds, as last measured), ``limit`` (the ceiling) and ``retry_after``
    (seconds worth waiting before trying again: a web handler's ``Retry-After``).
    """

    code = "queue_full"
