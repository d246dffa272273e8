"""Comparing the local engine's answer with a case's expected value and type.

The local engine answers as Athena's ``GetQueryResults`` does: each value as text (``VarCharValue``, None for SQL
NULL) and each column's Trino type (:mod:`local.emulators.duckdb_engine.values`). The expected value is JSON; the
two are compared by the **expected** type:

=============================================  ===================================================================
expected type                                  equal when
=============================================  ===================================================================
any, expected ``null``                         the answer is SQL NULL
``tinyint`` ``smallint`` ``integer`` ``bigint``  the text is that integer exactly
``double``                                     the text is a number within a relative 1e-12 of the expected
                                               one (``"NaN"``, ``"Infinity"``, ``"-Infinity"`` by name)
``real``                                       the same float32 (Trino prints reals as float32)
``decimal(p,s)``                               a string: the same text (the scale shows: ``"3.50"``); a number:
                                               the same decimal value
``boolean``                                    ``true``/``false``
``array(...)``, ``map(...)``, ``row(...)``       a JSON list/object printed as Athena prints it (``[1, 2]``,
                                               ``{a=1, b=2}``, nested ``null``) is the same text; a map's entries
                                               in any order
anything else (``varchar``, ``date``,          the same text: Trino prints timestamps
``timestamp(3) with time zone``, ``json``...)  ``2001-08-22 03:04:05.321 America/Los_Angeles``
=============================================  ===================================================================

Types are equal when their text is, ignoring case and the spaces around commas and parentheses
(``decimal(3, 1)`` is ``decimal(3,1)``).
"""

from __future__ import annotations

import decimal
import math
import re
import struct
from typing import Any

__all__ = ["athena_text", "same_type", "same_value"]

_INTEGER_TYPES = frozenset({"tinyint", "smallint", "integer", "bigint"})
_SPECIAL_DOUBLES = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
DOUBLE_RELATIVE_TOLERANCE = 1e-12


def _normal_type(text: str) -> str:
    collapsed = " ".join(text.strip().lower().split())
    return re.sub(r"\s*([(),])\s*", r"\1", collapsed)


def same_type(expected: str, actual: str | None) -> bool:
    """Whether the type texts name the same Trino type (case and spacing aside)."""
    return actual is not None and _normal_type(expected) == _normal_type(actual)


def _head(type_text: str) -> str:
    return _normal_type(type_text).split("(", 1)[0].strip()


def athena_text(value: Any) -> str:
    """A JSON value as Athena prints it inside an array, map or row: ``null``, ``true``, ``[1, 2]``, ``{a=1}``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(athena_text(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}={athena_text(v)}" for k, v in value.items()) + "}"
    return str(value)


def _top_level_items(text: str) -> list[str]:
    """``"a=1, b=[1, 2]"`` -> ``["a=1", "b=[1, 2]"]``: split on the commas outside brackets."""
    items, depth, start = [], 0, 0
    for index, char in enumerate(text):
        if char in "[{(":
            depth += 1
        elif char in "]})":
            depth -= 1
        elif char == "," and depth == 0:
            items.append(text[start:index].strip())
            start = index + 1
    tail = text[start:].strip()
    return [*items, tail] if tail or items else []


def _double(text: str) -> float | None:
    if text in _SPECIAL_DOUBLES:
        return _SPECIAL_DOUBLES[text]
    try:
        return float(text)
    except ValueError:
        return None


def _same_double(expected: Any, actual: str) -> bool:
    want = _SPECIAL_DOUBLES.get(expected) if isinstance(expected, str) else expected
    got = _double(actual.strip())
    if not isinstance(want, (int, float)) or isinstance(want, bool) or got is None:
        return False
    if math.isnan(want) or math.isnan(got):
        return math.isnan(want) and math.isnan(got)
    if math.isinf(want) or math.isinf(got):
        return want == got
    return math.isclose(float(want), got, rel_tol=DOUBLE_RELATIVE_TOLERANCE, abs_tol=0.0)


def _same_real(expected: Any, actual: str) -> bool:
    want = _SPECIAL_DOUBLES.get(expected) if isinstance(expected, str) else expected
    got = _double(actual.strip())
    if not isinstance(want, (int, float)) or isinstance(want, bool) or got is None:
        return False
    if math.isnan(want) or math.isnan(got):
        return math.isnan(want) and math.isnan(got)
    try:
        return struct.pack("<f", float(want)) == struct.pack("<f", got)
    except OverflowError:
        return False


def _same_decimal(expected: Any, actual: str) -> bool:
    if isinstance(expected, str):
        return expected == actual.strip()
    if isinstance(expected, bool) or not isinstance(expected, (int, float)):
        return False
    try:
        return decimal.Decimal(str(expected)) == decimal.Decimal(actual.strip())
    except decimal.InvalidOperation:
        return False


def same_value(expected: Any, expected_type: str, actual: str | None) -> bool:
    """Whether Athena's text ``actual`` (None: SQL NULL) is the JSON ``expected`` of a column of ``expected_type``
    (the table in this module's docstring)."""
    if expected is None or actual is None:
        return expected is None and actual is None
    head = _head(expected_type)
    if head in _INTEGER_TYPES:
        return isinstance(expected, int) and not isinstance(expected, bool) and actual.strip() == str(expected)
    if head == "double":
        return _same_double(expected, actual)
    if head == "real":
        return _same_real(expected, actual)
    if head == "decimal":
        return _same_decimal(expected, actual)
    if head == "boolean":
        return isinstance(expected, bool) and actual.strip() == ("true" if expected else "false")
    if head == "map" and isinstance(expected, dict):
        if not (actual.startswith("{") and actual.endswith("}")):
            return False
        return sorted(_top_level_items(actual[1:-1])) == sorted(f"{k}={athena_text(v)}" for k, v in expected.items())
    if isinstance(expected, (list, dict)):
        return athena_text(expected) == actual
    if isinstance(expected, bool):
        return athena_text(expected) == actual
    return str(expected) == actual
