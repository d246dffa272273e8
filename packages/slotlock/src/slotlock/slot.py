"""Schedule slots: the scheduled time of one period, taken from the event, never from a clock.

Every racer of one period receives the same scheduled time (EventBridge Scheduler's
``<aws.scheduler.scheduled-time>`` context attribute, or a scheduled rule event's ``time``), so every
racer derives the same :class:`Slot`, whatever its own clock says.

- Scheduler context attributes: https://docs.aws.amazon.com/scheduler/latest/UserGuide/managing-schedule-context-attributes.html
- Scheduled rule event shape: https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-run-lambda-schedule.html
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .errors import InvalidEventError

#: Earliest and latest scheduled time accepted (anything else is a corrupted or hostile event).
MIN_EPOCH_S = 946_684_800  # 2000-01-01T00:00:00Z
MAX_EPOCH_S = 4_102_444_800  # 2100-01-01T00:00:00Z
#: Longest time string accepted; ISO 8601 with offset and nanoseconds is about 35 characters.
MAX_TIME_LENGTH = 64

SCHEDULER_TIME_FIELD = "scheduled_time"
RULE_TIME_FIELD = "time"


@dataclass(frozen=True, order=True)
class Slot:
    """One schedule period, identified by its scheduled time.

    Attributes
    ----------
    epoch_s:
        Scheduled time in epoch seconds (UTC), floored to the minute: cron's granularity is one minute,
        so racers whose payloads differ only in seconds still agree.

    Slots order by ``epoch_s``; ``iso`` is the canonical text form ``YYYY-MM-DDTHH:MM:SSZ`` used in keys.
    """

    epoch_s: int

    def __post_init__(self) -> None:
        if not isinstance(self.epoch_s, int) or isinstance(self.epoch_s, bool):
            raise TypeError(f"Slot.epoch_s must be int, got {type(self.epoch_s).__name__}")
        if self.epoch_s % 60:
            object.__setattr__(self, "epoch_s", self.epoch_s - self.epoch_s % 60)

    @property
    def epoch_ms(self) -> int:
        """Scheduled time in epoch milliseconds."""
        return self.epoch_s * 1000

    @property
    def iso(self) -> str:
        """Canonical form, e.g. ``2026-11-22T00:30:00Z``."""
        return dt.datetime.fromtimestamp(self.epoch_s, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    @property
    def datetime(self) -> dt.datetime:
        """Scheduled time as an aware UTC datetime."""
        return dt.datetime.fromtimestamp(self.epoch_s, dt.UTC)

    def __str__(self) -> str:
        return self.iso

    @classmethod
    def parse(cls, text: Any, *, field: str = SCHEDULER_TIME_FIELD) -> Slot:
        """Parse an ISO 8601 time with an explicit offset (``Z`` or ``+hh:mm``).

        Raises
        ------
        InvalidEventError
            Not a string, too long, not printable ASCII, unparseable, without a time zone, or outside 2000..2100.
        """
        if not isinstance(text, str):
            raise InvalidEventError(field, f"must be an ISO 8601 string, got {type(text).__name__}")
        if len(text) > MAX_TIME_LENGTH:
            raise InvalidEventError(field, f"is {len(text)} characters long; at most {MAX_TIME_LENGTH} expected")
        if not (text.isascii() and text.isprintable()):
            # e.g. a NUL byte, after which CPython's fromisoformat ignores the rest of the string
            raise InvalidEventError(field, f"{text!r} contains characters outside printable ASCII")
        candidate = text.strip()
        if candidate.endswith(("z", "Z")):
            candidate = candidate[:-1] + "+00:00"
        try:
            moment = dt.datetime.fromisoformat(candidate)
        except ValueError as exc:
            raise InvalidEventError(field, f"{text!r} is not an ISO 8601 time") from exc
        if moment.tzinfo is None or moment.utcoffset() is None:
            raise InvalidEventError(field, f"{text!r} has no time zone; expected e.g. 2026-11-22T00:30:00Z")
        epoch_s = int(moment.timestamp())
        if not MIN_EPOCH_S <= epoch_s < MAX_EPOCH_S:
            raise InvalidEventError(field, f"{text!r} is outside the accepted years 2000..2099")
        return cls(epoch_s)

    @classmethod
    def from_event(cls, event: Any) -> Slot:
        """The slot of an invocation event.

        Accepted shapes:

        - EventBridge Scheduler input ``{"scheduled_time": "<aws.scheduler.scheduled-time>", ...}``;
        - a scheduled rule's event ``{"detail-type": "Scheduled Event", "source": "aws.events", "time": ...}``.

        Unknown extra fields are ignored.

        Raises
        ------
        InvalidEventError
            The event is not an object, or carries neither shape, or its time is malformed.
        """
        if not isinstance(event, Mapping):
            raise InvalidEventError("<event>", f"must be a JSON object, got {type(event).__name__}")
        if SCHEDULER_TIME_FIELD in event:
            return cls.parse(event[SCHEDULER_TIME_FIELD], field=SCHEDULER_TIME_FIELD)
        if event.get("detail-type") == "Scheduled Event":
            if RULE_TIME_FIELD not in event:
                raise InvalidEventError(RULE_TIME_FIELD, "missing from the Scheduled Event")
            return cls.parse(event[RULE_TIME_FIELD], field=RULE_TIME_FIELD)
        raise InvalidEventError(
            SCHEDULER_TIME_FIELD,
            "missing: expected a Scheduler input with 'scheduled_time' or a rule's Scheduled Event with 'time'",
        )
