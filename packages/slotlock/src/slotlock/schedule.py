"""The period of an EventBridge Scheduler ``cron(...)`` expression: the shortest and longest gap between
two consecutive firings, computed at synth time (standard library only, no AWS call).

The syntax is EventBridge's six fields ``minutes hours day-of-month month day-of-week year``, matched on the
wall-clock time of the schedule's time zone (``ScheduleExpressionTimezone``, default UTC), with
``*``, ``,``, ``-``, ``/``, ``?``, month and weekday names, ``L`` (last day of the month; ``nL`` in
day-of-week: the last such weekday), ``W`` (nearest weekday to a day of the month; ``LW``: the last
weekday of the month) and ``#`` (``n#k``: the k-th such weekday). Day-of-week numbers run from 1 (SUN)
to 7 (SAT). Reference:
https://docs.aws.amazon.com/scheduler/latest/UserGuide/schedule-types.html#cron-based

The stack needs the period to check the configuration (a Lambda timeout longer than the period, a
maximum event age older than a period) and to size alarms ("no success for two periods").

Daylight saving (https://docs.aws.amazon.com/scheduler/latest/UserGuide/schedule-types.html, "Daylight
savings time on EventBridge Scheduler"): a local time that does not exist (the clock springs forward) is
skipped; a local time that exists twice (the clock falls back) fires once, at its first instant. So a daily
06:00 schedule in America/New_York is 23 h or 25 h apart around the changes, and a daily 02:30 one in
Europe/Berlin skips a day (47 h). Gaps are computed on UTC instants: exactly (every firing of the day) on
the days around an offset change, by wall-clock arithmetic on the others, where it is exact.
"""

from __future__ import annotations

import calendar
import datetime as dt
import functools
import itertools
import re
import zoneinfo
from collections.abc import Callable
from dataclasses import dataclass

from .errors import CronError as CronError  # noqa: PLC0414 (defined in slotlock.errors, public here since 1.0)

MONTH_NAMES = {name.upper(): number for number, name in enumerate(calendar.month_abbr) if name}
# EventBridge numbers weekdays 1 (SUN) .. 7 (SAT).
WEEKDAY_NAMES = {"SUN": 1, "MON": 2, "TUE": 3, "WED": 4, "THU": 5, "FRI": 6, "SAT": 7}
MIN_YEAR, MAX_YEAR = 1970, 2199
#: Years scanned when the year field is ``*``: four consecutive years hold every weekday/leap-year mix
#: that matters for gaps (a fixed window, so two synths on different days give the same template).
DEFAULT_YEARS = range(2028, 2032)
#: At most this many listed years are scanned (a gap is between consecutive firings, so the first
#: years already show the shortest and the longest one for any realistic expression).
MAX_SCANNED_YEARS = 8
#: An EventBridge ``cron(...)`` expression; ``body`` holds its fields (the one pattern: the stack's job checks use it).
CRON_PATTERN = re.compile(r"cron\((?P<body>[^()]+)\)")


@dataclass(frozen=True)
class CronPeriod:
    """Gaps between consecutive firings, in seconds (equal for a regular schedule)."""

    shortest_s: int
    longest_s: int


def _values(field: str, lo: int, hi: int, names: dict[str, int] | None = None) -> set[int]:
    """Expand ``*``, lists, ranges and steps of one numeric field into its set of values."""
    result: set[int] = set()
    for part in field.split(","):
        base, _, step_text = part.partition("/")
        if step_text and not step_text.isdigit():
            raise CronError(f"bad step {part!r}")
        step = int(step_text) if step_text else 1
        if step < 1:
            raise CronError(f"bad step {part!r}")
        if base == "*":
            start, end = lo, hi
        elif "-" in base:
            first, _, last = base.partition("-")
            start, end = _number(first, lo, hi, names), _number(last, lo, hi, names)
        else:
            start = _number(base, lo, hi, names)
            end = hi if step_text else start
        if start > end:
            raise CronError(f"range {part!r} runs backwards")
        result.update(range(start, end + 1, step))
    return result


def _number(text: str, lo: int, hi: int, names: dict[str, int] | None) -> int:
    value = names.get(text.upper()) if names else None
    if value is None:
        if not text.isdigit():
            raise CronError(f"{text!r} is not a number from {lo} to {hi}")
        value = int(text)
    if not lo <= value <= hi:
        raise CronError(f"{value} is outside {lo}..{hi}")
    return value


def _weekday(day: dt.date) -> int:
    """EventBridge weekday number of ``day``: 1 (SUN) .. 7 (SAT)."""
    return day.isoweekday() % 7 + 1


def _day_of_month_matcher(field: str) -> Callable[[dt.date], bool]:
    if field in ("*", "?"):
        return lambda day: True
    if field == "L":
        return lambda day: day.day == calendar.monthrange(day.year, day.month)[1]
    if field == "LW":
        return lambda day: day == _last_weekday(day.year, day.month)
    if field.endswith("W"):
        target = _number(field[:-1], 1, 31, None)
        return lambda day: day == _nearest_weekday(day.year, day.month, target)
    days = _values(field, 1, 31)
    return lambda day: day.day in days


def _day_of_week_matcher(field: str) -> Callable[[dt.date], bool]:
    if field in ("*", "?"):
        return lambda day: True
    if "#" in field:
        weekday_text, _, nth_text = field.partition("#")
        weekday, nth = _number(weekday_text, 1, 7, WEEKDAY_NAMES), _number(nth_text, 1, 5, None)
        return lambda day: _weekday(day) == weekday and (day.day - 1) // 7 + 1 == nth
    if field.endswith("L") and len(field) > 1:
        weekday = _number(field[:-1], 1, 7, WEEKDAY_NAMES)
        return lambda day: _weekday(day) == weekday and day.day + 7 > calendar.monthrange(day.year, day.month)[1]
    weekdays = _values(field, 1, 7, WEEKDAY_NAMES)
    return lambda day: _weekday(day) in weekdays


def _last_weekday(year: int, month: int) -> dt.date:
    day = dt.date(year, month, calendar.monthrange(year, month)[1])
    while day.isoweekday() > 5:
        day -= dt.timedelta(days=1)
    return day


def _nearest_weekday(year: int, month: int, target: int) -> dt.date | None:
    """Quartz/EventBridge ``nW``: the weekday nearest to day ``target``, never leaving the month."""
    last = calendar.monthrange(year, month)[1]
    if target > last:
        return None
    day = dt.date(year, month, target)
    if day.isoweekday() == 6:  # Saturday -> Friday, or Monday when the 1st is a Saturday
        return day - dt.timedelta(days=1) if target > 1 else day + dt.timedelta(days=2)
    if day.isoweekday() == 7:  # Sunday -> Monday, or Friday when the Sunday ends the month
        return day + dt.timedelta(days=1) if target < last else day - dt.timedelta(days=2)
    return day


@dataclass(frozen=True)
class _Cron:
    """A parsed expression: its time zone, firing minutes of the day (sorted), listed years (``None``: any)
    and the day predicates."""

    zone: zoneinfo.ZoneInfo
    times_min: list[int]
    months: set[int]
    years: set[int] | None
    in_dom: Callable[[dt.date], bool]
    in_dow: Callable[[dt.date], bool]

    def fires_on(self, day: dt.date) -> bool:
        """Whether the day fields (month, day of month, day of week) match ``day`` (the year aside)."""
        return day.month in self.months and self.in_dom(day) and self.in_dow(day)


@functools.lru_cache(maxsize=64)
def _parse(expression: str, timezone: str) -> _Cron:
    match = CRON_PATTERN.fullmatch(expression.strip())
    if not match:
        raise CronError("not a cron(...) expression")
    fields = match["body"].split()
    if len(fields) != 6:
        raise CronError(f"{len(fields)} fields instead of 6")
    try:
        zone = zoneinfo.ZoneInfo(timezone)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError) as exc:
        raise CronError(f"unknown time zone {timezone!r}") from exc
    minutes_f, hours_f, dom_f, month_f, dow_f, year_f = fields
    minutes, hours = _values(minutes_f, 0, 59), _values(hours_f, 0, 23)
    return _Cron(
        zone=zone,
        times_min=sorted(hour * 60 + minute for hour in hours for minute in minutes),
        months=_values(month_f, 1, 12, MONTH_NAMES),
        years=_values(year_f, MIN_YEAR, MAX_YEAR) if year_f != "*" else None,
        in_dom=_day_of_month_matcher(dom_f.upper()),
        in_dow=_day_of_week_matcher(dow_f.upper()),
    )


@functools.lru_cache(maxsize=1024)
def cron_period(expression: str, timezone: str = "UTC") -> CronPeriod:
    """Shortest and longest gap (seconds) between consecutive firings of ``expression`` in ``timezone``.

    It scans years of firings (tens of milliseconds), so results are cached per (expression, time zone): a
    deployment of hundreds of jobs shares a few schedules, each checked several times at synth. The value is
    immutable; an error is not cached.

    :raises CronError: the expression cannot be parsed, the time zone is unknown, or it fires fewer than
        twice in the years scanned.
    """
    cron = _parse(expression, timezone)
    zone, times_min = cron.zone, cron.times_min
    years = sorted(cron.years)[:MAX_SCANNED_YEARS] if cron.years is not None else list(DEFAULT_YEARS)
    firing_days: list[dt.date] = []
    for year in years:
        day, end = dt.date(year, 1, 1), dt.date(year, 12, 31)
        while day <= end:
            if cron.fires_on(day):
                firing_days.append(day)
            day += dt.timedelta(days=1)

    # Per firing day: its first and last instant (UTC epoch seconds) and the gaps inside it.
    local_gaps_s = {(later - earlier) * 60 for earlier, later in itertools.pairwise(times_min)}
    gaps_s: set[int] = set()
    bounds: list[tuple[int, int]] = []
    fixed_offset = zone.key == "UTC" or zone.key.startswith("Etc/")  # no offset change ever: skip the probes
    for day in firing_days:
        if not fixed_offset and _offset_changes_near(day, zone):
            instants = _instants(day, times_min, zone)
            if not instants:
                continue
            gaps_s.update(later - earlier for earlier, later in itertools.pairwise(instants))
            bounds.append((instants[0], instants[-1]))
        else:
            gaps_s.update(local_gaps_s)
            first, last = _instant(day, times_min[0], zone), _instant(day, times_min[-1], zone)
            bounds.append((first, last))  # both exist: no offset change on or next to this day
    firings = len(bounds) * len(times_min)
    if firings < 2:
        raise CronError(f"fires {firings} time(s) in {years[0]}..{years[-1]}: not a recurring schedule")
    gaps_s.update(later[0] - earlier[1] for earlier, later in itertools.pairwise(bounds))
    return CronPeriod(shortest_s=min(gaps_s), longest_s=max(gaps_s))


def _offset_changes_near(day: dt.date, zone: zoneinfo.ZoneInfo) -> bool:
    """Whether the zone's UTC offset differs anywhere from the day before ``day`` to the day after."""
    probes = [
        dt.datetime.combine(day + dt.timedelta(days=shift), dt.time(hour), tzinfo=zone).utcoffset()
        for shift in (-1, 0, 1, 2)
        for hour in (0, 12)
    ]
    return len(set(probes)) > 1


def _instant(day: dt.date, minute_of_day: int, zone: zoneinfo.ZoneInfo) -> int:
    local = dt.datetime.combine(day, dt.time(minute_of_day // 60, minute_of_day % 60), tzinfo=zone)
    return int(local.timestamp())


def _instants(day: dt.date, times_min: list[int], zone: zoneinfo.ZoneInfo) -> list[int]:
    """The firings of ``day`` as UTC epoch seconds, by EventBridge Scheduler's daylight-saving rules: a local
    time that does not exist is skipped, a repeated one fires once (its first instant, ``fold=0``)."""
    instants = []
    for minute_of_day in times_min:
        local = dt.datetime.combine(day, dt.time(minute_of_day // 60, minute_of_day % 60), tzinfo=zone)
        back = local.astimezone(dt.UTC).astimezone(zone)
        if back.replace(tzinfo=None) != local.replace(tzinfo=None):
            continue  # in the gap of a spring-forward change
        instants.append(int(local.timestamp()))
    return sorted(set(instants))


def latest_firings(expression: str, timezone: str, until: dt.datetime, count: int) -> list[dt.datetime]:
    """The last ``count`` firings of ``expression`` in ``timezone`` at or before ``until``, oldest first (UTC).

    Daylight-saving rules as :func:`cron_period`'s. Scans back at most ten years.

    :raises CronError: the expression cannot be parsed or the zone is unknown, or fewer than ``count``
        firings exist in the scanned years.
    """
    cron = _parse(expression, timezone)
    limit = int(until.timestamp())
    found: list[int] = []
    day = until.astimezone(cron.zone).date() + dt.timedelta(days=1)
    for _ in range(3660):
        if (cron.years is None or day.year in cron.years) and cron.fires_on(day):
            for instant in reversed(_instants(day, cron.times_min, cron.zone)):
                if instant <= limit:
                    found.append(instant)
                    if len(found) == count:
                        return [dt.datetime.fromtimestamp(t, dt.UTC) for t in reversed(found)]
        day -= dt.timedelta(days=1)
    raise CronError(f"fires {len(found)} time(s) in the ten years before {until:%Y-%m-%d}, not {count}")


def firings_between(
    expression: str, timezone: str, start: dt.datetime, end: dt.datetime, *, limit: int = 10_000
) -> list[dt.datetime]:
    """Every firing of ``expression`` in ``timezone`` with ``start <= firing <= end``, oldest first (UTC), by
    :func:`cron_period`'s daylight-saving rules (a backfill's slots).

    :raises CronError: the expression cannot be parsed, the zone is unknown, ``start`` is after ``end``, or
        more than ``limit`` firings fall in the range (split a longer backfill).
    """
    if start > end:
        raise CronError(f"the range starts ({start:%Y-%m-%dT%H:%MZ}) after it ends ({end:%Y-%m-%dT%H:%MZ})")
    cron = _parse(expression, timezone)
    low, high = int(start.timestamp()), int(end.timestamp())
    found: list[int] = []
    day = start.astimezone(cron.zone).date() - dt.timedelta(days=1)
    last_day = end.astimezone(cron.zone).date() + dt.timedelta(days=1)
    while day <= last_day:
        if (cron.years is None or day.year in cron.years) and cron.fires_on(day):
            for instant in _instants(day, cron.times_min, cron.zone):
                if low <= instant <= high:
                    found.append(instant)
                    if len(found) > limit:
                        raise CronError(f"more than {limit} firings between {start:%Y-%m-%d} and {end:%Y-%m-%d}")
        day += dt.timedelta(days=1)
    return [dt.datetime.fromtimestamp(t, dt.UTC) for t in sorted(set(found))]


def next_firing(expression: str, timezone: str, after: dt.datetime, *, max_days: int = 3660) -> dt.datetime | None:
    """The first firing of ``expression`` in ``timezone`` strictly after ``after`` (UTC), by :func:`cron_period`'s
    daylight-saving rules; ``None`` when it never fires again within ``max_days`` (a year list in the past).

    The read side uses it for a job's next slot (``results_api.reader.ResultsReader.next_slot``).

    :raises CronError: the expression cannot be parsed or the zone is unknown.
    """
    cron = _parse(expression, timezone)
    low = int(after.timestamp())
    day = after.astimezone(cron.zone).date() - dt.timedelta(days=1)
    for _ in range(max_days + 2):
        if (cron.years is None or day.year in cron.years) and cron.fires_on(day):
            for instant in _instants(day, cron.times_min, cron.zone):
                if instant > low:
                    return dt.datetime.fromtimestamp(instant, dt.UTC)
        day += dt.timedelta(days=1)
    return None
