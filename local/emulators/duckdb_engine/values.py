"""DuckDB values -> Athena ``VarCharValue`` text, DuckDB types -> Trino type names.

- **Values**: DuckDB values are rendered as the text Athena would put in ``VarCharValue`` (timestamps
  ``2013-01-01 05:00:00.000``, decimals exact, ``true``/``false``) and converted by
  ``athena_refresh.engine.convert_value``: both engines share one conversion. Column types are Trino names
  (``bigint``, ``double``, ``varchar``, ``timestamp``, ``decimal``, ...). DuckDB's HUGEINT (``count_if``,
  ``sum`` of integers) is reported as ``bigint``; a value outside bigint fails the query, as Trino does.
"""

from __future__ import annotations

import decimal
import math
import re
import struct
from collections.abc import Sequence
from datetime import UTC, date, datetime, timedelta
from datetime import time as dt_time
from typing import Any, Final
from zoneinfo import ZoneInfo

from .analysis import result_types
from .sql import QueryRejected
from .trino_types import trino_type_text

_INT64_MIN: Final = -(2**63)
_INT64_MAX: Final = 2**63 - 1

_TRINO_TYPE_OF: Final = {
    "boolean": "boolean",
    "tinyint": "tinyint",
    "smallint": "smallint",
    "integer": "integer",
    "bigint": "bigint",
    "utinyint": "smallint",
    "usmallint": "integer",
    "uinteger": "bigint",
    "ubigint": "bigint",  # checked to fit
    "hugeint": "bigint",  # checked to fit: count_if / sum of integers are HUGEINT in DuckDB, bigint in Trino
    "uhugeint": "bigint",  # checked to fit
    "float": "real",
    "double": "double",
    "decimal": "decimal",
    "varchar": "varchar",
    "enum": "varchar",
    "blob": "varbinary",
    "uuid": "uuid",
    "date": "date",
    "time": "time",
    "time with time zone": "time with time zone",
    "timestamp": "timestamp",
    "timestamp_s": "timestamp",
    "timestamp_ms": "timestamp",
    "timestamp_ns": "timestamp",
    "timestamp with time zone": "timestamp with time zone",
    "timestamptz_ns": "timestamp with time zone",
    "timestamp_tz_ns": "timestamp with time zone",
    "interval": "interval day to second",
    "list": "array",
    "array": "array",
    "map": "map",
    "struct": "row",
    "null": "unknown",
}
_CHECKED_BIGINT_IDS: Final = frozenset({"ubigint", "hugeint", "uhugeint"})


def _trino_type(duck_type: Any) -> str:
    if str(duck_type).upper() == "JSON":  # DuckDB's JSON is a VARCHAR alias
        return "json"
    return _TRINO_TYPE_OF.get(duck_type.id, str(duck_type).lower())


def _type_name(trino_type: str) -> str:
    """ColumnInfo.Type of a whole Trino type: without its parameters (``timestamp(9) with time zone`` ->
    ``timestamp with time zone``); a column the query printed itself (.trino_time) keeps its Trino type."""
    return re.sub(r"\(\d+(?:,\s*\d+)?\)", "", trino_type)


def _timestamp_text(value: datetime, precision: int) -> str:
    """A timestamp(p) as Trino prints it: p fraction digits (0: none; DuckDB keeps microseconds, finer ones are 0)."""
    if precision == 3:
        return _millis_text(value)
    whole = f"{value:%Y-%m-%d %H:%M:%S}"
    return whole if precision == 0 else f"{whole}.{f'{value.microsecond:06d}'[:precision].ljust(precision, '0')}"


def _millis_text(value: datetime | dt_time) -> str:
    """Athena prints timestamp(3)/time(3): whole seconds plus exactly three fraction digits (rounded)."""
    micros = value.microsecond
    millis = (micros + 500) // 1000
    if isinstance(value, datetime):
        base = value.replace(microsecond=0) + timedelta(milliseconds=millis)
        return f"{base:%Y-%m-%d %H:%M:%S}.{base.microsecond // 1000:03d}"
    if millis == 1000:  # time: round down instead of wrapping past midnight
        millis = 999
    return f"{value:%H:%M:%S}.{millis:03d}"


def _double_text(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return repr(value)


def _real_text(value: float) -> str:
    """Shortest text that reads back as the same float32 (Trino prints reals that way, not as doubles)."""
    if not math.isfinite(value):
        return _double_text(value)
    packed = struct.pack("<f", value)
    for digits in range(1, 10):
        text = f"{value:.{digits}g}"
        if struct.pack("<f", float(text)) == packed:
            return repr(float(text))
    return repr(value)


def _athena_text(value: Any, type_id: str = "", zone: str | None = None, precision: int = 3) -> str | None:
    """One DuckDB value as Athena's ``VarCharValue`` text (None for SQL NULL); `zone`: the zone a timestamp with
    time zone prints in (UTC by default); `precision`: a timestamp's fraction digits."""
    if value is None:
        return None
    if isinstance(value, datetime) and value.tzinfo is not None:
        shown = value.astimezone(ZoneInfo(zone or "UTC")).replace(tzinfo=None)
        return _timestamp_text(shown, precision) + f" {zone or 'UTC'}"
    if isinstance(value, datetime) and precision != 3:
        return _timestamp_text(value, precision)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _real_text(value) if type_id == "float" else _double_text(value)
    if isinstance(value, decimal.Decimal):
        return format(value, "f")
    if isinstance(value, str):
        return value
    if isinstance(value, datetime):
        if value.tzinfo is not None:
            return _millis_text(value.astimezone(UTC).replace(tzinfo=None)) + " UTC"
        return _millis_text(value)
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, dt_time):
        return _millis_text(value)
    if isinstance(value, timedelta):  # interval day to second: "1 02:03:04.000"
        total_ms = round(value.total_seconds() * 1000)
        sign = "-" if total_ms < 0 else ""
        days, rest_ms = divmod(abs(total_ms), 86_400_000)
        hours, rest_ms = divmod(rest_ms, 3_600_000)
        minutes, rest_ms = divmod(rest_ms, 60_000)
        seconds, millis = divmod(rest_ms, 1000)
        return f"{sign}{days} {hours:02d}:{minutes:02d}:{seconds:02d}.{millis:03d}"
    if isinstance(value, (bytes, bytearray, memoryview)):
        return " ".join(f"{b:02x}" for b in bytes(value))
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_nested_text(v, zone, precision) for v in value) + "]"
    if isinstance(value, dict):  # row and map both print as {k=v, ...}
        shown = (f"{_nested_text(k, zone, precision)}={_nested_text(v, zone, precision)}" for k, v in value.items())
        return "{" + ", ".join(shown) + "}"
    return str(value)  # uuid.UUID and anything else


def _fraction_digits(trino_type: str) -> int:
    """The fraction digits of the timestamps of a type text, nested ones too (``array(timestamp(0))``: 0); 3 when
    there are none or several precisions."""
    found = set(re.findall(r"timestamp\((\d+)\)", trino_type))
    return int(found.pop()) if len(found) == 1 else 3


def _nested_text(value: Any, zone: str | None = None, precision: int = 3) -> str:
    text = _athena_text(value, zone=zone, precision=precision)
    return "null" if text is None else text


def _render(
    names: list[str],
    duck_types: list[Any],
    raw_rows: list[tuple[Any, ...]],
    zones: tuple[str | None, ...] = (),
    output_types: tuple[str | None, ...] = (),
    checked_types: Sequence[str | None] = (),
) -> tuple[list[dict[str, str]], list[list[str | None]]]:
    """Columns (``type``: Athena's ColumnInfo.Type; ``trino_type``: the whole Trino type) and rows as Athena text,
    zoned timestamps in their column's zone (`zones`, by position); bigint overflow of HUGEINT-like columns ->
    rejected. `output_types`: the engine's Trino types where DuckDB's lose a parameter (:mod:`.trino_semantics`);
    `checked_types`: the SQL check's (:func:`.analysis.result_types` prefers them). Values print by the column's
    final Trino type (an ``array(timestamp(0))``'s elements without fraction digits)."""
    precise = list(output_types) + [None] * (len(names) - len(output_types))
    columns = [
        {
            "name": name,
            "type": _type_name(exact) if exact else _trino_type(t),
            "trino_type": exact or trino_type_text(t),
        }
        for name, t, exact in zip(names, duck_types, precise, strict=True)
    ]
    for column, trino_type in zip(
        columns, result_types(checked_types, [c["trino_type"] for c in columns]), strict=True
    ):
        column["trino_type"] = trino_type
    zone_of = list(zones) + [None] * (len(names) - len(zones))
    digits = [_fraction_digits(c["trino_type"]) for c in columns]
    type_ids = [t.id for t in duck_types]
    checked = [i for i, type_id in enumerate(type_ids) if type_id in _CHECKED_BIGINT_IDS]
    for row in raw_rows:
        for i in checked:
            value = row[i]
            if value is not None and not _INT64_MIN <= value <= _INT64_MAX:
                raise QueryRejected(
                    "NUMERIC_VALUE_OUT_OF_RANGE", f"column {names[i]!r}: {value} does not fit in bigint"
                )
    rows = [
        [
            _athena_text(v, type_id, zone, precision)
            for v, type_id, zone, precision in zip(row, type_ids, zone_of, digits, strict=True)
        ]
        for row in raw_rows
    ]
    return columns, rows
