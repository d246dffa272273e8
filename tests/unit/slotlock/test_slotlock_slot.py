"""Slot parsing: every racer of one period derives the same Slot from the event, never from a clock."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from slotlock import InvalidEventError, Slot
from slotlock.slot import MAX_TIME_LENGTH

EPOCH_0030 = int(dt.datetime(2026, 11, 22, 0, 30, tzinfo=dt.UTC).timestamp())


def test_scheduler_input_shape_gives_the_scheduled_time() -> None:
    # GIVEN an EventBridge Scheduler input carrying <aws.scheduler.scheduled-time> and extra fields
    event = {"scheduled_time": "2026-11-22T00:30:00Z", "execution_id": "e-1", "attempt": "1"}

    # WHEN the slot is derived
    slot = Slot.from_event(event)

    # THEN it is that minute, in canonical form
    assert slot == Slot(EPOCH_0030)
    assert slot.iso == "2026-11-22T00:30:00Z"
    assert slot.epoch_ms == EPOCH_0030 * 1000
    assert slot.datetime == dt.datetime(2026, 11, 22, 0, 30, tzinfo=dt.UTC)
    assert str(slot) == slot.iso


def test_scheduled_rule_event_shape_gives_its_time() -> None:
    # GIVEN a scheduled rule's event
    event = {
        "version": "0",
        "id": "x",
        "detail-type": "Scheduled Event",
        "source": "aws.events",
        "account": "123456789012",
        "time": "2026-11-22T00:30:00Z",
        "region": "us-east-1",
        "resources": ["arn:aws:events:us-east-1:123456789012:rule/every-30"],
        "detail": {},
    }

    # WHEN / THEN
    assert Slot.from_event(event) == Slot(EPOCH_0030)


@pytest.mark.parametrize(
    "text",
    [
        "2026-11-22T00:30:00Z",
        "2026-11-22T00:30:00z",
        "2026-11-22T00:30:00+00:00",
        "2026-11-22T02:30:00+02:00",
        "2026-11-21T19:30:00-05:00",
        "2026-11-22T00:30:59.999Z",  # floored to the minute
        "2026-11-22T00:30:17+00:00",
        "  2026-11-22T00:30:00Z ",
    ],
)
def test_offsets_and_seconds_all_name_the_same_minute(text: str) -> None:
    # GIVEN racers whose payloads differ in offset notation or seconds
    # WHEN each parses its time
    slot = Slot.parse(text)

    # THEN all agree on one slot (UTC, floored to the minute)
    assert slot.epoch_s == EPOCH_0030
    assert slot.iso == "2026-11-22T00:30:00Z"


def test_slot_constructor_floors_to_the_minute() -> None:
    # GIVEN / WHEN a slot built from an epoch with seconds
    # THEN it is floored, and equal to the floored one
    assert Slot(EPOCH_0030 + 59) == Slot(EPOCH_0030)
    assert Slot(EPOCH_0030 + 59).epoch_s == EPOCH_0030


def test_slot_constructor_rejects_non_integers() -> None:
    # GIVEN / WHEN / THEN a float or a bool is not an epoch
    with pytest.raises(TypeError):
        Slot(float(EPOCH_0030))  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        Slot(True)  # type: ignore[arg-type]


def test_slots_order_by_time() -> None:
    # GIVEN three consecutive half-hour slots, shuffled
    a, b, c = Slot(EPOCH_0030), Slot(EPOCH_0030 + 1800), Slot(EPOCH_0030 + 3600)

    # WHEN / THEN they order by scheduled time
    assert sorted([c, a, b]) == [a, b, c]
    assert a < b < c
    assert max(a, c) == c
    assert Slot.parse("2026-11-22T01:00:00+01:00") < Slot.parse("2026-11-22T00:31:00Z")


def test_naive_time_is_rejected() -> None:
    # GIVEN a time without an offset (its meaning would depend on each racer's zone)
    # WHEN / THEN it is refused, naming the field
    with pytest.raises(InvalidEventError, match="no time zone") as caught:
        Slot.from_event({"scheduled_time": "2026-11-22T00:30:00"})
    assert caught.value.field == "scheduled_time"


@pytest.mark.parametrize(
    ("event", "field"),
    [
        ({"scheduled_time": "not a time"}, "scheduled_time"),
        ({"scheduled_time": "<aws.scheduler.scheduled-time>"}, "scheduled_time"),  # placeholder not expanded
        ({"scheduled_time": ""}, "scheduled_time"),
        ({"scheduled_time": "2026-11-22"}, "scheduled_time"),  # a date is naive midnight
        ({"scheduled_time": "2026-13-22T00:30:00Z"}, "scheduled_time"),
        ({"scheduled_time": "2026-11-22T00:30:00+25:00"}, "scheduled_time"),
        ({"scheduled_time": "1999-12-31T23:59:00Z"}, "scheduled_time"),  # outside 2000..2099
        ({"scheduled_time": "2100-01-01T00:00:00Z"}, "scheduled_time"),
        ({"scheduled_time": "9999-12-31T23:59:59-23:59"}, "scheduled_time"),
        ({"scheduled_time": "0001-01-01T00:00:00+23:59"}, "scheduled_time"),
        ({"scheduled_time": "2026-11-22T00:30:00Z" + " " * MAX_TIME_LENGTH}, "scheduled_time"),  # huge
        ({"scheduled_time": "9" * 100_000}, "scheduled_time"),
        ({"scheduled_time": 1_795_307_400}, "scheduled_time"),  # wrong type: number
        ({"scheduled_time": None}, "scheduled_time"),
        ({"scheduled_time": True}, "scheduled_time"),
        ({"scheduled_time": ["2026-11-22T00:30:00Z"]}, "scheduled_time"),
        ({"scheduled_time": {"S": "2026-11-22T00:30:00Z"}}, "scheduled_time"),
        ({}, "scheduled_time"),  # missing
        ({"time": "2026-11-22T00:30:00Z"}, "scheduled_time"),  # a rule's time without its detail-type
        ({"detail-type": "Scheduled Event", "source": "aws.events"}, "time"),  # missing
        ({"detail-type": "Scheduled Event", "time": "yesterday"}, "time"),
        ({"detail-type": "Scheduled Event", "time": 0}, "time"),
    ],
)
def test_malformed_event_raises_invalid_event_error_naming_the_field(event: dict[str, Any], field: str) -> None:
    # GIVEN an event without a usable scheduled time
    # WHEN the slot is derived
    with pytest.raises(InvalidEventError) as caught:
        Slot.from_event(event)

    # THEN the error names the offending field (and is a ValueError for generic handlers)
    assert caught.value.field == field
    assert repr(field) in str(caught.value)
    assert isinstance(caught.value, ValueError)


@pytest.mark.parametrize("event", [None, "2026-11-22T00:30:00Z", ["scheduled_time"], 42])
def test_event_that_is_not_an_object_is_rejected(event: Any) -> None:
    # GIVEN / WHEN / THEN
    with pytest.raises(InvalidEventError) as caught:
        Slot.from_event(event)
    assert caught.value.field == "<event>"


def test_too_long_time_is_refused_before_parsing() -> None:
    # GIVEN a hostile, huge time string
    text = "2" * (MAX_TIME_LENGTH + 1)

    # WHEN / THEN the message gives the length, not the payload
    with pytest.raises(InvalidEventError, match=f"{MAX_TIME_LENGTH + 1} characters") as caught:
        Slot.parse(text, field="time")
    assert caught.value.field == "time"
