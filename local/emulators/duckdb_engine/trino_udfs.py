"""Python functions the local engine registers on its DuckDB connection, for Trino functions DuckDB has no faithful
equivalent of; each follows Trino's implementation (trinodb/trino, ``core/trino-main/src/main/java/io/trino/
operator/scalar/``): ``StringFunctions.java`` at 00e6f8b957a4352553a70648bb3ff9daf5d12d5c (hamming_distance,
split with a limit, strpos with an instance), ``LuhnCheckFunction.java`` and ``FormatNumberFunction.java`` at
029c93b693c7a3dbff995062fb9997f4acd86d77 / 9d429d765254461c046a086a1f1aedd1f99b7b9d, ``DataSizeFunctions.java`` at
03d8e5abc686c5c4a9f96ca14db07e2aed880174; the regexp ones are :mod:`.trino_regexp`'s, format :mod:`.trino_format`'s.
A NULL argument gives NULL (DuckDB's default null handling; trino_regexp_extract also returns NULL itself).

A failure is raised as ``TrinoFailure("CODE: message")``; DuckDB reports it as "Python exception occurred while
executing the UDF: TrinoFailure: CODE: message", which :mod:`.session` turns into Trino's code and message.
"""

from __future__ import annotations

import decimal
import functools
import math
from typing import Any, Final

import duckdb

from .trino_format import java_format
from .trino_regexp import (
    regexp_extract,
    regexp_extract_all,
    regexp_like,
    regexp_parts,
    regexp_position,
    regexp_replace,
    regexp_split,
)

__all__ = ["TrinoFailure", "register"]

_PARTS: Final = "STRUCT(parts VARCHAR[], groups VARCHAR[][])"
_LONG_MAX: Final = 2**63 - 1
#: parse_data_size's units (DataSizeFunctions.Unit): powers of 1024.
_DATA_UNITS: Final = {
    unit: 1024**power for power, unit in enumerate(["B", "kB", "MB", "GB", "TB", "PB", "EB", "ZB", "YB"])
}


class TrinoFailure(Exception):
    """A Trino run-time failure of a registered function: the message is ``CODE: text``."""


def hamming_distance(left: str, right: str) -> int:
    """The count of positions (code points) where `left` and `right` differ; INVALID_FUNCTION_ARGUMENT when their
    lengths differ (StringFunctions.hammingDistance)."""
    if len(left) != len(right):
        raise TrinoFailure(
            "INVALID_FUNCTION_ARGUMENT: The input strings to hamming_distance function must have the same length"
        )
    return sum(a != b for a, b in zip(left, right, strict=True))


def luhn_check(digits: str) -> bool:
    """Luhn's check of a string of digits ('' is false; a non-digit is INVALID_FUNCTION_ARGUMENT)."""
    if digits == "":
        return False
    total = 0
    for position, char in enumerate(reversed(digits.encode("utf-8"))):
        if not 0x30 <= char <= 0x39:
            raise TrinoFailure("INVALID_FUNCTION_ARGUMENT: Input contains non-digit character")
        digit = (char - 0x30) * (2 if position % 2 else 1)
        total += digit - 9 if digit > 9 else digit
    return total % 10 == 0


def split_limit(text: str, delimiter: str, limit: int) -> list[str]:
    """split(text, delimiter, limit): at most `limit` parts, the last one holding the rest of `text`."""
    if limit <= 0:
        raise TrinoFailure("INVALID_FUNCTION_ARGUMENT: Limit must be positive")
    if limit > 2**31 - 1:
        raise TrinoFailure("INVALID_FUNCTION_ARGUMENT: Limit is too large")
    if delimiter == "":
        raise TrinoFailure("INVALID_FUNCTION_ARGUMENT: The delimiter may not be the empty string")
    parts: list[str] = []
    index = 0
    while limit > 1 and index < len(text):
        found = text.find(delimiter, index)
        if found < 0:
            break
        parts.append(text[index:found])
        index = found + len(delimiter)
        if len(parts) == limit - 1:
            break
    parts.append(text[index:])
    return parts


def string_position(text: str, substring: str, instance: int) -> int:
    """strpos(text, substring, instance): the 1-based position of the instance-th occurrence (overlapping ones
    count), from the end when negative; 0 when there is none; 1 for ''."""
    if instance == 0:
        raise TrinoFailure("INVALID_FUNCTION_ARGUMENT: 'instance' must be a positive or negative number.")
    if substring == "":
        return 1
    found, index = 0, -1 if instance > 0 else len(text)
    while found < abs(instance):
        index = (
            text.find(substring, index + 1) if instance > 0 else text.rfind(substring, 0, index - 1 + len(substring))
        )
        if index < 0:
            return 0
        found += 1
    return index + 1


def format_number(count: int) -> str:
    """format_number of a bigint: 3 significant digits and K, M, B, T or Q (FormatNumberFunction)."""
    fractional = float(count)
    unit = ""
    for symbol in "KMBTQ":
        if fractional >= 1000 or fractional <= -1000:
            fractional /= 1000
            unit = symbol
    places = 2 if fractional < 10 else 1 if fractional < 100 else 0  # DecimalFormat #.##, #.#, # (HALF_UP)
    rounded = decimal.Decimal(fractional).quantize(decimal.Decimal(1).scaleb(-places), rounding=decimal.ROUND_HALF_UP)
    text = f"{rounded:f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return ("0" if text in ("-0", "") else text) + unit


def format_number_double(value: float) -> str:
    """format_number of a double: Java's ``(long) value`` (toward zero, NaN 0, saturated), then as a bigint."""
    if math.isnan(value):
        return format_number(0)
    if math.isinf(value):
        return format_number(_LONG_MAX if value > 0 else -_LONG_MAX - 1)
    return format_number(max(-_LONG_MAX - 1, min(_LONG_MAX, int(value))))


def parse_data_size(text: str) -> decimal.Decimal:
    """'2.3MB' -> 2411724 bytes (the value times the unit, toward zero); INVALID_FUNCTION_ARGUMENT otherwise."""
    length = 0
    while length < len(text) and (text[length].isdigit() or text[length] == "."):
        length += 1
    unit = _DATA_UNITS.get(text[length:])
    try:
        value = decimal.Decimal(text[:length]) if length and text[:length].isascii() else None
    except decimal.InvalidOperation:
        value = None
    if value is None or unit is None:
        raise TrinoFailure(f"INVALID_FUNCTION_ARGUMENT: Invalid data size: '{text}'")
    with decimal.localcontext() as context:
        context.prec = 80
        size = int(value * unit)
    if size >= 10**38:
        raise TrinoFailure(f"NUMERIC_VALUE_OUT_OF_RANGE: Value out of range: '{text}' ('{size}B')")
    return decimal.Decimal(size)


def _format(pattern: str, kinds: str, values: list[str | None]) -> str:
    try:
        return java_format(pattern, kinds.split(",") if kinds else [], values)
    except ValueError as exc:
        raise TrinoFailure(f"INVALID_FUNCTION_ARGUMENT: Invalid format string: {pattern} ({exc})") from None


def _failing(function: Any) -> Any:
    """`function` with ValueError (a bad pattern, a bad group) as INVALID_FUNCTION_ARGUMENT."""

    @functools.wraps(function)  # DuckDB reads the parameters from the signature
    def call(*args: Any) -> Any:
        try:
            return function(*args)
        except ValueError as exc:
            raise TrinoFailure(f"INVALID_FUNCTION_ARGUMENT: {exc}") from None

    return call


def register(con: duckdb.DuckDBPyConnection) -> None:
    """Register the functions on `con` (names prefixed ``trino_``)."""
    specs: list[tuple[str, Any, list[str], str]] = [
        ("trino_hamming_distance", hamming_distance, ["VARCHAR", "VARCHAR"], "BIGINT"),
        ("trino_luhn_check", luhn_check, ["VARCHAR"], "BOOLEAN"),
        ("trino_split", split_limit, ["VARCHAR", "VARCHAR", "BIGINT"], "VARCHAR[]"),
        ("trino_strpos", string_position, ["VARCHAR", "VARCHAR", "BIGINT"], "BIGINT"),
        ("trino_format_number", format_number, ["BIGINT"], "VARCHAR"),
        ("trino_format_number_double", format_number_double, ["DOUBLE"], "VARCHAR"),
        ("trino_parse_data_size", parse_data_size, ["VARCHAR"], "DECIMAL(38,0)"),
        ("trino_format", _format, ["VARCHAR", "VARCHAR", "VARCHAR[]"], "VARCHAR"),
        ("trino_regexp_position", _failing(regexp_position), ["VARCHAR", "VARCHAR", "BIGINT", "BIGINT"], "INTEGER"),
        ("trino_regexp_replace", _failing(regexp_replace), ["VARCHAR", "VARCHAR", "VARCHAR"], "VARCHAR"),
        ("trino_regexp_extract_all", _failing(regexp_extract_all), ["VARCHAR", "VARCHAR", "BIGINT"], "VARCHAR[]"),
        ("trino_regexp_like", _failing(regexp_like), ["VARCHAR", "VARCHAR"], "BOOLEAN"),
        ("trino_regexp_split", _failing(regexp_split), ["VARCHAR", "VARCHAR"], "VARCHAR[]"),
        ("trino_regexp_parts", _failing(regexp_parts), ["VARCHAR", "VARCHAR"], _PARTS),
    ]  # fmt: skip
    for name, function, parameters, result in specs:
        con.create_function(name, function, parameters, result, side_effects=False)  # type: ignore[arg-type]
    # NULL in, NULL out, and NULL out of a match too: DuckDB's "special" null handling
    extract = _failing(regexp_extract)

    def nullable_extract(source: str | None, pattern: str | None, group: int | None) -> str | None:
        if source is None or pattern is None or group is None:
            return None
        return extract(source, pattern, group)  # type: ignore[no-any-return]

    con.create_function(
        "trino_regexp_extract",
        nullable_extract,
        ["VARCHAR", "VARCHAR", "BIGINT"],
        "VARCHAR",  # type: ignore[arg-type]
        null_handling="special",
        side_effects=False,
    )
