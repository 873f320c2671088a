"""How an outbound delivery reads an endpoint's answer: which statuses are done, terminal,
disabling or retried, how a ``Retry-After`` header is read, and how the delay it names is
clamped by the retry policy and spread upwards."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from forklift.webhooks import delivery


@pytest.mark.parametrize(("status", "verdict"), [
    (200, "delivered"), (204, "delivered"), (299, "delivered"),
    (410, "gone"),
    (400, "rejected"), (401, "rejected"), (404, "rejected"), (422, "rejected"),
    (408, "retry"), (409, "retry"), (425, "retry"), (429, "retry"),
    (500, "retry"), (502, "retry"), (503, "retry"), (301, "retry"),
])
def test_each_status_has_its_verdict(status: int, verdict: str) -> None:
    assert delivery.classify(status, frozenset({410})) == verdict


def test_a_configured_disabling_set_wins_over_the_other_rules() -> None:
    disable_on = frozenset({404, 503})
    assert [delivery.classify(s, disable_on) for s in (404, 503, 410, 500)] == [
        "gone", "gone", "rejected", "retry"]


def test_retry_after_reads_seconds_and_dates_and_ignores_nonsense() -> None:
    now = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert delivery.retry_after("120") == 120.0
    assert delivery.retry_after(" 7 ") == 7.0
    assert delivery.retry_after(format_datetime(now + timedelta(seconds=90), usegmt=True),
                                now=now) == 90.0
    # a date already past asks for no wait at all, never a negative one
    assert delivery.retry_after(format_datetime(now - timedelta(hours=1), usegmt=True),
                                now=now) == 0.0
    for junk in (None, "", "soon", "-5", "1.5", "٣"):
        assert delivery.retry_after(junk, now=now) is None


def test_a_named_delay_is_clamped_by_the_policy_and_never_sooner_than_asked() -> None:
    for _ in range(200):
        asked = delivery._named_delay(10.0, 3600.0)
        assert 10.0 <= asked <= 10.0 * (1 + delivery.JITTER)
        assert delivery._named_delay(86_400.0, 60.0) == 60.0
        assert 50.0 <= delivery._named_delay(50.0, 52.0) <= 52.0
