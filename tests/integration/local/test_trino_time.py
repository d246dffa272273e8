"""Trino's time zones, timestamp precisions and intervals on the local engine (:mod:`.trino_time`,
:mod:`.trino_time_functions`): each value is Athena's ``VarCharValue`` text as Trino prints it, with its Trino type,
from Trino's docs and tests (trinodb/trino; file and commit in each test's docstring), never from DuckDB.

The statements run in one :class:`DuckDBSession` (the session of ``run``, ``make demo`` and ``make conformance``;
session zone UTC), reading no table.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import pytest

from local.emulators.duckdb_engine import trino_time, trino_time_functions
from local.emulators.duckdb_engine.session import DuckDBSession
from local.emulators.duckdb_engine.trino_tree import Refused

from .test_trino_strings import unpositioned

DOCS = "docs/src/main/sphinx/functions/datetime.md at 02d8a7108d6894aa8b07ca42f161e5a3d992a16b"


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DuckDBSession]:
    instance = DuckDBSession(Path(tmp_path_factory.mktemp("trino-time")))
    yield instance
    instance.close()


def text_and_type(session: DuckDBSession, expression: str) -> tuple[str | None, str, str]:
    """(the value as Athena's text, the whole Trino type, ColumnInfo.Type) of ``SELECT expression``."""
    record, results = session.execute(f"SELECT {expression} AS v", [])
    assert results is not None, record["error"]
    (column,) = results["columns"]
    return results["rows"][0][0], column["trino_type"], column["type"]


def error(session: DuckDBSession, expression: str) -> str:
    """The one-line message of ``SELECT expression``, which must fail (``CODE: message``)."""
    record, results = session.execute(f"SELECT {expression} AS v", [])
    assert results is None
    message = str(record["error"]["error_message"])
    assert "\n" not in message and "Error:" not in message
    return unpositioned(message)


@pytest.mark.parametrize(
    ("expression", "value", "trino_type"),
    [
        # TestAtTimeZone.testAtTimeZone / testAtTimeZoneWithOffset (operator/scalar/timestamptz, 893d751): an
        # offset zone prints as +07:09; the precision is the literal's fraction digits.
        ("at_timezone(TIMESTAMP '2020-05-01 12:34:56 +07:09', 'America/Los_Angeles')",
         "2020-04-30 22:25:56 America/Los_Angeles", "timestamp(0) with time zone"),
        ("TIMESTAMP '2020-05-01 12:34:56.123456789 +07:09' AT TIME ZONE 'America/Los_Angeles'",
         "2020-04-30 22:25:56.123456789 America/Los_Angeles", "timestamp(9) with time zone"),
        ("at_timezone(TIMESTAMP '2020-05-01 12:34:56.12 +07:09', INTERVAL '03:04' HOUR TO MINUTE)",
         "2020-05-01 08:29:56.12 +03:04", "timestamp(2) with time zone"),
        ("at_timezone(TIMESTAMP '2020-05-01 12:34:56 +07:09', INTERVAL -'05' HOUR)",
         "2020-05-01 00:25:56 -05:00", "timestamp(0) with time zone"),
        ("TIMESTAMP '2020-05-01 12:34:56 +00:00'", "2020-05-01 12:34:56 UTC", "timestamp(0) with time zone"),
        # operator/scalar/timestamptz/TestTimestampWithTimeZone.java (22b58b4): "source > target, round up"
        ("CAST('2020-05-01 12:34:56.9 +07:09' AS timestamp(0) with time zone)", "2020-05-01 12:34:57 +07:09",
         "timestamp(0) with time zone"),
        # datetime.md: from_iso8601_timestamp(_nanos) keep the text's offset; Z is UTC.
        ("from_iso8601_timestamp('2020-05-11T11:15:05.055+01:00')", "2020-05-11 11:15:05.055 +01:00",
         "timestamp(3) with time zone"),
        ("from_iso8601_timestamp_nanos('2020-05-11T11:15:05.123456789+01:00')",
         "2020-05-11 11:15:05.123456789 +01:00", "timestamp(9) with time zone"),
        ("from_iso8601_timestamp('2020-05-11T11:15:05Z')", "2020-05-11 11:15:05.000 UTC",
         "timestamp(3) with time zone"),
        # datetime.md: from_unixtime_nanos (bigint, decimal rounded), in UTC.
        ("from_unixtime_nanos(100)", "1970-01-01 00:00:00.000000100 UTC", "timestamp(9) with time zone"),
        ("from_unixtime_nanos(DECIMAL '-1234')", "1969-12-31 23:59:59.999998766 UTC", "timestamp(9) with time zone"),
        ("from_unixtime_nanos(DECIMAL '1234.5')", "1970-01-01 00:00:00.000001235 UTC", "timestamp(9) with time zone"),
        # DateTimeFunctions.fromUnixTime(x, hours, minutes) (03d8e5a): the offset is the zone.
        ("from_unixtime(3600, 5, 30)", "1970-01-01 06:30:00.000 +05:30", "timestamp(3) with time zone"),
        ("from_unixtime(0, -3, 0)", "1969-12-31 21:00:00.000 -03:00", "timestamp(3) with time zone"),
        # language/types.md (timestamp(p), p up to 12): more than 6 digits are kept.
        ("TIMESTAMP '2020-05-01 12:34:56.123456789'", "2020-05-01 12:34:56.123456789", "timestamp(9)"),
        ("CAST(TIMESTAMP '2020-05-01 12:34:56.1234567 +02:00' AS varchar)", "2020-05-01 12:34:56.1234567 +02:00",
         "varchar"),
        # the value's own zone for its fields and truncation (TestDateTrunc, 8e012f2, in an offset zone here).
        ("date_trunc('hour', TIMESTAMP '2020-05-01 12:34:56.123 +07:09')", "2020-05-01 12:00:00.000 +07:09",
         "timestamp(3) with time zone"),
        ("date_add('hour', 13, TIMESTAMP '2020-05-01 12:34:56.123 -03:00')", "2020-05-02 01:34:56.123 -03:00",
         "timestamp(3) with time zone"),
        ("hour(TIMESTAMP '2020-05-01 12:34:56 +07:09' AT TIME ZONE '+05:30')", "10", "bigint"),
        # datetime.md's operators (timestamp + interval '1' month: 2012-10-31 -> 2012-11-30), in the value's zone
        ("TIMESTAMP '2020-01-30 20:00 -05:00' + INTERVAL '1' MONTH", "2020-02-29 20:00:00 -05:00",
         "timestamp(0) with time zone"),
        ("TIMESTAMP '2020-03-30 20:00 America/New_York' - INTERVAL '1' MONTH",
         "2020-02-29 20:00:00 America/New_York", "timestamp(0) with time zone"),
        # datetime.md: date_add(unit, value, timestamp) -> [same as input], nanoseconds kept
        ("date_add('second', 1, TIMESTAMP '2020-05-01 12:34:56.123456789')", "2020-05-01 12:34:57.123456789",
         "timestamp(9)"),
        ("date_add('day', -1, TIMESTAMP '2020-05-01 12:34:56.123456789 +07:09')",
         "2020-04-30 12:34:56.123456789 +07:09", "timestamp(9) with time zone"),
        ("with_timezone(TIMESTAMP '2020-01-01 10:00:00', '+02:00')", "2020-01-01 10:00:00 +02:00",
         "timestamp(0) with time zone"),
        # TestDateTimeFunctions.testPartFunctions (029c93b): timezone_hour/minute are the offset's, signed.
        ("timezone_hour(TIMESTAMP '2020-01-01 10:00:00 -05:30')", "-5", "bigint"),
        ("timezone_minute(TIMESTAMP '2020-01-01 10:00:00 -05:30')", "-30", "bigint"),
        ("timezone_minute(TIMESTAMP '2020-01-01 10:00:00 Asia/Kathmandu')", "45", "bigint"),
        ("timezone_hour(TIMESTAMP '2020-07-01 10:00:00 Europe/Berlin')", "2", "bigint"),
        ("millisecond(TIMESTAMP '2001-08-22 03:04:05.321')", "321", "bigint"),
        ("yow(DATE '2010-01-03')", "2009", "bigint"),
        # ToIso8601 (39f001b): varchar(22 + min(p, 1) + p), 6 more with the offset.
        ("to_iso8601(TIMESTAMP '2020-07-01 10:00:00.123 Europe/Berlin')", "2020-07-01T10:00:00.123+02:00",
         "varchar(32)"),
        ("to_iso8601(TIMESTAMP '2001-08-22 03:04:05.321')", "2001-08-22T03:04:05.321", "varchar(26)"),
        ("to_iso8601(DATE '2001-08-22')", "2001-08-22", "varchar(16)"),
        ("current_timezone()", "UTC", "varchar"),
    ],
)  # fmt: skip
def test_zones_and_precisions_as_trino_prints_them(
    session: DuckDBSession, expression: str, value: str, trino_type: str
) -> None:
    """TestAtTimeZone, TestDateTrunc, TestDateTimeFunctions (commits above) and datetime.md (DOCS)."""
    assert text_and_type(session, expression)[:2] == (value, trino_type)


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("interval '3' year + interval '5' month", "3-5"),
        ("interval '3' year - interval '5' month", "2-7"),
        ("interval '2-3' year to month", "2-3"),
        ("interval '-2-3' year to month", "-2-3"),
        ("interval '2' year * 3", "6-0"),
    ],
)
def test_year_month_intervals_stay_year_month(session: DuckDBSession, expression: str, value: str) -> None:
    """datetime.md (DOCS, "Date and time operators": ``interval '3' year + interval '5' month`` is ``3-5``);
    language/types.md: INTERVAL YEAR TO MONTH. Athena's ColumnInfo.Type says it too."""
    assert text_and_type(session, expression) == (value, "interval year to month", "interval year to month")


@pytest.mark.parametrize(
    ("expression", "value", "trino_type"),
    [
        ("from_iso8601_date('2020-W10')", "2020-03-02", "date"),
        ("from_iso8601_date('2020-123')", "2020-05-02", "date"),
        ("from_iso8601_date('2020-W10-3')", "2020-03-04", "date"),
        ("parse_duration('42.8ms')", "0 00:00:00.043", "interval day to second"),
        ("parse_duration('3.81 d')", "3 19:26:24.000", "interval day to second"),
        ("human_readable_seconds(56363463)", "93 weeks, 1 day, 8 hours, 31 minutes, 3 seconds", "varchar"),
        ("human_readable_seconds(-61)", "1 minute, 1 second", "varchar"),
        ("human_readable_seconds(535333.9513888889)", "6 days, 4 hours, 42 minutes, 14 seconds", "varchar"),
        ("human_readable_seconds(0)", "0 seconds", "varchar"),
        ("try(parse_duration('abc'))", None, "interval day to second"),
    ],
)
def test_date_functions_run_locally(
    session: DuckDBSession, expression: str, value: str | None, trino_type: str
) -> None:
    """datetime.md (DOCS: from_iso8601_date's week and ordinal dates, parse_duration, human_readable_seconds);
    core/trino-main/src/test/java/io/trino/operator/scalar/timestamp/TestHumanReadableSeconds.java."""
    assert text_and_type(session, expression)[:2] == (value, trino_type)


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        # DateTimeFunctions.fromUnixTime: getTimeZoneKeyForOffset fails beyond +-14:00.
        ("from_unixtime(0, 1, 10000)", "INVALID_FUNCTION_ARGUMENT: Invalid offset minutes 10060"),
        ("from_unixtime(0, -14, -1)", "INVALID_FUNCTION_ARGUMENT: Invalid offset minutes -841"),
        ("parse_duration('abc')", "INVALID_FUNCTION_ARGUMENT: duration is not a valid data duration string: abc"),
        ("human_readable_seconds(0.0E0 / 0.0E0)", "INVALID_FUNCTION_ARGUMENT: Invalid argument found: NaN"),
        ("human_readable_seconds(1.0E0 / 0.0E0)", "INVALID_FUNCTION_ARGUMENT: Invalid argument found: Infinity"),
        ("from_iso8601_date('2020-13-01')", "INVALID_FUNCTION_ARGUMENT: Invalid format: 2020-13-01"),
        ("interval '2' year + interval '1' day", "TYPE_MISMATCH: Cannot apply operator: interval year to month +"),
        ("TIMESTAMP '2020-05-01 12:34:56 Mars/Olympus'", "INVALID_LITERAL: '2020-05-01 12:34:56 Mars/Olympus' is not a valid"),
        # not reproduced: refused in one line, never answered differently
        ("TIMESTAMP '2020-05-01 12:34:56.123456789012'", "NOT_SUPPORTED: runs on Athena only: a timestamp(12)"),
        ("at_timezone(TIMESTAMP '2020-05-01 12:34:56 +07:09', INTERVAL '10' SECOND)",
         "NOT_SUPPORTED: runs on Athena only: a time zone given as this interval"),
        ("TIMESTAMP '2020-05-01 12:34:56.123456789' + INTERVAL '1' SECOND",
         "NOT_SUPPORTED: runs on Athena only: interval arithmetic on a timestamp(9)"),
        ("date_add('month', 1, TIMESTAMP '2020-05-01 12:34:56.123456789')",
         "NOT_SUPPORTED: runs on Athena only: date_add('month', ...) of a timestamp(9)"),
        ("date_trunc('hour', from_unixtime_nanos(5) AT TIME ZONE 'Asia/Tokyo')",
         "NOT_SUPPORTED: runs on Athena only: this operation on a timestamp(9) with time zone"),
    ],
)  # fmt: skip
def test_what_trino_refuses_fails_and_what_is_not_reproduced_is_refused(
    session: DuckDBSession, expression: str, message: str
) -> None:
    """DateTimeFunctions (03d8e5a), TestHumanReadableSeconds, datetime.md (DOCS); the rest: see each message."""
    assert error(session, expression).startswith(message)


@pytest.mark.parametrize(
    ("sql", "value", "trino_type"),
    [
        ("SELECT x FROM (SELECT TIMESTAMP '2020-01-01 10:00 +07:09' AS x)", "2020-01-01 10:00:00 +07:09",
         "timestamp(0) with time zone"),
        ("WITH t AS (SELECT from_unixtime_nanos(5) AS x) SELECT x FROM t", "1970-01-01 00:00:00.000000005 UTC",
         "timestamp(9) with time zone"),
        ("SELECT hour(x) FROM (SELECT TIMESTAMP '2020-01-01 10:00 Europe/Berlin' AS x)", "10", "bigint"),
        ("SELECT max(x) FROM (VALUES TIMESTAMP '2020-01-01 10:00 +07:09') t(x)", "2020-01-01 10:00:00 +07:09",
         "timestamp(0) with time zone"),
        ("WITH t AS (SELECT interval '1' year AS i) SELECT i * 2 FROM t", "2-0", "interval year to month"),
    ],
)  # fmt: skip
def test_a_subquerys_column_keeps_its_zone_and_precision(
    session: DuckDBSession, sql: str, value: str, trino_type: str
) -> None:
    """A zone travels with the value through a subquery (datetime.md, DOCS, "Time zone conversion")."""
    record, results = session.execute(sql, [])
    assert results is not None, record["error"]
    assert (results["rows"][0][0], results["columns"][0]["trino_type"]) == (value, trino_type)


def test_offset_zones_are_named_as_trino_names_them() -> None:
    """TimeZoneKey.getTimeZoneKeyForOffset (DateTimeFunctions, 03d8e5a): 0 is UTC, +-14:00 at most."""
    assert [trino_time.offset_zone(m) for m in (0, 429, -300, 840)] == ["UTC", "+07:09", "-05:00", "+14:00"]
    assert [trino_time.zone_name(z) for z in ("Z", "+0709", "-05", "Europe/Berlin")] == [
        "UTC",
        "+07:09",
        "-05:00",
        "Europe/Berlin",
    ]
    with pytest.raises(Refused) as raised:
        trino_time.offset_zone(841)
    assert raised.value.error_code == "INVALID_FUNCTION_ARGUMENT"


def test_the_python_functions_answer_none_for_what_trino_refuses() -> None:
    """The functions the rewrites call: None (the SQL around them raises Trino's error) for a bad argument."""
    assert trino_time_functions.from_iso8601_date("2020-W53") == trino_time_functions.from_iso8601_date("2020-12-28")
    assert trino_time_functions.from_iso8601_date("2019-W53") is None  # 2019 has 52 ISO weeks
    assert trino_time_functions.from_iso8601_date("2021-366") is None
    assert trino_time_functions.parse_duration_millis("5m") == 300_000
    assert trino_time_functions.parse_duration_millis("5 years") is None
    assert trino_time_functions.human_readable_seconds(math.inf) is None
    assert trino_time_functions.human_readable_seconds(None) is None
