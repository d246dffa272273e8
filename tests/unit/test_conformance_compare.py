"""tools.conformance.compare: the local engine's text answer against a case's JSON value and Trino type (pure)."""

from __future__ import annotations

from typing import Any

import pytest

from tools.conformance.compare import same_type, same_value


@pytest.mark.parametrize(
    ("expected", "type_", "actual"),
    [
        (3, "integer", "3"),
        (None, "bigint", None),
        (0.1 + 0.2, "double", "0.30000000000000004"),
        (0.3, "double", "0.30000000000000004"),  # within a relative 1e-12
        ("NaN", "double", "NaN"),
        ("Infinity", "double", "Infinity"),
        (3.14, "real", "3.14"),
        ("3.50", "decimal(3,2)", "3.50"),
        (3.5, "decimal(3,2)", "3.50"),
        (True, "boolean", "true"),
        ("ratically", "varchar(13)", "ratically"),
        (
            "2001-08-22 03:04:05.321 America/Los_Angeles",
            "timestamp(3) with time zone",
            "2001-08-22 03:04:05.321 America/Los_Angeles",
        ),
        ([1, 2, None], "array(integer)", "[1, 2, null]"),
        (["a", "b"], "array(varchar)", "[a, b]"),
        ({"a": 1, "b": [1, 2]}, "map(varchar, array(integer))", "{b=[1, 2], a=1}"),  # a map's entries in any order
        ({"x": 1, "y": "a"}, "row(x integer, y varchar)", "{x=1, y=a}"),
    ],
)
def test_equal(expected: Any, type_: str, actual: str | None) -> None:
    assert same_value(expected, type_, actual)


@pytest.mark.parametrize(
    ("expected", "type_", "actual"),
    [
        (3, "integer", "3.5"),
        (3, "integer", None),
        (None, "integer", "3"),
        (True, "integer", "1"),  # a JSON boolean is not an integer
        (0.3, "double", "0.3001"),
        ("NaN", "double", "1.0"),
        ("3.50", "decimal(3,2)", "3.5"),  # the scale shows in Trino's text
        (False, "boolean", "true"),
        ("banana", "varchar(3)", "ban"),
        ("2001-08-22 03:04:05.321 America/Los_Angeles", "timestamp(3) with time zone", "2001-08-22 10:04:05.321 UTC"),
        ([1, 2], "array(integer)", "[2, 1]"),  # an array's order matters
        ({"a": 1}, "map(varchar, integer)", "{a=2}"),
    ],
)
def test_different(expected: Any, type_: str, actual: str | None) -> None:
    assert not same_value(expected, type_, actual)


def test_types_ignore_case_and_spacing_only() -> None:
    assert same_type("decimal(3,1)", "DECIMAL(3, 1)")
    assert same_type("map(varchar, integer)", "map(varchar,integer)")
    assert same_type("timestamp(3) with time zone", "timestamp(3)  with time zone")
    assert not same_type("varchar(13)", "varchar")
    assert not same_type("decimal(3,1)", "decimal")
    assert not same_type("integer", None)
