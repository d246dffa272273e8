"""Trino's time zones, timestamp precisions and intervals on DuckDB, for the rewrites of :mod:`.trino_semantics`.

Sources (trinodb/trino): the docs ``docs/src/main/sphinx/functions/datetime.md`` and ``language/types.md`` at
02d8a7108d6894aa8b07ca42f161e5a3d992a16b; ``core/trino-main/src/main/java/io/trino/operator/scalar/
DateTimeFunctions.java`` at 03d8e5abc686c5c4a9f96ca14db07e2aed880174 (``getTimeZoneKeyForOffset``: an offset of
0 is the zone ``UTC``, beyond +-14:00 INVALID_FUNCTION_ARGUMENT); ``io/trino/type/DateTimes.java`` (the timestamp
literal: ``YYYY-MM-DD[ HH:MM[:SS[.fraction]]][ zone]``, the precision is the number of fraction digits).

How a Trino value lives in DuckDB (the session zone is UTC):

- ``timestamp(p)``: a naive TIMESTAMP (p <= 6) or TIMESTAMP_NS (7 <= p <= 9); p > 9 (picoseconds) is refused.
- ``timestamp(p) with time zone``: the instant as a TIMESTAMPTZ (p <= 6) or as a naive UTC TIMESTAMP_NS (p > 6);
  its zone travels with the type (:class:`.trino_types.TrinoType` ``zone``): a region (``Asia/Kathmandu``),
  ``UTC``, or a fixed offset written as Trino prints it (``+07:09``). DuckDB's ``timezone()`` knows regions
  only: offsets are applied as arithmetic (:func:`to_wall`, :func:`from_wall`).
- ``interval year to month``: a DuckDB INTERVAL of months only, printed ``3-5`` (:func:`output_text`).

Columns DuckDB cannot print as Trino does (an offset zone, nanoseconds, a year-month interval) are printed by the
query itself (:func:`output_text`); the others by :mod:`.values`.
"""

from __future__ import annotations

import re
import zoneinfo
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Final

from sqlglot import exp

from .trino_tree import Refused, athena_only, duck, literal_text
from .trino_types import UNKNOWN_ZONE, TrinoType

__all__ = [
    "CARRIED",
    "DAY_SECOND",
    "YEAR_MONTH",
    "add_nanos",
    "arithmetic",
    "carried",
    "derived_projection",
    "derived_type",
    "from_wall",
    "interval_kind",
    "interval_zone",
    "is_offset",
    "iso8601_literal",
    "offset_minutes",
    "offset_sql",
    "offset_zone",
    "output_text",
    "refuse_lost_types",
    "timestamp_text",
    "to_wall",
    "type_text",
    "year_month_literal",
    "zone_name",
    "zoned_literal",
]

#: ``meta`` key of a subquery's column typed with its expression's zone or precision.
CARRIED: Final = "trino_carried"
YEAR_MONTH: Final = TrinoType("interval year to month")
DAY_SECOND: Final = TrinoType("interval day to second")
#: TimeZoneKey: offsets from -14:00 to +14:00.
_MAX_OFFSET_MINUTES: Final = 14 * 60
_OFFSET: Final = re.compile(r"(?P<sign>[+-])(?P<h>\d{1,2})(?::?(?P<m>\d{2}))?")
#: DateTimes' timestamp literal: date, optional time with any number of fraction digits, optional zone.
_LITERAL: Final = re.compile(
    r"\s*(?P<y>\d{4})-(?P<mo>\d{1,2})-(?P<d>\d{1,2})"
    r"(?: (?P<h>\d{1,2}):(?P<mi>\d{1,2})(?::(?P<s>\d{1,2})(?:\.(?P<f>\d+))?)?)?\s*(?P<zone>\S.*?)?\s*"
)
#: ISO 8601 (from_iso8601_timestamp): a calendar date, optionally a time, optionally Z or an offset.
_ISO: Final = re.compile(
    r"(?P<y>\d{4})-(?P<mo>\d{2})-(?P<d>\d{2})"
    r"(?:T(?P<h>\d{2})(?::(?P<mi>\d{2})(?::(?P<s>\d{2})(?:[.,](?P<f>\d{1,9}))?)?)?)?"
    r"(?P<zone>Z|[+-]\d{2}(?::?\d{2})?)?"
)
_EPOCH: Final = datetime(1970, 1, 1)
_NANOS: Final = 1_000_000_000


# --- zones ---------------------------------------------------------------------------------------------------
def is_offset(zone: str | None) -> bool:
    """A fixed-offset zone (``+07:09``), as opposed to a region or UTC."""
    return zone is not None and zone[:1] in "+-" and len(zone) == 6


def offset_zone(minutes: int) -> str:
    """The zone of a UTC offset as Trino names it: 0 is ``UTC``, else ``+HH:MM``.

    :raises Refused: INVALID_FUNCTION_ARGUMENT beyond +-14:00 (TimeZoneKey.getTimeZoneKeyForOffset)."""
    if abs(minutes) > _MAX_OFFSET_MINUTES:
        raise Refused("INVALID_FUNCTION_ARGUMENT", f"Invalid offset minutes {minutes}")
    if minutes == 0:
        return "UTC"
    sign = "-" if minutes < 0 else "+"
    return f"{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"


def offset_minutes(zone: str) -> int:
    """The minutes east of UTC of a fixed-offset zone (``-05:00`` -> -300)."""
    sign = -1 if zone.startswith("-") else 1
    return sign * (int(zone[1:3]) * 60 + int(zone[4:6]))


def zone_name(text: str) -> str:
    """A zone written in SQL (``UTC``, ``Z``, ``Europe/Berlin``, ``+07:09``, ``-05``) as Trino names it.

    :raises Refused: INVALID_FUNCTION_ARGUMENT for a zone Trino does not know ("Time zone not supported")."""
    stripped = text.strip()
    if stripped.upper() in ("UTC", "Z", "GMT", "UT", "ZULU", "UCT"):
        return "UTC"
    offset = _OFFSET.fullmatch(stripped)
    if offset is not None:
        minutes = int(offset["h"]) * 60 + int(offset["m"] or 0)
        return offset_zone(-minutes if offset["sign"] == "-" else minutes)
    try:
        zoneinfo.ZoneInfo(stripped)
    except (ValueError, KeyError, OSError):
        raise Refused("INVALID_FUNCTION_ARGUMENT", f"Time zone not supported: {text}") from None
    return stripped


# --- instants and wall times in DuckDB -----------------------------------------------------------------------
def _nanos(precision: int | None) -> bool:
    return precision is not None and precision > 6


def to_wall(zone: str, node: exp.Expr, precision: int | None) -> exp.Expr:
    """The wall time in `zone` (a naive TIMESTAMP, TIMESTAMP_NS when `precision` > 6) of the instant `node`."""
    if _nanos(precision):
        if zone == "UTC":
            return node
        return duck("make_timestamp_ns(epoch_ns(_a) + _o * 60000000000)", _a=node, _o=offset_sql(zone, node, precision))
    if zone == "UTC":
        return duck("CAST(_a AS TIMESTAMP)", _a=node)
    if is_offset(zone):
        return duck(f"CAST(_a AS TIMESTAMP) + INTERVAL '{offset_minutes(zone)}' MINUTE", _a=node)
    return duck(f"timezone('{zone}', _a)", _a=node)


def from_wall(zone: str, node: exp.Expr, precision: int | None) -> exp.Expr:
    """The instant whose wall time in `zone` is the naive `node` (TIMESTAMPTZ; refused for nanoseconds)."""
    if _nanos(precision):
        raise athena_only(f"this operation on a timestamp({precision}) with time zone")
    if zone == "UTC":
        return duck("CAST(_a AS TIMESTAMPTZ)", _a=node)
    if is_offset(zone):
        return duck(f"CAST(_a - INTERVAL '{offset_minutes(zone)}' MINUTE AS TIMESTAMPTZ)", _a=node)
    return duck(f"timezone('{zone}', _a)", _a=node)


def offset_sql(zone: str, node: exp.Expr, precision: int | None) -> exp.Expr:
    """The UTC offset in minutes (BIGINT) of the instant `node` in `zone` (a region's depends on the instant)."""
    if zone == "UTC":
        return exp.Literal.number(0)
    if is_offset(zone):
        return exp.Literal.number(offset_minutes(zone))
    instant = duck("CAST(_a AS TIMESTAMPTZ)", _a=node) if _nanos(precision) else node
    return duck(
        f"CAST(round((epoch(timezone('{zone}', _a)) - epoch(CAST(_a AS TIMESTAMPTZ))) / 60) AS BIGINT)", _a=instant
    )


def timestamp_text(wall: exp.Expr, precision: int, separator: str = " ") -> exp.Expr:
    """A naive timestamp as Trino prints a ``timestamp(p)``: ``2020-05-01 12:34:56.123456789`` (p fraction
    digits, none when p is 0); `separator` between date and time (``T`` for to_iso8601)."""
    head = f"%Y-%m-%d{separator}%H:%M:%S"
    if precision == 0:
        return duck(f"strftime(_a, '{head}')", _a=wall)
    if precision > 9:
        raise athena_only(f"a timestamp({precision}) (picoseconds)")
    fraction = "%n" if precision > 6 else "%f"
    return duck(f"substr(strftime(_a, '{head}.{fraction}'), 1, {20 + precision})", _a=wall)


def output_text(node: exp.Expr, kind: TrinoType) -> exp.Expr | None:
    """The text of an output column that :mod:`.values` cannot print as Trino does (an offset zone, more than 6
    fraction digits, a year-month interval); None when it can."""
    if kind == YEAR_MONTH:
        months = duck("CAST(date_part('year', _a) * 12 + date_part('month', _a) AS BIGINT)", _a=node)
        return duck(
            "CASE WHEN _m < 0 THEN '-' ELSE '' END || CAST(abs(_m) // 12 AS VARCHAR) || '-' || CAST(abs(_m) % 12 AS VARCHAR)",
            _m=months,
        )
    precision = kind.precision
    if kind.name == "timestamp" and _nanos(precision):
        return timestamp_text(node, precision or 0)
    if kind.name == "timestamptz" and kind.zone and (is_offset(kind.zone) or _nanos(precision)):
        shown = 3 if precision is None else precision
        text = timestamp_text(to_wall(kind.zone, node, shown), shown)
        return duck(f"_t || ' {kind.zone}'", _t=text)
    return None


def type_text(kind: TrinoType) -> str | None:
    """The Trino type text of an interval (``interval year to month``); None for any other type."""
    return kind.name if kind.name.startswith("interval ") else None


#: date_add's units of a fixed length, in nanoseconds (a day is 24 hours in UTC and in a fixed offset).
_UNIT_NANOS: Final = {
    "millisecond": 10**6, "second": 10**9, "minute": 60 * 10**9, "hour": 3600 * 10**9, "day": 86400 * 10**9,
    "week": 7 * 86400 * 10**9,
}  # fmt: skip


def add_nanos(unit: str, amount: exp.Expr, value: exp.Expr, kind: TrinoType) -> exp.Expr:
    """``date_add(unit, amount, value)`` of a timestamp with more than 6 fraction digits (TIMESTAMP_NS), exact.

    :raises Refused: a unit of varying length (month, quarter, year; a day in a region's zone): NOT_SUPPORTED."""
    step = _UNIT_NANOS.get(unit)
    fixed_days = kind.name == "timestamp" or kind.zone == "UTC" or is_offset(kind.zone)
    if step is None or (unit in ("day", "week") and not fixed_days):
        raise athena_only(f"date_add('{unit}', ...) of a {kind.name}({kind.precision})")
    return duck(f"make_timestamp_ns(epoch_ns(_a) + CAST(_n AS BIGINT) * {step})", _a=value, _n=amount)


# --- values carried through a subquery ---------------------------------------------------------------------
def carried(kind: TrinoType) -> bool:
    """A type whose zone, precision or kind the engine carries itself (DuckDB's type does not say it): a
    timestamp with a time zone other than UTC, more than 6 fraction digits, a year-month interval."""
    if kind == YEAR_MONTH:
        return True
    if kind.name == "timestamptz" and kind.zone != "UTC":
        return True
    return kind.name in ("timestamp", "timestamptz") and _nanos(kind.precision)


def derived_type(column: exp.Column, type_of: Callable[[exp.Expr], TrinoType]) -> TrinoType | None:
    """The type of the expression a subquery's column stands for, through nested subqueries (None: not one)."""
    source = derived_projection(column)
    for _ in range(32):  # nested subqueries, bounded
        deeper = derived_projection(source) if isinstance(source, exp.Column) else None
        if deeper is None:
            break
        source = deeper
    return None if source is None else type_of(source)


def refuse_lost_types(tree: exp.Expr, type_of: Callable[[exp.Expr], TrinoType], outputs: set[int]) -> None:
    """A zone, a precision or an interval kind the engine carries itself (:func:`carried`) is lost where a
    subquery's column was not typed with it (:data:`CARRIED` marks those that were; `outputs`: the ids of the
    output columns, typed when printed): refused, rather than answered in UTC or with 3 digits."""
    for column in tree.find_all(exp.Column):
        if column.meta.get(CARRIED) or id(column) in outputs:
            continue
        derived = derived_type(column, type_of)
        if derived is not None and carried(derived):
            shown = derived.name if derived.precision is None else f"{derived.name}({derived.precision})"
            raise athena_only(f"a {shown} value used through a subquery ({column.sql()})")


def derived_projection(column: exp.Column) -> exp.Expr | None:
    """The expression a column of a subquery, a WITH query or VALUES stands for (``x`` of ``FROM (SELECT ... AS
    x)``), or None (a table's column, or not found in the enclosing query's FROM and JOINs)."""
    select = column.find_ancestor(exp.Select)
    if select is None:
        return None
    sources = [select.args.get("from_")] + list(select.args.get("joins") or [])
    found = [
        projection
        for source in sources
        if source is not None
        for projection in [_source_column(source.this, column, select)]
        if projection is not None
    ]
    return found[0] if len(found) == 1 else None


def _source_column(source: exp.Expr, column: exp.Column, select: exp.Select) -> exp.Expr | None:
    if column.table and column.table != source.alias_or_name:
        return None
    query: exp.Expr | None = source.this if isinstance(source, exp.Subquery) else None
    if isinstance(source, exp.Table) and not source.db:
        scope: exp.Expr | None = select
        while scope is not None and query is None:  # the nearest WITH that names it
            with_ = scope.args.get("with_")
            ctes = with_.expressions if isinstance(with_, exp.With) else []
            query = next((cte.this for cte in ctes if cte.alias_or_name == source.name), None)
            scope = scope.parent
    if isinstance(source, exp.Values) and source.expressions and isinstance(source.expressions[0], exp.Tuple):
        names = [identifier.name for identifier in source.args["alias"].columns] if source.args.get("alias") else []
        row = source.expressions[0].expressions
        return row[names.index(column.name)] if column.name in names and len(row) == len(names) else None
    if not isinstance(query, exp.Select):
        return None
    matches = [p.unalias() for p in query.expressions if p.alias_or_name == column.name]
    return matches[0] if len(matches) == 1 else None


# --- literals ------------------------------------------------------------------------------------------------
def _instant(naive: datetime, nanos: int, zone: str) -> int:
    """Epoch nanoseconds of the wall time `naive` (+ `nanos`) in `zone` (a region: its offset at that wall time,
    the earlier one in an overlap)."""
    if zone == "UTC":
        offset = 0
    elif is_offset(zone):
        offset = offset_minutes(zone) * 60
    else:
        shift = naive.replace(tzinfo=zoneinfo.ZoneInfo(zone)).utcoffset() or timedelta(0)
        offset = int(shift.total_seconds())
    seconds = (naive - _EPOCH) // timedelta(seconds=1) - offset
    return seconds * _NANOS + nanos


def _constant(epoch_nanos: int, precision: int) -> exp.Expr:
    """An instant as a DuckDB constant: TIMESTAMPTZ (p <= 6) or naive UTC TIMESTAMP_NS (p > 6)."""
    if precision > 6:
        return duck(f"make_timestamp_ns({epoch_nanos})")
    return duck(f"CAST(make_timestamp({epoch_nanos // 1000}) AS TIMESTAMPTZ)")


def _fields(match: re.Match[str]) -> tuple[datetime, int, int]:
    """(whole-second naive datetime, nanoseconds, number of fraction digits) of a matched literal."""
    fraction = match["f"] or ""
    if len(fraction) > 9:
        raise athena_only(f"a timestamp({len(fraction)}) (picoseconds)")
    try:
        naive = datetime(
            int(match["y"]), int(match["mo"]), int(match["d"]), int(match["h"] or 0), int(match["mi"] or 0),
            int(match["s"] or 0),
        )  # fmt: skip
    except ValueError as exc:
        raise Refused("INVALID_LITERAL", f"'{match.string}' is not a valid timestamp literal") from exc
    return naive, int(fraction.ljust(9, "0")) if fraction else 0, len(fraction)


def zoned_literal(text: str, precision: int | None) -> tuple[str, exp.Expr]:
    """``TIMESTAMP 'text'`` with a zone (without one: the session zone, UTC): its zone as Trino names it and its
    instant as a DuckDB constant (read here: DuckDB's cast knows neither offsets like ``+07:09`` nor
    nanoseconds). :raises Refused: a text that is not a timestamp literal (INVALID_LITERAL, NOT_SUPPORTED)."""
    match = _LITERAL.fullmatch(text)
    if match is None:
        raise athena_only(f"a timestamp literal of this form ({text!r})")
    zone = zone_name(match["zone"]) if match["zone"] else "UTC"
    naive, nanos, digits = _fields(match)
    shown = digits if precision is None else precision
    instant = _instant(naive, nanos, zone)
    if shown < digits:  # rounded half up (operator/scalar/timestamptz/TestTimestampWithTimeZone.java at 22b58b4)
        unit = 10 ** (9 - shown)
        instant = (instant + unit // 2) // unit * unit
    return zone, _constant(instant, shown)


def iso8601_literal(text: str, nanos: bool) -> tuple[str, exp.Expr]:
    """from_iso8601_timestamp(_nanos)('text'): (the zone, UTC when the text has none, and the instant as a
    DuckDB constant), timestamp(3) (fraction truncated to milliseconds, as Joda parses it) or timestamp(9).

    :raises Refused: a form not reproduced here (week dates, ordinal dates, no time for the nanos variant)."""
    match = _ISO.fullmatch(text.strip())
    if match is None or (nanos and match["h"] is None):
        raise athena_only(f"from_iso8601_timestamp of this form ({text!r})")
    zone = zone_name(match["zone"]) if match["zone"] else "UTC"
    naive, fraction, _ = _fields(match)
    if not nanos:
        fraction -= fraction % 1_000_000
    return zone, _constant(_instant(naive, fraction, zone), 9 if nanos else 3)


# --- intervals -----------------------------------------------------------------------------------------------
def interval_zone(node: exp.Interval) -> str:
    """The fixed-offset zone of ``at_timezone(x, INTERVAL '03:04' HOUR TO MINUTE)`` (also ``x AT TIME ZONE
    INTERVAL ...``): ``+03:04``; ``HOUR``, ``MINUTE`` and ``HOUR TO MINUTE`` literals only.

    :raises Refused: INVALID_FUNCTION_ARGUMENT beyond +-14:00; NOT_SUPPORTED for another form."""
    negated = isinstance(node.this, exp.Neg)  # INTERVAL -'05' HOUR
    text, unit = literal_text(node.this.this if negated else node.this), node.args.get("unit")
    spans = [unit.this, unit.expression] if isinstance(unit, exp.IntervalSpan) else [unit]
    names = [part.name.upper() if isinstance(part, exp.Expr) else "" for part in spans]
    match = re.fullmatch(r"\s*([+-]?)(\d+)(?::(\d{2}))?\s*", text or "")
    if (
        match is None
        or names not in (["HOUR"], ["MINUTE"], ["HOUR", "MINUTE"])
        or (names == ["HOUR", "MINUTE"]) != (match[3] is not None)
    ):
        raise athena_only(f"a time zone given as this interval ({node.sql('trino')})")
    minutes = int(match[2]) * (1 if names == ["MINUTE"] else 60) + int(match[3] or 0)
    return offset_zone(-minutes if (match[1] == "-") != negated else minutes)


def year_month_literal(node: exp.Interval) -> exp.Expr | None:
    """``INTERVAL '2-3' YEAR TO MONTH`` as a DuckDB interval of 27 months (DuckDB has no such literal); None for
    any other interval."""
    unit, text = node.args.get("unit"), literal_text(node.this)
    if not (isinstance(unit, exp.IntervalSpan) and unit.this.name.upper() == "YEAR" and text is not None):
        return None
    match = re.fullmatch(r"\s*([+-]?)(\d+)-(\d+)\s*", text)
    if match is None or int(match[3]) > 11:
        raise Refused("INVALID_LITERAL", f"'{text}' is not a valid INTERVAL YEAR TO MONTH literal")
    months = (int(match[2]) * 12 + int(match[3])) * (-1 if match[1] == "-" else 1)
    return duck(f"INTERVAL '{months}' MONTH")


def interval_kind(node: exp.Interval) -> TrinoType:
    """``INTERVAL '3' YEAR``, ``MONTH``, ``YEAR TO MONTH``: interval year to month; any other unit day to second
    (language/types.md, "INTERVAL YEAR TO MONTH", "INTERVAL DAY TO SECOND")."""
    unit = node.args.get("unit")
    first = unit.this if isinstance(unit, exp.IntervalSpan) else unit
    name = first.name.upper() if isinstance(first, exp.Expr) else ""
    return YEAR_MONTH if name in ("YEAR", "MONTH", "YEARS", "MONTHS") else DAY_SECOND


def arithmetic(node: exp.Binary, left: TrinoType, right: TrinoType) -> tuple[TrinoType, exp.Expr | None] | None:
    """Interval arithmetic (datetime.md, "Date and time operators"): two intervals of one kind add and subtract to
    that kind, of two kinds are TYPE_MISMATCH; an interval times a number (or divided by one) keeps its kind; a
    timestamp with time zone plus or minus a year-month interval moves in its own zone's calendar.
    None when the operands are not of these shapes (a date or timestamp with an interval: the caller's rules)."""
    intervals = (YEAR_MONTH.name, DAY_SECOND.name)
    operator = {exp.Add: "+", exp.Sub: "-", exp.Mul: "*", exp.Div: "/"}.get(type(node))
    with_interval = left.name in intervals or right.name in intervals
    for kind in (left, right):
        if with_interval and kind.name in ("timestamp", "timestamptz") and _nanos(kind.precision):
            raise athena_only(f"interval arithmetic on a {kind.name}({kind.precision})")
    zoned, months = (left, right) if right == YEAR_MONTH else (right, left)
    if months == YEAR_MONTH and zoned.name == "timestamptz" and operator in ("+", "-") and zoned.zone != "UTC":
        if zoned.zone in (None, UNKNOWN_ZONE) or (operator == "-" and zoned is right):
            raise athena_only("a year-month interval added to a timestamp whose time zone is known only when it runs")
        value, interval = (node.left, node.right) if zoned is left else (node.right, node.left)
        moved = duck(f"_a {operator} _b", _a=to_wall(zoned.zone, value, zoned.precision), _b=interval)
        return zoned, from_wall(zoned.zone, moved, zoned.precision)  # months in the value's own zone
    if left.name in intervals and right.name in intervals:
        if left.name != right.name or operator not in ("+", "-"):
            raise Refused("TYPE_MISMATCH", f"Cannot apply operator: {left.name} {operator} {right.name}")
        return left, None
    interval, number = (left, right) if left.name in intervals else (right, left)
    if interval.name not in intervals or not (number.is_exact or number.is_float):
        return None
    if operator == "*" or (operator == "/" and interval is left):
        if interval == YEAR_MONTH and (operator == "/" or not number.is_integer):
            raise athena_only(f"a year-month interval {operator} a {number.name}")
        return interval, None
    return None
