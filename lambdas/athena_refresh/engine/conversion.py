"""Converting Athena's string values to Python by column type (shared by every engine)."""

from __future__ import annotations

import functools
import math
import re
from datetime import date, datetime
from typing import Any
from zoneinfo import ZoneInfo

from athena_refresh.errors import ResultTypeError

_INT_TYPES = frozenset({"tinyint", "smallint", "integer", "int", "bigint"})
_FLOAT_TYPES = frozenset({"real", "float", "double"})
_STRING_TYPES = frozenset({"varchar", "char", "string", "varbinary"})
_PRINTED_TYPES = frozenset({"array", "map", "row", "struct", "json"})
_FLOAT_SPECIALS = frozenset({"NaN", "Infinity", "-Infinity"})

_INT_RE = re.compile(r"[+-]?\d+")
_FLOAT_RE = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
_DECIMAL_RE = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)")
_DATE_RE = re.compile(r"\d{4}-\d{2}-\d{2}")
_TIMESTAMP_RE = re.compile(
    r"(?P<date>\d{4}-\d{2}-\d{2})[ T](?P<h>\d{2}):(?P<m>\d{2})(?::(?P<s>\d{2})(?:\.(?P<frac>\d{1,12}))?)?"
    r"(?:\s*(?P<zone>\S+))?"
)
_OFFSET_RE = re.compile(r"(?P<sign>[+-])(?P<h>\d{2}):?(?P<m>\d{2})")
_UTC_NAMES = frozenset({"UTC", "Z", "GMT", "UCT", "Etc/UTC", "Etc/GMT", "Zulu", "Universal"})


class _BadValue(Exception):
    """Internal: a value does not parse as its column type (turned into ResultTypeError by the caller)."""


@functools.lru_cache(maxsize=256)  # a result's few column types, met again in every row of every page
def _type_kind(column_type: str) -> str:
    """Reduce an Athena type name to the conversion kind: 'timestamp(3) with time zone' -> 'timestamptz'."""
    normalized = " ".join(column_type.strip().lower().split())
    head = normalized.split("(", 1)[0].strip()
    if head.startswith("timestamp"):
        return "timestamptz" if normalized.endswith("with time zone") else "timestamp"
    return head


def _format_offset(seconds: int) -> str:
    sign = "-" if seconds < 0 else "+"
    hours, rest = divmod(abs(seconds), 3600)
    minutes, secs = divmod(rest, 60)
    return f"{sign}{hours:02d}:{minutes:02d}" + (f":{secs:02d}" if secs else "")


def _zone_offset(zone: str, naive: datetime) -> str:
    if zone in _UTC_NAMES:
        return "+00:00"
    match = _OFFSET_RE.fullmatch(zone)
    if match:
        if int(match["h"]) > 23 or int(match["m"]) > 59:
            raise _BadValue(f"invalid UTC offset {zone!r}")
        offset = int(match["h"]) * 3600 + int(match["m"]) * 60
        return _format_offset(-offset if match["sign"] == "-" else offset)
    try:  # named zones need the system tz database (or the tzdata package)
        utcoffset = naive.replace(tzinfo=ZoneInfo(zone)).utcoffset()
    except (ValueError, KeyError, OSError) as exc:  # ZoneInfoNotFoundError is a KeyError
        raise _BadValue(f"unknown time zone {zone!r}") from exc
    assert utcoffset is not None  # a ZoneInfo always yields an offset
    return _format_offset(int(utcoffset.total_seconds()))


def _convert_timestamp(value: str, *, with_zone: bool) -> str:
    match = _TIMESTAMP_RE.fullmatch(value.strip())
    if not match or bool(match["zone"]) != with_zone:
        expected = "'YYYY-MM-DD HH:MM:SS.fff ZONE'" if with_zone else "'YYYY-MM-DD HH:MM:SS.fff'"
        raise _BadValue(f"expected {expected}")
    seconds = match["s"] or "00"
    frac = (match["frac"] or "").ljust(3, "0")  # at least milliseconds; finer precision is kept, not cut
    try:
        naive = datetime.fromisoformat(f"{match['date']}T{match['h']}:{match['m']}:{seconds}")
    except ValueError as exc:
        raise _BadValue(str(exc)) from exc
    iso = f"{naive.isoformat(timespec='seconds')}.{frac}"
    return iso + _zone_offset(match["zone"], naive) if with_zone else iso


def _convert(value: str, kind: str) -> Any:
    if kind == "boolean":
        lowered = value.strip().lower()
        if lowered not in ("true", "false"):
            raise _BadValue("expected 'true' or 'false'")
        return lowered == "true"
    if kind in _INT_TYPES:
        if not _INT_RE.fullmatch(value.strip()):
            raise _BadValue("expected an integer")
        return int(value)
    if kind in _FLOAT_TYPES:
        if value in _FLOAT_SPECIALS:
            return value  # JSON has no NaN/Infinity: keep Athena's spelling instead of losing it
        if not _FLOAT_RE.fullmatch(value.strip()):
            raise _BadValue("expected a floating-point number, 'NaN', 'Infinity' or '-Infinity'")
        number = float(value)
        if not math.isfinite(number):
            raise _BadValue("out of the float range")
        return number
    if kind == "decimal":
        if not _DECIMAL_RE.fullmatch(value.strip()):
            raise _BadValue("expected a decimal number")
        return value.strip()  # exact: a float would round
    if kind == "date":
        if not _DATE_RE.fullmatch(value.strip()):
            raise _BadValue("expected 'YYYY-MM-DD'")
        try:
            return date.fromisoformat(value.strip()).isoformat()
        except ValueError as exc:
            raise _BadValue(str(exc)) from exc
    if kind == "timestamp":
        return _convert_timestamp(value, with_zone=False)
    if kind == "timestamptz":
        return _convert_timestamp(value, with_zone=True)
    # varchar/char/string/varbinary, array/map/row/json as Athena prints them, and any unknown type.
    return value


def convert_value(value: str | None, column_type: str) -> Any:
    """Convert one Athena ``VarCharValue`` to a JSON-safe Python value by its Trino type name.

    Athena returns every value as a string and leaves ``VarCharValue`` out for SQL NULL
    (https://docs.aws.amazon.com/athena/latest/APIReference/API_Datum.html); type names are Trino's
    (https://docs.aws.amazon.com/athena/latest/ug/data-types.html). Parameters in the type name
    (``decimal(10,2)``, ``timestamp(3)``) are ignored; the name is case-insensitive.

    ===================================================  ===============================================
    type                                                 result
    ===================================================  ===============================================
    boolean                                              bool
    tinyint, smallint, integer, int, bigint              int
    real, float, double                                  float; "NaN", "Infinity", "-Infinity" stay str
    decimal                                              str, exactly as printed (no float rounding)
    varchar, char, string, varbinary                     str
    date                                                 "YYYY-MM-DD"
    timestamp                                            "YYYY-MM-DDTHH:MM:SS.fff" (Athena prints
                                                         "2013-01-01 05:00:00.000"; finer fractions kept)
    timestamp with time zone                             same plus offset, "...05:00:00.000+00:00"
    array, map, row, json, and any unknown type          str as Athena prints it
    ===================================================  ===============================================

    Parameters
    ----------
    value : str or None
        The ``VarCharValue``; None when it was missing (SQL NULL).
    column_type : str
        ``ColumnInfo.Type``.

    Returns
    -------
    Any
        None, bool, int, float or str (JSON-safe: never a float NaN or infinity).

    Raises
    ------
    ResultTypeError
        The value does not parse as its type (for example "abc" in a bigint column). ``column`` is "" here;
        :meth:`AthenaQueryEngine.get_results` raises it with the column name.
    """
    return _convert_named(value, column_type, column="")


def _convert_named(value: str | None, column_type: str, *, column: str) -> Any:
    if value is None:
        return None
    try:
        return _convert(value, _type_kind(column_type))
    except _BadValue as exc:
        raise ResultTypeError(column, column_type, value, str(exc)) from exc
