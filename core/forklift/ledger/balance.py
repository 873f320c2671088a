"""The checks a posting passes before any line of it is written."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any, Final

from pydantic import ValidationError

from forklift._base.names import shown
from forklift.ledger.currencies import ISO_4217
from forklift.ledger.errors import InvalidPosting, UnbalancedPosting
from forklift.ledger.posting import Posting

__all__ = ["BIGINT_MAX", "MAX_ENTRIES", "MAX_TEXT", "assert_balanced"]

#: The largest amount a line may carry (PostgreSQL's ``bigint``); a total beyond it could not
#: be stored or summed by the book.
BIGINT_MAX: Final = 2**63 - 1
#: The most lines one posting may carry: it is written in one statement and one transaction.
MAX_ENTRIES: Final = 1000
#: The longest key, account or tenant, in characters.
MAX_TEXT: Final = 200


def _field_of(error: Mapping[str, Any]) -> str:
    out = ""
    for part in error.get("loc", ()):
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "posting"


def _parsed(posting: Posting | Mapping[str, Any]) -> Posting:
    if isinstance(posting, Posting):
        return posting
    try:
        return Posting.model_validate(posting)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = _field_of(first)
        raise InvalidPosting(f"posting {field}: {first['msg']}", field=field,
                             reason=first["type"]) from None


def _text(value: str, field: str) -> None:
    if not value.strip():
        raise InvalidPosting(f"posting {field} is blank", field=field, reason="blank")
    if len(value) > MAX_TEXT:
        raise InvalidPosting(f"posting {field} is {len(value)} characters long, over the cap of"
                             f" {MAX_TEXT}", field=field, reason="too_long")
    if "\x00" in value:
        raise InvalidPosting(f"posting {field} holds a NUL character", field=field,
                             reason="nul_character")


def assert_balanced(
    posting: Posting | Mapping[str, Any],
    *,
    currencies: Collection[str] = ISO_4217,
    tenant: str | None = None,
) -> Posting:
    """The posting, checked; raise before anything is written unless it is balanced money.

    Refused with :class:`~forklift.ledger.InvalidPosting` (``ledger_entry_invalid``, naming the
    field): a blank key or account, fewer than two entries, an amount that is not an integer
    of minor units within a bigint, a currency not in ``currencies`` (ISO 4217 by default), a
    blank tenant, or a tenant other than ``tenant`` (the kind's, when it has one). Refused with
    :class:`~forklift.ledger.UnbalancedPosting` (``ledger_unbalanced``): a currency whose
    entries do not sum to zero on their own; an FX posting balances in each currency
    separately. Call it in an endpoint to refuse at the request.
    """
    checked = _parsed(posting)
    _text(checked.key, "key")
    if checked.tenant is not None:
        _text(checked.tenant, "tenant")
        if tenant is not None and checked.tenant != tenant:
            raise InvalidPosting(
                f"posting tenant {shown(checked.tenant)} differs from the kind's tenant"
                f" {shown(tenant)}", field="tenant", reason="tenant_mismatch")
    if len(checked.entries) < 2:
        raise InvalidPosting(f"a posting needs at least two entries, not {len(checked.entries)}",
                             field="entries", reason="too_few")
    if len(checked.entries) > MAX_ENTRIES:
        raise InvalidPosting(f"a posting carries at most {MAX_ENTRIES} entries, not"
                             f" {len(checked.entries)}", field="entries", reason="too_many")
    sums: dict[str, int] = {}
    for i, entry in enumerate(checked.entries):
        _text(entry.account, f"entries[{i}].account")
        money = entry.amount
        if money.currency not in currencies:
            field = f"entries[{i}].amount.currency"
            raise InvalidPosting(f"posting {field} {shown(money.currency)} is not an ISO 4217"
                                 " currency code", field=field, reason="unknown_currency")
        if abs(money.minor) > BIGINT_MAX:
            field = f"entries[{i}].amount.minor"
            raise InvalidPosting(f"posting {field} is beyond a bigint", field=field,
                                 reason="out_of_range")
        sums[money.currency] = sums.get(money.currency, 0) + money.minor
    off = {currency: total for currency, total in sorted(sums.items()) if total != 0}
    if off:
        listed = ", ".join(f"{currency} {total:+d}" for currency, total in off.items())
        raise UnbalancedPosting(f"posting {shown(checked.key)} does not balance: {listed} (minor"
                                " units; each currency must sum to zero)", sums=off)
    return checked
