"""The local engine's dates, times and time zones answer as Trino's (the session zone is UTC), or are refused in one
line: expected values from Trino's docs and tests (file and commit in each docstring). The table ``t`` and the
helpers are :mod:`tests.integration.local.test_trino_semantics`'s (``ts`` is 2020-01-01 10:00 UTC)."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from typing import Any

import pytest

from local.emulators.duckdb_engine import DuckDBQueryEngine
from tests.integration.local.test_trino_semantics import answer, engine, failure

__all__ = ["engine"]  # the module-scoped fixture, shared


@pytest.mark.parametrize(
    ("expression", "value", "trino_type"),
    [
        ("TIMESTAMP '2012-10-31 01:00 UTC'", "2012-10-31T01:00:00.000+00:00", "timestamp(0) with time zone"),
        (
            "TIMESTAMP '2012-10-31 01:00 UTC' AT TIME ZONE 'America/Los_Angeles'",
            "2012-10-30T18:00:00.000-07:00",
            "timestamp(0) with time zone",
        ),
        ("ts AT TIME ZONE 'Europe/Berlin'", "2020-01-01T11:00:00.000+01:00", "timestamp(3) with time zone"),
        ("at_timezone(ts, 'Europe/Berlin')", "2020-01-01T11:00:00.000+01:00", "timestamp(3) with time zone"),
        (
            "with_timezone(TIMESTAMP '2022-11-01 09:08:07.321', 'America/Los_Angeles')",
            "2022-11-01T09:08:07.321-07:00",
            "timestamp(3) with time zone",
        ),
        ("hour(ts AT TIME ZONE 'Europe/Berlin')", 11, "bigint"),
        ("CAST(ts AT TIME ZONE 'Asia/Tokyo' AS timestamp)", "2020-01-01T19:00:00.000", "timestamp(3)"),
        ("CAST(TIMESTAMP '2020-01-01 23:30:00' AT TIME ZONE 'Europe/Berlin' AS date)", "2020-01-02", "date"),
        (
            "date_trunc('day', TIMESTAMP '2020-01-01 23:30:00' AT TIME ZONE 'Europe/Berlin')",
            "2020-01-02T00:00:00.000+01:00",
            "timestamp(0) with time zone",
        ),
        ("format_datetime(ts AT TIME ZONE 'Europe/Berlin', 'yyyy-MM-dd HH:mm')", "2020-01-01 11:00", "varchar"),
        ("format_datetime(ts, 'EEE, d MMM yyyy h:mm a')", "Wed, 1 Jan 2020 10:00 AM", "varchar"),
        ("date_format(ts, '%Y-%m-%d %H:%i:%s')", "2020-01-01 10:00:00", "varchar"),
        ("from_unixtime(0)", "1970-01-01T00:00:00.000+00:00", "timestamp(3) with time zone"),
        ("to_unixtime(ts)", 1577872800.0, "double"),
        ("date_add('second', 86, TIMESTAMP '2020-03-01 00:00:00')", "2020-03-01T00:01:26.000", "timestamp(0)"),
        ("date_add('hour', 9, TIMESTAMP '2020-03-01 00:00:00')", "2020-03-01T09:00:00.000", "timestamp(0)"),
        (
            "date_add('day', -1, TIMESTAMP '2020-03-01 00:00:00 UTC')",
            "2020-02-29T00:00:00.000+00:00",
            "timestamp(0) with time zone",
        ),
        ("date_add('day', 1, DATE '2020-01-31')", "2020-02-01", "date"),
        ("date_add('month', 1, DATE '2020-01-31')", "2020-02-29", "date"),
        ("date_diff('second', TIMESTAMP '2020-03-01 00:00:00', TIMESTAMP '2020-03-02 00:00:00')", 86400, "bigint"),
        ("date_diff('hour', TIMESTAMP '2020-03-01 00:00:00 UTC', TIMESTAMP '2020-03-02 00:00:00 UTC')", 24, "bigint"),
        ("date_diff('day', DATE '2020-03-01', DATE '2020-03-02')", 1, "bigint"),
        ("date_diff('day', TIMESTAMP '2020-01-01 23:00:00', TIMESTAMP '2020-01-02 01:00:00')", 0, "bigint"),
        ("date_trunc('month', TIMESTAMP '2022-10-20 05:10:00')", "2022-10-01T00:00:00.000", "timestamp(0)"),
        ("date_trunc('week', TIMESTAMP '2001-08-22 03:04:05.321')", "2001-08-20T00:00:00.000", "timestamp(3)"),
    ],
)
def test_time_zones_and_dates(engine: DuckDBQueryEngine, expression: str, value: Any, trino_type: str) -> None:
    """docs/src/main/sphinx/functions/datetime.md at 02d8a7108d6894aa8b07ca42f161e5a3d992a16b: "Time zone
    conversion" (AT TIME ZONE keeps the instant, shows it in the zone), with_timezone / at_timezone (in a UTC
    session), from_unixtime, date_trunc, date_add and date_diff examples; Joda and MySQL patterns (format_datetime,
    date_format). ``ts`` is 2020-01-01 10:00 (UTC): 11:00 in Berlin, 19:00 in Tokyo. A literal's precision is its
    fraction digits (core/trino-main/src/test/java/io/trino/type/TestTimestampWithTimeZone.java testLiterals at
    2cff4978edf7b3f667bca815ac3fdae61ea6262d: TIMESTAMP '2020-05-01 12:34:56 Asia/Kathmandu' is
    timestamp(0) with time zone; the docs' older examples print .000)."""
    assert answer(engine, expression) == (value, trino_type)


def test_a_zoned_timestamp_prints_in_its_own_zone(engine: DuckDBQueryEngine, tmp_path: Any) -> None:
    """datetime.md at 02d8a7108d6894aa8b07ca42f161e5a3d992a16b: ``-- 2012-10-30 18:00:00.000 America/Los_Angeles``."""
    sql = (
        "SELECT TIMESTAMP '2012-10-31 01:00:00.000 UTC' AT TIME ZONE 'America/Los_Angeles' AS v,"
        " TIMESTAMP '2012-10-31 01:00 UTC' AT TIME ZONE 'America/Los_Angeles' AS v0"
    )
    query_id = engine.start_query(sql=sql, parameters=[], client_request_token=f"trino-{uuid.uuid4().hex}")
    engine.get_query(query_id).raise_for_state()
    stored = json.loads((engine.state_dir / "results" / f"{query_id}.json").read_text())
    assert stored["rows"] == [
        ["2012-10-30 18:00:00.000 America/Los_Angeles", "2012-10-30 18:00:00 America/Los_Angeles"]
    ]


def test_current_date_is_utcs(engine: DuckDBQueryEngine) -> None:
    """The session zone is UTC (Athena's): current_date is today's UTC date (datetime.md: current_date)."""
    before = dt.datetime.now(dt.UTC).date().isoformat()
    value, trino_type = answer(engine, "current_date")
    after = dt.datetime.now(dt.UTC).date().isoformat()
    assert trino_type == "date" and value in (before, after)


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("date_format(ts, '%D')", "NOT_SUPPORTED: runs on Athena only: date_format"),
        ("format_datetime(ts, 'Z')", "NOT_SUPPORTED: runs on Athena only: format_datetime"),
        ("ts AT TIME ZONE s", "NOT_SUPPORTED: runs on Athena only: AT TIME ZONE with a zone that is not a literal"),
        ("ts AT TIME ZONE 'Mars/Olympus'", "INVALID_FUNCTION_ARGUMENT: Time zone not supported: Mars/Olympus"),
        ("date_add('hour', 1, DATE '2020-01-01')", "INVALID_FUNCTION_ARGUMENT: 'hour' is not a valid DATE field"),
    ],
)
def test_what_dates_cannot_reproduce_is_refused(engine: DuckDBQueryEngine, expression: str, message: str) -> None:
    """datetime.md at 02d8a7108d6894aa8b07ca42f161e5a3d992a16b (the specifiers, the zones); refusals are one line."""
    assert failure(engine, expression).startswith(message)


@pytest.mark.parametrize(
    ("expression", "value", "trino_type"),
    [
        ("DATE '2012-08-08' + INTERVAL '2' DAY", "2012-08-10", "date"),
        ("DATE '2012-08-08' - INTERVAL '2' DAY", "2012-08-06", "date"),
        ("TIMESTAMP '2012-10-31 01:00' + INTERVAL '1' MONTH", "2012-11-30T01:00:00.000", "timestamp(0)"),
        ("TIMESTAMP '2012-08-08 01:00' - INTERVAL '29' HOUR", "2012-08-06T20:00:00.000", "timestamp(0)"),
        ("concat('a', NULL)", None, "varchar"),
        ("s || 'x'", "bananax", "varchar"),
    ],
)
def test_date_and_string_operators(engine: DuckDBQueryEngine, expression: str, value: Any, trino_type: str) -> None:
    """docs/src/main/sphinx/functions/datetime.md at 02d8a7108d6894aa8b07ca42f161e5a3d992a16b ("Date and time
    operators" table: a date plus a day interval is a date) and string.md (concat: NULL gives NULL)."""
    assert answer(engine, expression) == (value, trino_type)


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("date_diff('day', DATE '1960-05-03', DATE '2001-08-22')", 15086),
        ("date_diff('week', DATE '1960-05-03', DATE '2001-08-22')", 2155),
        ("date_diff('month', DATE '1960-05-03', DATE '2001-08-22')", 495),
        ("date_diff('quarter', DATE '1960-05-03', DATE '2001-08-22')", 165),
        ("date_diff('year', DATE '1960-05-03', DATE '2001-08-22')", 41),
        ("date_add('week', 3, DATE '2001-08-22')", "2001-09-12"),
        ("date_add('month', 3, DATE '2001-08-22')", "2001-11-22"),
        ("date_add('quarter', 3, DATE '2001-08-22')", "2002-05-22"),
        ("date_add('year', 3, DATE '2001-08-22')", "2004-08-22"),
        ("date_trunc('year', DATE '2001-08-22')", "2001-01-01"),
        ("from_unixtime(0, 'Asia/Tokyo')", "1970-01-01T09:00:00.000+09:00"),
    ],
)
def test_date_functions_from_trinos_tests(engine: DuckDBQueryEngine, expression: str, value: Any) -> None:
    """core/trino-main/src/test/java/io/trino/operator/scalar/TestDateTimeFunctions.java at
    620120e6ae7fc1d25e86b3c618c24533ee416bb3 (testDateDiffDate, testAddFieldToDate, testTruncateDate);
    datetime.md (from_unixtime(unixtime, zone))."""
    assert answer(engine, expression)[0] == value


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("from_iso8601_timestamp('2020-05-11')", "2020-05-11T00:00:00.000+00:00"),
        ("from_iso8601_timestamp('2020-05-11T11:15:05')", "2020-05-11T11:15:05.000+00:00"),
        ("CAST('2020-01-01 10:00 Europe/Berlin' AS timestamp with time zone)", "2020-01-01T10:00:00.000+01:00"),
    ],
)
def test_zoned_timestamps_from_text(engine: DuckDBQueryEngine, expression: str, value: str) -> None:
    """datetime.md at 02d8a7108d6894aa8b07ca42f161e5a3d992a16b: from_iso8601_timestamp defaults to the session zone
    (UTC here); a zone named in the text is the value's zone."""
    assert answer(engine, expression)[0] == value


def test_a_timestamp_with_an_offset_zone_keeps_its_offset(engine: DuckDBQueryEngine) -> None:
    """datetime.md at 02d8a7108d6894aa8b07ca42f161e5a3d992a16b: ``from_iso8601_timestamp('2020-05-11T11:15:05.055+01:00')``
    is ``2020-05-11 11:15:05.055 +01:00`` (issue 33: once refused, now answered as Trino prints it)."""
    assert answer(engine, "from_iso8601_timestamp('2020-05-11T11:15:05.055+01:00')") == (
        "2020-05-11T11:15:05.055+01:00",
        "timestamp(3) with time zone",
    )


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("replace('abc', '', 'xx')", "xxaxxbxxcxx"),
        ("replace('', '', 'xx')", "xx"),
        ("replace('foo', '')", "foo"),
        ("replace('foo', 'foo', '')", ""),
        ("EXTRACT(DOW FROM DATE '2020-01-05')", 7),
        ("EXTRACT(DAY_OF_WEEK FROM DATE '2020-01-06')", 1),
        ("EXTRACT(DOY FROM DATE '2020-02-01')", 32),
        ("EXTRACT(YEAR_OF_WEEK FROM DATE '2021-01-01')", 2020),
        ("EXTRACT(HOUR FROM ts AT TIME ZONE 'Europe/Berlin')", 11),
    ],
)
def test_replace_and_extract(engine: DuckDBQueryEngine, expression: str, value: Any) -> None:
    """TestStringFunctions.testReplace at 29e4b2ed1947cd0431248d68e2abcf0da6242bf7 (an empty search string inserts
    between every character); datetime.md at 02d8a7108d6894aa8b07ca42f161e5a3d992a16b ("Extraction function": DOW
    and DAY_OF_WEEK are ISO, Monday = 1; a zoned value in its own zone)."""
    assert answer(engine, expression)[0] == value


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("to_iso8601(DATE '2020-01-02')", "2020-01-02"),
        ("to_iso8601(TIMESTAMP '2020-01-02 10:00:00.123')", "2020-01-02T10:00:00.123"),
        ("to_iso8601(TIMESTAMP '2024-04-01 00:00:00')", "2024-04-01T00:00:00"),
        ("to_iso8601(TIMESTAMP '2024-04-01 00:00:00' AT TIME ZONE 'UTC')", "2024-04-01T00:00:00Z"),
        ("to_iso8601(ts)", "2020-01-01T10:00:00.000"),
    ],
)
def test_to_iso8601(engine: DuckDBQueryEngine, expression: str, value: str) -> None:
    """datetime.md at 02d8a7108d6894aa8b07ca42f161e5a3d992a16b (to_iso8601 of a date, timestamp or timestamp with
    time zone); a timestamp(p) keeps p fraction digits and a UTC one ends in Z (Trino 414+)."""
    assert answer(engine, expression)[0] == value
