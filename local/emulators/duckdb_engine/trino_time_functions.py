"""Trino's date and time functions that DuckDB lacks or answers differently, for :mod:`.trino_semantics`.

Sources (trinodb/trino): ``docs/src/main/sphinx/functions/datetime.md`` at
02d8a7108d6894aa8b07ca42f161e5a3d992a16b (the types and examples); ``core/trino-main/src/main/java/io/trino/
operator/scalar/DateTimeFunctions.java`` at 03d8e5abc686c5c4a9f96ca14db07e2aed880174 (``from_unixtime(x, h, m)``
fails beyond +-14:00 with INVALID_FUNCTION_ARGUMENT; ``from_unixtime_nanos`` rounds a decimal half up;
``millisecond``; ``year_of_week``/``yow``; ``from_iso8601_date``: Joda's ``dateElementParser``, calendar, week and
ordinal dates; ``parse_duration``: airlift's ``Duration.valueOf(...).toMillis()``, rounded half up);
``operator/scalar/timestamp/ToIso8601.java`` at 39f001b333ca389939b0274c1a4d29ca4096bfdb (``varchar(22 + min(p, 1) +
p)``; with a time zone 6 more, a date ``varchar(16)``); ``core/trino-main/src/test/java/io/trino/operator/scalar/
timestamp/TestHumanReadableSeconds.java`` (``human_readable_seconds``: the absolute value rounded to whole seconds,
``weeks, days, hours, minutes, seconds`` without the zero ones, ``0 seconds``; NaN and infinity fail).

:func:`rewrite` types a call and gives its DuckDB replacement; :func:`register` adds the Python functions the
replacements call to a DuckDB connection (one failure pattern: they answer NULL for a bad argument, the SQL around
them raises Trino's error).
"""

from __future__ import annotations

import datetime as dt
import math
import re
from typing import Any, Final

import duckdb
from sqlglot import exp

from . import trino_time as tt
from .trino_tree import athena_only, duck, literal_text
from .trino_types import UNKNOWN_ZONE, TrinoType

__all__ = ["REWRITTEN", "register", "rewrite"]

#: Calls sqlglot does not know (``exp.Anonymous``) that :func:`rewrite` makes faithful.
REWRITTEN: Final = frozenset(
    {"millisecond", "yow", "timezone_hour", "timezone_minute", "from_unixtime_nanos", "parse_duration",
     "human_readable_seconds", "to_iso8601"}
)  # fmt: skip
_BIGINT: Final = TrinoType("bigint")
_DURATION: Final = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]+)\s*")
_DURATION_MILLIS: Final = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3, "m": 6e4, "h": 3.6e6, "d": 8.64e7}
_HUMAN_UNITS: Final = (("week", 604800), ("day", 86400), ("hour", 3600), ("minute", 60), ("second", 1))


def rewrite(node: exp.Expr, rewriter: Any) -> tuple[TrinoType, exp.Expr | None] | None:
    """(Trino type, DuckDB replacement or None to keep) of a temporal call, or None when `node` is not one here.

    `rewriter`: ``type_of(node) -> TrinoType`` and ``wall_time(node) -> node``. :raises Refused: as Trino fails
    (INVALID_FUNCTION_ARGUMENT) or what is not reproduced (NOT_SUPPORTED)."""
    if isinstance(node, exp.Interval):
        return tt.interval_kind(node), tt.year_month_literal(node)
    if isinstance(node, exp.CurrentTimezone):  # the session zone (docs/local.md: UTC)
        return TrinoType("varchar"), exp.Literal.string("UTC")
    if isinstance(node, exp.UnixToTime):
        return _from_unixtime(node)
    if isinstance(node, (exp.FromISO8601Timestamp, exp.FromISO8601TimestampNanos)):
        return _from_iso8601(node, rewriter.type_of(node.this))
    if isinstance(node, exp.FromISO8601Date):
        return TrinoType("date"), _checked("trino_from_iso8601_date(_a)", node.this, "Invalid format: ")
    if not isinstance(node, exp.Anonymous):
        return None
    name, args = node.name.lower(), node.expressions
    if name not in REWRITTEN or len(args) != 1:
        return None
    (value,) = args
    kind = rewriter.type_of(value)
    if name == "millisecond":  # of the second (DuckDB's counts the seconds too)
        return _BIGINT, duck("CAST(date_part('millisecond', _a) % 1000 AS BIGINT)", _a=rewriter.wall_time(value))
    if name == "yow":  # alias of year_of_week: the ISO week-numbering year
        return _BIGINT, duck("CAST(date_part('isoyear', _a) AS BIGINT)", _a=rewriter.wall_time(value))
    if name in ("timezone_hour", "timezone_minute"):
        if kind.name != "timestamptz" or kind.zone in (None, UNKNOWN_ZONE):
            raise athena_only(f"{name} of a value whose time zone is known only when the query runs")
        minutes = tt.offset_sql(kind.zone, value, kind.precision)  # Java's / and %: toward zero
        template = "CAST(_m // 60 AS BIGINT)" if name == "timezone_hour" else "CAST(_m % 60 AS BIGINT)"
        return _BIGINT, duck(template, _m=minutes)
    if name == "from_unixtime_nanos":
        if kind.is_integer:
            call = duck("make_timestamp_ns(CAST(_a AS BIGINT))", _a=value)
        elif kind.name == "decimal":
            call = duck("make_timestamp_ns(CAST(round(_a) AS BIGINT))", _a=value)
        else:
            raise athena_only(f"from_unixtime_nanos of a {kind.name}")
        return TrinoType("timestamptz", precision=9, zone="UTC"), call
    if name == "parse_duration":
        message = "duration is not a valid data duration string: "
        call = _checked("to_milliseconds(trino_parse_duration_millis(_a))", value, message)
        return tt.DAY_SECOND, call
    if name == "human_readable_seconds":
        shown = "CASE WHEN isnan(_a) THEN 'NaN' WHEN _a > 0 THEN 'Infinity' ELSE '-Infinity' END"
        call = _checked(
            "trino_human_readable_seconds(_a)", duck("CAST(_a AS DOUBLE)", _a=value), "Invalid argument found: ", shown
        )
        return TrinoType("varchar"), call
    return _to_iso8601(value, kind)


def _checked(template: str, value: exp.Expr, message: str, shown: str = "CAST(_a AS VARCHAR)") -> exp.Expr:
    """A call that answers NULL for a bad argument, failing then with INVALID_FUNCTION_ARGUMENT and `message`
    followed by the argument as `shown` (NULL stays NULL)."""
    call = duck(template, _a=value)
    failure = f"error('INVALID_FUNCTION_ARGUMENT: {message}' || {shown})"
    return duck(f"CASE WHEN _a IS NULL THEN NULL ELSE coalesce(_c, {failure}) END", _a=value, _c=call)


def _from_unixtime(node: exp.UnixToTime) -> tuple[TrinoType, exp.Expr]:
    """from_unixtime(x), (x, zone), (x, hours, minutes): an instant in UTC, the zone, or the fixed offset."""
    hours, minutes, zone_arg = node.args.get("hours"), node.args.get("minutes"), node.args.get("zone")
    zone = "UTC"
    if zone_arg is not None:
        text = literal_text(zone_arg)
        if text is None:
            raise athena_only("from_unixtime with a zone that is not a literal")
        zone = tt.zone_name(text)
    elif hours is not None:
        parts = [literal_int(part) for part in (hours, minutes or exp.Literal.number(0))]
        if parts[0] is None or parts[1] is None:
            raise athena_only("from_unixtime with an offset that is not a literal")
        zone = tt.offset_zone(parts[0] * 60 + parts[1])
    return TrinoType("timestamptz", precision=3, zone=zone), duck("TO_TIMESTAMP(_a)", _a=node.this)


def literal_int(node: exp.Expr | None) -> int | None:
    """The value of an integer literal, a negative one too (None otherwise)."""
    if isinstance(node, exp.Neg):
        inner = literal_int(node.this)
        return None if inner is None else -inner
    if isinstance(node, exp.Literal) and node.is_int:
        return int(node.this)
    return None


def _from_iso8601(node: exp.Func, source: TrinoType) -> tuple[TrinoType, exp.Expr | None]:
    """from_iso8601_timestamp(_nanos): a literal's zone and instant are read here; a column's zone is known only
    when the query runs (refused where it matters)."""
    nanos = isinstance(node, exp.FromISO8601TimestampNanos)
    text = literal_text(node.this)
    if text is None:
        if nanos:
            raise athena_only("from_iso8601_timestamp_nanos of a value known only when the query runs")
        zone = UNKNOWN_ZONE if source.name == "varchar" else "UTC"
        return TrinoType("timestamptz", precision=3, zone=zone), None
    zone, constant = tt.iso8601_literal(text, nanos)
    return TrinoType("timestamptz", precision=9 if nanos else 3, zone=zone), constant


def _to_iso8601(value: exp.Expr, kind: TrinoType) -> tuple[TrinoType, exp.Expr]:
    """to_iso8601 (ToIso8601): a date YYYY-MM-DD, a timestamp(p) with p digits, a zoned one with its offset (Z
    for UTC)."""
    if kind.name == "date":
        return TrinoType("varchar", precision=16), duck("strftime(_a, '%Y-%m-%d')", _a=value)
    if kind.name not in ("timestamp", "timestamptz"):
        raise athena_only(f"to_iso8601 of a {kind.name}")
    precision = 3 if kind.precision is None else kind.precision
    length = 22 + min(precision, 1) + precision
    if kind.name == "timestamp":
        return TrinoType("varchar", precision=length), tt.timestamp_text(value, precision, "T")
    if kind.zone in (None, UNKNOWN_ZONE):
        raise athena_only("to_iso8601 of a timestamp whose time zone is known only when the query runs")
    text = tt.timestamp_text(tt.to_wall(kind.zone, value, precision), precision, "T")
    if kind.zone == "UTC":
        return TrinoType("varchar", precision=length + 6), duck("_t || 'Z'", _t=text)
    minutes = tt.offset_sql(kind.zone, value, precision)
    offset = duck(
        "CASE WHEN _m < 0 THEN '-' ELSE '+' END || printf('%02d:%02d', abs(_m) // 60, abs(_m) % 60)", _m=minutes
    )
    return TrinoType("varchar", precision=length + 6), duck("_t || _o", _t=text, _o=offset)


# --- Python functions registered on the connection ---------------------------------------------------------
_ISO_DATE: Final = re.compile(
    r"(?P<y>\d{4})(?:-(?:(?P<mo>\d{2})(?:-(?P<d>\d{2}))?|W(?P<w>\d{2})(?:-(?P<wd>\d))?|(?P<doy>\d{3})))?"
)


def from_iso8601_date(text: str | None) -> dt.date | None:
    """An ISO 8601 date (``2020-05-11``, ``2020-05``, ``2020``, week ``2020-W10[-1]``, ordinal ``2020-123``); None
    when `text` is not one."""
    match = _ISO_DATE.fullmatch(text.strip()) if text is not None else None
    if match is None:
        return None
    year = int(match["y"])
    try:
        if match["w"] is not None:
            return dt.date.fromisocalendar(year, int(match["w"]), int(match["wd"] or 1))
        if match["doy"] is not None:
            day = int(match["doy"])
            start = dt.date(year, 1, 1)
            return (
                start + dt.timedelta(days=day - 1) if 1 <= day <= (start.replace(year=year + 1) - start).days else None
            )
        return dt.date(year, int(match["mo"] or 1), int(match["d"] or 1))
    except ValueError:
        return None


def parse_duration_millis(text: str | None) -> int | None:
    """airlift's Duration (``42.8ms``, ``3.81 d``, ``5m``) in whole milliseconds, rounded half up; None when
    `text` is not one."""
    match = _DURATION.fullmatch(text) if text is not None else None
    if match is None or match[2] not in _DURATION_MILLIS:
        return None
    return math.floor(float(match[1]) * _DURATION_MILLIS[match[2]] + 0.5)


def human_readable_seconds(seconds: float | None) -> str | None:
    """``1 hour, 2 minutes, 42 seconds`` (TestHumanReadableSeconds); None for NaN or infinity."""
    if seconds is None or not math.isfinite(seconds):
        return None
    rest = math.floor(abs(seconds) + 0.5)
    parts = []
    for unit, size in _HUMAN_UNITS:
        count, rest = divmod(rest, size)
        if count:
            parts.append(f"{count} {unit}{'' if count == 1 else 's'}")
    return ", ".join(parts) or "0 seconds"


def register(con: duckdb.DuckDBPyConnection) -> None:
    """Add the Python functions the rewrites call (``trino_*``) to `con`."""
    special: Any = "special"  # NULL arguments reach the function (it answers NULL for them)
    con.create_function("trino_from_iso8601_date", from_iso8601_date, ["VARCHAR"], "DATE", null_handling=special)
    con.create_function(
        "trino_parse_duration_millis", parse_duration_millis, ["VARCHAR"], "BIGINT", null_handling=special
    )
    con.create_function(
        "trino_human_readable_seconds", human_readable_seconds, ["DOUBLE"], "VARCHAR", null_handling=special
    )
