"""``slotlock.schedule.next_firing``: the first firing of a cron strictly after a moment, by EventBridge
Scheduler's daylight-saving rules (the read API's ``Cache-Control: max-age`` runs up to it)."""

from __future__ import annotations

import datetime as dt
import itertools
import zoneinfo

import pytest

from slotlock.schedule import CronError, firings_between, next_firing

UTC = dt.UTC
NEW_YORK = "America/New_York"
EVERY_30_MIN = "cron(0/30 * * * ? *)"
DAILY_6AM = "cron(0 6 * * ? *)"


def at(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text)


@pytest.mark.parametrize(
    ("after", "expected"),
    [
        ("2026-11-22T00:00:00Z", "2026-11-22T00:30:00Z"),  # strictly after: not the firing itself
        ("2026-11-21T23:59:59.999999Z", "2026-11-22T00:00:00Z"),
        ("2026-11-22T00:10:30Z", "2026-11-22T00:30:00Z"),
        ("2026-11-22T00:29:59Z", "2026-11-22T00:30:00Z"),
        ("2026-11-22T00:30:00.000001Z", "2026-11-22T01:00:00Z"),
        ("2026-12-31T23:45:00Z", "2027-01-01T00:00:00Z"),
        ("2028-02-28T23:30:00Z", "2028-02-29T00:00:00Z"),
    ],
)
def test_every_30_minutes(after: str, expected: str) -> None:
    firing = next_firing(EVERY_30_MIN, "UTC", at(after))
    assert firing == at(expected) and firing is not None and firing.tzinfo == UTC


def test_consecutive_firings_are_30_minutes_apart_and_strictly_increasing() -> None:
    moment = at("2026-11-22T00:00:00Z")
    for _ in range(100):
        following = next_firing(EVERY_30_MIN, "UTC", moment)
        assert following is not None and following > moment
        assert (following - moment).total_seconds() == 1800
        moment = following


def test_the_moment_may_be_given_in_any_offset() -> None:
    # 19:10 in New York (EST) is 00:10Z
    local = dt.datetime(2026, 11, 21, 19, 10, tzinfo=zoneinfo.ZoneInfo(NEW_YORK))
    assert next_firing(EVERY_30_MIN, "UTC", local) == at("2026-11-22T00:30:00Z")


@pytest.mark.parametrize(
    ("after", "expected"),
    [
        # March: clocks spring forward on Sunday 2026-03-08 (EST UTC-5 -> EDT UTC-4): 06:00 is 11:00Z, then 10:00Z
        ("2026-03-06T11:00:00Z", "2026-03-07T11:00:00Z"),
        ("2026-03-07T11:00:00Z", "2026-03-08T10:00:00Z"),  # 23 h later
        ("2026-03-08T07:00:00Z", "2026-03-08T10:00:00Z"),  # 02:00 EST: the change happens before 06:00
        ("2026-03-08T10:00:00Z", "2026-03-09T10:00:00Z"),
        # November: clocks fall back on Sunday 2026-11-01 (EDT -> EST): 06:00 is 10:00Z, then 11:00Z
        ("2026-10-31T10:00:00Z", "2026-11-01T11:00:00Z"),  # 25 h later
        ("2026-11-01T10:30:00Z", "2026-11-01T11:00:00Z"),  # 05:30 EST: 06:00 has not come yet
        ("2026-11-01T11:00:00Z", "2026-11-02T11:00:00Z"),
        ("2026-11-22T02:00:07Z", "2026-11-22T11:00:00Z"),
    ],
)
def test_a_daily_new_york_cron_across_the_daylight_saving_changes(after: str, expected: str) -> None:
    assert next_firing(DAILY_6AM, NEW_YORK, at(after)) == at(expected)


def test_a_time_that_does_not_exist_is_skipped_and_a_repeated_one_fires_once() -> None:
    # 02:30 does not exist on 2026-03-08 in New York (02:00 -> 03:00): that day has no firing
    assert next_firing("cron(30 2 * * ? *)", NEW_YORK, at("2026-03-07T07:30:00Z")) == at("2026-03-09T06:30:00Z")
    # 01:30 happens twice on 2026-11-01 (EDT, then EST): it fires once, at its first instant (05:30Z)
    assert next_firing("cron(30 1 * * ? *)", NEW_YORK, at("2026-11-01T04:00:00Z")) == at("2026-11-01T05:30:00Z")
    assert next_firing("cron(30 1 * * ? *)", NEW_YORK, at("2026-11-01T05:30:00Z")) == at("2026-11-02T06:30:00Z")


@pytest.mark.parametrize(
    ("expression", "timezone"),
    [
        (EVERY_30_MIN, NEW_YORK),
        (DAILY_6AM, NEW_YORK),
        ("cron(30 1,2 * * ? *)", NEW_YORK),
        ("cron(15 3 ? * MON-FRI *)", "Europe/Berlin"),
    ],
)
def test_each_firing_is_the_next_one_of_the_previous(expression: str, timezone: str) -> None:
    # GIVEN every firing of the schedule in the days around 2026's daylight-saving changes of its zone
    windows = {
        NEW_YORK: [("2026-03-06T00:00:00Z", "2026-03-11T00:00:00Z"), ("2026-10-30T00:00:00Z", "2026-11-04T00:00:00Z")],
        "Europe/Berlin": [
            ("2026-03-24T00:00:00Z", "2026-04-03T00:00:00Z"),
            ("2026-10-20T00:00:00Z", "2026-10-30T00:00:00Z"),
        ],
    }
    for start, end in windows[timezone]:
        firings = firings_between(expression, timezone, at(start), at(end))
        assert len(firings) >= 5
        # WHEN / THEN next_firing of each firing is the following one, and of a moment just before it, itself
        for earlier, later in itertools.pairwise(firings):
            assert next_firing(expression, timezone, earlier) == later, earlier
            assert next_firing(expression, timezone, later - dt.timedelta(microseconds=1)) == later


def test_a_year_restricted_cron_that_never_fires_again_is_none() -> None:
    assert next_firing("cron(0 12 * * ? 2020)", "UTC", at("2026-11-22T00:00:00Z")) is None
    assert next_firing("cron(0 12 * * ? 2020-2025)", NEW_YORK, at("2026-01-01T00:00:00Z")) is None
    # the last firing of the listed years, then none
    assert next_firing("cron(0 12 31 12 ? 2026)", "UTC", at("2026-12-31T11:59:00Z")) == at("2026-12-31T12:00:00Z")
    assert next_firing("cron(0 12 31 12 ? 2026)", "UTC", at("2026-12-31T12:00:00Z")) is None
    # a listed year ahead is found
    assert next_firing("cron(0 12 1 1 ? 2030)", "UTC", at("2026-11-22T00:00:00Z")) == at("2030-01-01T12:00:00Z")


def test_a_rare_firing_is_found_within_max_days_only() -> None:
    leap_day = "cron(0 0 29 2 ? *)"
    assert next_firing(leap_day, "UTC", at("2026-03-01T00:00:00Z")) == at("2028-02-29T00:00:00Z")
    assert next_firing(leap_day, "UTC", at("2026-03-01T00:00:00Z"), max_days=100) is None


@pytest.mark.parametrize(
    ("expression", "after", "expected"),
    [
        ("cron(0 9 ? * 2#1 *)", "2026-11-22T00:00:00Z", "2026-12-07T09:00:00Z"),  # the first Monday
        ("cron(0 9 L * ? *)", "2026-11-22T00:00:00Z", "2026-11-30T09:00:00Z"),  # the last day of the month
        ("cron(0 9 LW * ? *)", "2027-01-01T00:00:00Z", "2027-01-29T09:00:00Z"),  # the last weekday (31st: Sunday)
        ("cron(0 9 ? * 6L *)", "2026-11-22T00:00:00Z", "2026-11-27T09:00:00Z"),  # the last Friday
        ("cron(0 9 15W * ? *)", "2026-11-01T00:00:00Z", "2026-11-16T09:00:00Z"),  # the 15th is a Sunday
        ("cron(0/15 9-10 ? * SAT,SUN *)", "2026-11-20T10:50:00Z", "2026-11-21T09:00:00Z"),
    ],
)
def test_day_fields(expression: str, after: str, expected: str) -> None:
    assert next_firing(expression, "UTC", at(after)) == at(expected)


@pytest.mark.parametrize(
    ("expression", "timezone"),
    [
        ("rate(5 minutes)", "UTC"),
        ("cron(0 6 * * *)", "UTC"),
        ("cron(61 * * * ? *)", "UTC"),
        (DAILY_6AM, "Mars/Olympus"),
    ],
)
def test_what_cannot_be_evaluated_is_a_cron_error(expression: str, timezone: str) -> None:
    with pytest.raises(CronError):
        next_firing(expression, timezone, at("2026-11-22T00:00:00Z"))
