"""Cron calendar: time zones, daylight saving gaps and repeats, declarations. No database."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from forklift import ConfigError, Forklift, JobContext
from forklift._features.cron import instants, next_tick, normalise, ticks_between, zone_of


def utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=UTC)  # type: ignore[misc]


def local(at: datetime, tz: str) -> str:
    return at.astimezone(zone_of(tz)).strftime("%Y-%m-%d %H:%M %Z")


def day_ticks(expr: str, tz: str, day: tuple[int, int, int]) -> list[datetime]:
    """Every tick of one local calendar day (and a margin either side, filtered)."""
    zone = zone_of(tz)
    start = datetime(*day, tzinfo=zone).astimezone(UTC)
    got = ticks_between(expr, tz, start - timedelta(seconds=1), start + timedelta(hours=26), 500)
    return [t for t in got if t.astimezone(zone).date() == start.astimezone(zone).date()]


# -- daylight saving time -----------------------------------------------------------------------
def test_daily_0230_on_spring_forward_day_runs_once_right_after_the_gap() -> None:
    # Europe/Berlin 2024-03-31: 02:00 CET becomes 03:00 CEST (01:00 UTC); 02:30 never happens.
    ticks = day_ticks("30 2 * * *", "Europe/Berlin", (2024, 3, 31))
    assert ticks == [utc(2024, 3, 31, 1, 0)]
    assert local(ticks[0], "Europe/Berlin") == "2024-03-31 03:00 CEST"
    # The days either side run at 02:30 local as usual.
    assert [local(t, "Europe/Berlin") for t in day_ticks("30 2 * * *", "Europe/Berlin", (2024, 3, 30))] == [
        "2024-03-30 02:30 CET"
    ]
    assert [local(t, "Europe/Berlin") for t in day_ticks("30 2 * * *", "Europe/Berlin", (2024, 4, 1))] == [
        "2024-04-01 02:30 CEST"
    ]


def test_daily_0230_on_fall_back_day_runs_once_at_the_first_occurrence() -> None:
    # Europe/Berlin 2024-10-27: 03:00 CEST becomes 02:00 CET (01:00 UTC); 02:30 happens twice.
    ticks = day_ticks("30 2 * * *", "Europe/Berlin", (2024, 10, 27))
    assert ticks == [utc(2024, 10, 27, 0, 30)]
    assert local(ticks[0], "Europe/Berlin") == "2024-10-27 02:30 CEST"


def test_hourly_schedules_follow_real_time_across_both_transitions() -> None:
    # Every hour at :30 — the hour that does not exist has no tick, the repeated one has two.
    spring = day_ticks("30 * * * *", "Europe/Berlin", (2024, 3, 31))
    fall = day_ticks("30 * * * *", "Europe/Berlin", (2024, 10, 27))
    assert len(spring) == 23 and len(fall) == 25
    assert all(b - a == timedelta(hours=1) for a, b in itertools.pairwise(spring))
    assert all(b - a == timedelta(hours=1) for a, b in itertools.pairwise(fall))
    repeated = [local(t, "Europe/Berlin") for t in fall if t.astimezone(zone_of("Europe/Berlin")).hour == 2]
    assert repeated == ["2024-10-27 02:30 CEST", "2024-10-27 02:30 CET"]


def test_every_five_minutes_keeps_its_rhythm_through_the_repeated_hour() -> None:
    fall = day_ticks("*/5 * * * *", "Europe/Berlin", (2024, 10, 27))
    assert len(fall) == 25 * 12
    assert all(b - a == timedelta(minutes=5) for a, b in itertools.pairwise(fall))
    spring = day_ticks("*/5 * * * *", "Europe/Berlin", (2024, 3, 31))
    assert len(spring) == 23 * 12


def test_several_wall_times_in_one_gap_fire_once() -> None:
    # 02:00, 02:15, 02:30 and 02:45 all fall in the gap; they are one instant, so one run.
    ticks = day_ticks("0,15,30,45 2 * * *", "Europe/Berlin", (2024, 3, 31))
    assert ticks == [utc(2024, 3, 31, 1, 0)]


def test_daily_runs_once_on_transition_days_in_other_zones() -> None:
    # New York: 02:00 EST -> 03:00 EDT on 2024-03-10; 02:00 EDT -> 01:00 EST on 2024-11-03,
    # so there 01:30 is the wall time that happens twice.
    assert day_ticks("30 2 * * *", "America/New_York", (2024, 3, 10)) == [utc(2024, 3, 10, 7, 0)]
    assert day_ticks("30 1 * * *", "America/New_York", (2024, 11, 3)) == [utc(2024, 11, 3, 5, 30)]
    assert day_ticks("30 2 * * *", "America/New_York", (2024, 11, 3)) == [utc(2024, 11, 3, 7, 30)]
    # Sydney, southern hemisphere: 02:00 -> 03:00 on 2024-10-06; 03:00 -> 02:00 on 2024-04-07.
    assert day_ticks("30 2 * * *", "Australia/Sydney", (2024, 10, 6)) == [utc(2024, 10, 5, 16, 0)]
    assert day_ticks("30 2 * * *", "Australia/Sydney", (2024, 4, 7)) == [utc(2024, 4, 6, 15, 30)]


def test_half_hour_shift_of_lord_howe() -> None:
    # Australia/Lord_Howe moves its clock by 30 minutes: 02:00 -> 02:30 on 2024-10-06.
    ticks = day_ticks("15 2 * * *", "Australia/Lord_Howe", (2024, 10, 6))
    assert len(ticks) == 1
    assert local(ticks[0], "Australia/Lord_Howe").endswith("02:30 +11")
    # 01:30-02:00 happens twice on 2024-04-07 (+11 -> +10:30); a 01:45 job runs once.
    assert len(day_ticks("45 1 * * *", "Australia/Lord_Howe", (2024, 4, 7))) == 1


def test_the_same_cron_in_different_zones() -> None:
    after, until = utc(2024, 6, 1, 0, 0), utc(2024, 6, 2, 0, 0)
    # 09:00 in Tokyo is midnight UTC: the window (after, until] holds the second one.
    assert ticks_between("0 9 * * *", "Asia/Tokyo", after, until) == [utc(2024, 6, 2, 0, 0)]
    assert ticks_between("0 9 * * *", "UTC", after, until) == [utc(2024, 6, 1, 9, 0)]
    assert ticks_between("0 9 * * *", "America/Los_Angeles", after, until) == [utc(2024, 6, 1, 16, 0)]
    assert ticks_between("0 9 * * *", "Asia/Kolkata", after, until) == [utc(2024, 6, 1, 3, 30)]
    # Winter: Los Angeles is UTC-8, so the same 09:00 is an hour later in UTC.
    assert next_tick("0 9 * * *", "America/Los_Angeles", utc(2024, 12, 1)) == utc(2024, 12, 1, 17, 0)


def test_next_tick_crosses_the_repeat_in_instant_order() -> None:
    # 02:56 CEST on the fall-back day: 03:00 CEST never comes; 02:00 CET (01:00 UTC) is next.
    assert next_tick("*/5 * * * *", "Europe/Berlin", utc(2024, 10, 27, 0, 56)) == utc(2024, 10, 27, 1, 0)
    assert next_tick("30 2 * * *", "Europe/Berlin", utc(2024, 10, 27, 0, 30)) == utc(2024, 10, 28, 1, 30)
    assert next_tick("30 2 * * *", "Europe/Berlin", utc(2024, 3, 30, 12)) == utc(2024, 3, 31, 1, 0)


def test_limit_keeps_the_most_recent_ticks() -> None:
    after, until = utc(2024, 1, 1, 0, 0), utc(2024, 1, 1, 1, 0)
    assert ticks_between("*/5 * * * *", "UTC", after, until, 3) == [
        utc(2024, 1, 1, 0, 50), utc(2024, 1, 1, 0, 55), utc(2024, 1, 1, 1, 0)
    ]
    assert ticks_between("*/5 * * * *", "UTC", after, until, 1) == [utc(2024, 1, 1, 1, 0)]
    assert ticks_between("*/5 * * * *", "UTC", after, until, 100)[0] == utc(2024, 1, 1, 0, 5)
    assert ticks_between("*/5 * * * *", "UTC", until, until, 5) == []
    # A long outage costs as much as the limit asks, not one step per missed tick.
    assert ticks_between("* * * * * *", "UTC", utc(2020, 1, 1), utc(2024, 1, 1), 2) == [
        utc(2023, 12, 31, 23, 59, 59), utc(2024, 1, 1)
    ]


def test_seconds_field_and_aliases() -> None:
    assert normalise("@daily") == "0 0 * * *"
    assert normalise("  */5   * * * * ") == "*/5 * * * *"
    assert ticks_between("* * * * * */20", "UTC", utc(2024, 1, 1), utc(2024, 1, 1, 0, 1), 10) == [
        utc(2024, 1, 1, 0, 0, 20), utc(2024, 1, 1, 0, 0, 40), utc(2024, 1, 1, 0, 1)
    ]


@pytest.mark.parametrize("bad", ["", "* * *", "61 * * * *", "* * * * * * * *", "@often", "a b c d e"])
def test_invalid_cron_is_refused(bad: str) -> None:
    with pytest.raises(ConfigError, match="not valid"):
        normalise(bad)


def test_unknown_zone_is_refused() -> None:
    with pytest.raises(ConfigError, match="unknown time zone"):
        zone_of("Mars/Olympus_Mons")


DST_ZONES = ["Europe/Berlin", "America/New_York", "Australia/Sydney", "Australia/Lord_Howe",
             "America/Santiago", "UTC", "Asia/Kolkata"]
CRONS = ["30 2 * * *", "*/7 * * * *", "0 * * * *", "15,45 1-3 * * *", "0 0 * * 0", "*/30 * * * *"]


@settings(max_examples=150, deadline=None)
@given(
    tz=st.sampled_from(DST_ZONES),
    expr=st.sampled_from(CRONS),
    start=st.datetimes(min_value=datetime(2023, 1, 1), max_value=datetime(2026, 1, 1)),
    hours=st.integers(min_value=1, max_value=72),
)
def test_ticks_between_agrees_with_stepping_next_tick(
    tz: str, expr: str, start: datetime, hours: int
) -> None:
    after = start.replace(tzinfo=UTC)
    until = after + timedelta(hours=hours)
    walked: list[datetime] = []
    at = after
    while True:
        at = next_tick(expr, tz, at)
        if at > until:
            break
        walked.append(at)
    assert ticks_between(expr, tz, after, until, 10_000) == walked
    assert walked == sorted(set(walked))
    # Each tick is a wall time the expression names (or the end of the gap that swallowed one).
    zone = zone_of(tz)
    for t in walked:
        wall = t.astimezone(zone).replace(tzinfo=None)
        assert t in instants(wall, zone, True) or t.astimezone(zone).utcoffset() != (
            t - timedelta(hours=3)).astimezone(zone).utcoffset()


# -- declarations -------------------------------------------------------------------------------
def _app() -> Forklift:
    return Forklift("postgresql://unused")


def test_periodic_stacks_on_a_job_and_validates_args() -> None:
    app = _app()

    @app.periodic("*/5 * * * *", tz="Europe/Berlin", args={"n": 3})
    @app.job(name="t.report")
    def report(ctx: JobContext, args: dict[str, int]) -> None:
        return None

    s = app.schedules["t.report"]
    assert (s.cron, s.tz, s.policy, s.max_catch_up, s.args) == (
        "*/5 * * * *", "Europe/Berlin", "skip", 1, {"n": 3})
    assert report.name == "t.report"  # the decorator hands the kind back unchanged
    with pytest.raises(ConfigError, match="already declared"):
        app.schedule("t.report", cron="@hourly")
    two = app.schedule(report, cron="@hourly", name="t.report.hourly", policy="catch_up")
    assert two.max_catch_up == 10


def test_periodic_refuses_bad_declarations() -> None:
    app = _app()

    @app.job(name="t.typed")
    def typed(ctx: JobContext, n: int) -> None:
        return None

    cases: list[tuple[dict[str, Any], str]] = [
        ({"cron": "nope"}, "not valid"),
        ({"cron": "@daily", "tz": "Nowhere/City"}, "unknown time zone"),
        ({"cron": "@daily", "policy": "sometimes"}, "policy"),
        ({"cron": "@daily", "policy": "catch_up", "max_catch_up": 0}, "max_catch_up"),
    ]
    for options, message in cases:
        with pytest.raises(ConfigError, match=message):
            app.schedule(typed, **options)
    with pytest.raises(Exception, match=r"t\.typed"):
        app.schedule(typed, cron="@daily", args={"not": "an int"})
    with pytest.raises(ConfigError, match="above"):
        app.periodic("@daily")(lambda ctx, x: None)  # type: ignore[arg-type]
    assert app.schedules == {}
