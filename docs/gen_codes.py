"""The failure codes and error codes, rendered from where the code declares them.

Two kinds of code: the ones a failed attempt writes to a job's error history (the runner's own
table of codes, found by walking forklift's modules for ``FAILURE_CODES``, plus the codes the
rescue, locks and durable steps write, listed here), and the ``code`` of every exception the
public API raises (read from the classes themselves).
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from typing import Any

__all__ = ["MORE_FAILURE_CODES", "WHEN", "error_classes", "failure_codes", "render"]

#: Codes written to the error history outside the runner's table, with where they come from.
MORE_FAILURE_CODES: dict[str, str] = {
    "worker_lost": "terminal: the job's attempts ended by lease expiry several times in a row "
    "(`lease_expiries`, default 3): it kills the process that runs it",
    "lock_lost": "a lock the handler held (`ctx.lock`) was lost before the handler finished "
    "([flow control](../how-to/flow-control.md#locks-with-fencing-tokens)); retried",
    "duplicate_step": "a [durable step](../how-to/workflows.md) reused a name within one run; "
    "dead at once",
    "invalid_step_name": "a durable step's name is empty, over 200 characters or hides "
    "characters; dead at once",
    "wait_timeout": "`ctx.wait_for_event(..., on_timeout=\"raise\")` reached its deadline; "
    "dead at once",
    "dependency_failed": "a dependency (`after=`) ended dead or cancelled: the job is cancelled "
    "with this entry (policy `cancel`)",
    "personal_data_unerased": "a [personal-data](../how-to/subjects.md) export or erase found a "
    "reached table anonymized without one of its marked columns; dead at once, nothing touched",
    "personal_data_unreached": "a personal-data export or erase found a table with marked "
    "columns that no subject reaches; dead at once, nothing touched",
    "subject_declaration_invalid": "a personal-data export or erase found a declared table or "
    "column missing, or a reach without a foreign key to follow; dead at once, nothing touched",
    "endpoint_gone": "a [webhook delivery](../how-to/webhooks.md) got 410 (or a status in the "
    "endpoint's `disable_on`): dead at once, and the endpoint is disabled",
    "rejected": "a [webhook delivery](../how-to/webhooks.md) got a 4xx other than 408, 409, 425 "
    "and 429: dead at once",
}


#: What an exception means, for classes whose docstring does not say (the docstring wins).
WHEN: dict[str, str] = {
    "BatchNotFound": "no batch has that id (or its TTL lapsed)",
    "ConfigError": "a handler, option or setting forklift cannot use; raised at import or start",
    "InvalidOption": "an option out of range (`priority`, `max_attempts`, `delay` with `at`, "
    "a naive `at`, `on_conflict`...)",
    "InvalidPayload": "the payload does not validate, or has a field its type does not declare "
    "(the field is named)",
    "JobNotFound": "no job has that id",
    "KindAlreadyDeclared": "two kinds were declared with one name",
    "NotJSON": "the payload, meta or result holds what JSON cannot (the field is named)",
    "NotRequeueable": "the job is live, or a live job now holds its unique key",
    "NulCharacter": "a `\\u0000` in a string or key (the field is named)",
    "PayloadTooLarge": "over the app's `payload_limit`, counted on the stored JSON",
    "ReadOnly": "a change was asked of a read-only operator (`--read-only`, "
    "`FORKLIFT_READ_ONLY`, or a read-only role)",
    "SchemaOutdated": "the schema is older than this version needs: run `forklift migrate`",
    "TooManyTargets": "a batch over `max_targets` (default 1,000)",
    "UnknownKind": "no kind of that name is declared",
    "NotCancellable": "the job is already terminal",
    "NotDeletable": "the job is live: cancel it first",
    "QueueNotFound": "no queue of that name (pass `--create` to make one)",
}


def failure_codes() -> dict[str, str]:
    """The runner's table (wherever the code keeps it) and then the other codes."""
    import forklift

    table: dict[str, str] = {}
    for info in pkgutil.walk_packages(forklift.__path__, "forklift."):
        if ".cli" in info.name or ".django" in info.name:
            continue
        try:
            module = importlib.import_module(info.name)
        except Exception:  # an optional extra not installed
            continue
        found = getattr(module, "FAILURE_CODES", None)
        if isinstance(found, dict) and all(isinstance(v, str) for v in found.values()):
            table = dict(found)
            break
    if not table:
        raise LookupError("no FAILURE_CODES table found in forklift")
    return {**table, **MORE_FAILURE_CODES}


def error_classes() -> list[tuple[str, type[Any]]]:
    """Every exception of the public API with a ``code``: forklift's names, forklift.ops',
    then those of the kinds built on the public API (ledger, partitions)."""
    import forklift
    import forklift.ledger
    import forklift.ops
    import forklift.partitions
    import forklift.webhooks

    out: list[tuple[str, type[Any]]] = []
    seen: set[type[Any]] = set()
    for where, module, names in (
        ("forklift", forklift, forklift.__all__),
        ("forklift.ops", forklift.ops, getattr(forklift.ops, "__all__", [])),
        ("forklift.ledger", forklift.ledger, forklift.ledger.__all__),
        ("forklift.partitions", forklift.partitions, forklift.partitions.__all__),
        ("forklift.webhooks", forklift.webhooks, forklift.webhooks.__all__),
    ):
        for name in names:
            obj = getattr(module, name, None)
            if (
                inspect.isclass(obj)
                and issubclass(obj, Exception)
                and isinstance(getattr(obj, "code", None), str)
                and obj not in seen
            ):
                seen.add(obj)
                out.append((f"{where}.{name}", obj))
    return out


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def render() -> str:
    out = [
        "# Failure codes",
        "",
        "Generated from the code when this site is built.",
        "",
        "## In a job's error history",
        "",
        "Each failed attempt appends one entry to the job's error history with one of these "
        "codes, or one of the kind's own declared `failure_codes` (a `Fail(code)` with a code "
        "the kind did not declare is stored as `internal_error`). A durable call whose own "
        "arguments are refused inside a handler fails the job at once with that refusal's "
        "code (`not_json`, `invalid_option`). [Retries and failure codes](../how-to/retries.md) "
        "says what each outcome does to the job.",
        "",
        "| code | meaning |",
        "| --- | --- |",
        *(f"| `{code}` | {_cell(text)} |" for code, text in failure_codes().items()),
        "",
        "## Raised by the API",
        "",
        "Every error forklift raises on purpose is a `ForkliftError` with a stable `code`; "
        "`exc.to_dict()` gives `{\"code\", \"message\", ...detail}` for an HTTP layer. The CLI "
        "prints the same code: `error: <what was wrong and what to do> (<code>)`.",
        "",
        "| exception | `code` | subclass of | when |",
        "| --- | --- | --- | --- |",
    ]
    for name, cls in error_classes():
        base = next((b.__name__ for b in cls.__mro__[1:] if hasattr(b, "code")), "Exception")
        doc = inspect.getdoc(cls) or ""
        doc = "" if doc == inspect.getdoc(cls.__mro__[1]) else doc
        doc = doc or WHEN.get(cls.__name__, "")
        out.append(f"| `{name}` | `{cls.code}` | `{base}` | {_cell(doc.split(chr(10) * 2)[0])} |")
    out.append("")
    return "\n".join(out)
