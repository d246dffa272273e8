"""Trino's array, map and json functions on the local engine (:mod:`local.emulators.duckdb_engine.trino_collections`,
:mod:`local.emulators.duckdb_engine.trino_json`): values as Athena prints them, from Trino's docs
(docs/src/main/sphinx/functions/array.md, map.md, json.md at 6f7aadf5a9115ec244aac372e07df5a481a4907f) and
implementations (io/trino/operator/scalar/ArrayIntersectFunction.java at 0d5f25017969d532503eabe11a73ecd237768659,
JsonFunctions.java at 89c61dec284b0659bf25bcaf51c2d76781d1e94d, io/trino/util/JsonTypeUtil.java), never DuckDB's.

The table ``t`` of :mod:`test_trino_semantics` (one row: ``s = 'banana'``, ``i = 17``) is reused.
"""

from __future__ import annotations

from typing import Any

import pytest

from local.emulators.duckdb_engine import DuckDBQueryEngine

from .test_trino_semantics import answer, engine, failure
from .test_trino_strings import unpositioned

__all__ = ["engine"]


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        # array.md: array_distinct/union/except keep the first occurrences' order (NULL once)
        ("array_distinct(ARRAY[3, 1, 3, NULL, 1, NULL])", "[3, 1, null]"),
        ("array_union(ARRAY[1, 2, 2], ARRAY[3, 1])", "[1, 2, 3]"),
        ("array_except(ARRAY[1, 3, 3, 2, 1], ARRAY[2])", "[1, 3]"),
        # ArrayIntersectFunction: the distinct elements of the longer array that the other holds, in its order
        ("array_intersect(ARRAY[1, 5, 3, 5], ARRAY[5, 1, 7, 8, 9])", "[5, 1]"),
        ("array_intersect(ARRAY[5, 1, 5, 3], ARRAY[3, 5])", "[5, 3]"),
        # array.md, arrays_overlap: NULL when no non-null element is common and either array holds a NULL
        ("arrays_overlap(ARRAY[1, NULL], ARRAY[2])", None),
        ("arrays_overlap(ARRAY[1, NULL], ARRAY[1])", True),
        ("arrays_overlap(ARRAY[1], ARRAY[2])", False),
        # array.md, any_match/all_match/none_match: three-valued; an empty array matches all
        ("any_match(ARRAY[NULL, false], x -> x)", None),
        ("any_match(ARRAY[NULL, true], x -> x)", True),
        ("all_match(ARRAY[true, NULL], x -> x)", None),
        ("all_match(ARRAY[], x -> false)", True),
        ("none_match(ARRAY[false, NULL], x -> x)", None),
        ("none_match(ARRAY[1, 2], x -> x > i)", True),  # a column inside the lambda
        ("transform(ARRAY[1, 2], x -> x + i)", "[18, 19]"),
        ("zip_with(ARRAY[1, 2, 3], ARRAY['a'], (x, y) -> y)", "[a, null, null]"),
        ("reduce(ARRAY[5, 20, 50], 0, (s, x) -> s + x, s -> s * 2)", 150),
        ("trim_array(ARRAY[1, 2, 3], 0)", "[1, 2, 3]"),
        ("array_sort(ARRAY[3, 1, 2], (x, y) -> IF(x < y, 1, IF(x = y, 0, -1)))", "[3, 2, 1]"),
        ("ARRAY[1, 2] || 3", "[1, 2, 3]"),
        # comparison.md / ArrayEqualOperator: a NULL element makes = indeterminate unless two elements differ
        ("ARRAY[1, NULL] = ARRAY[1, NULL]", None),
        ("ARRAY[1, NULL] = ARRAY[2, NULL]", False),
        ("ARRAY[1, 2] = ARRAY[1, 2]", True),
        ("ARRAY[1, 2] <> ARRAY[1]", True),
        # ArrayRemoveFunction (029c93b693c7a3dbff995062fb9997f4acd86d77): NULL elements stay, a NULL value is NULL
        ("array_remove(ARRAY[1, NULL, 2, 1], 1)", "[null, 2]"),
        ("array_remove(ARRAY[1, 2], NULL)", None),
        ("array_max(ARRAY[1, NULL, 3])", None),
        ("array_min(ARRAY[2, 1, 3])", 1),
        # RepeatFunction: Trino's repeat is the array function
        ("repeat('a', 2)", "[a, a]"),
        ("repeat(1, 0)", "[]"),
        ("reverse(ARRAY[1, 2, 3])", "[3, 2, 1]"),
        # array.md, array_position(x, element, instance): the instance-th occurrence, from the end when negative
        ("array_position(ARRAY[1, 2, 1, 1], 1, 2)", 3),
        ("array_position(ARRAY[1, 2, 1, 1], 1, -1)", 4),
        ("array_position(ARRAY[1, 2, 1, 1], 1, -4)", 0),
        ("array_position(ARRAY[1, 2], 2, 2)", 0),
        ("ARRAY[10, 20, 30][i - 15]", 20),
        # ArraySliceFunction: a negative start counts from the end; before the first element is empty
        ("slice(ARRAY[1, 2, 3, 4], -2, 5)", "[3, 4]"),
        ("slice(ARRAY[1, 2, 3, 4], -5, 2)", "[]"),
        ("slice(ARRAY[1, 2, 3, 4], 2, 2)", "[2, 3]"),
        ("reverse('abc')", "cba"),
        # map.md
        ("map_filter(MAP(ARRAY['a', 'b'], ARRAY[1, 2]), (k, v) -> v > 1)", "{b=2}"),
        ("transform_values(MAP(ARRAY['a'], ARRAY[1]), (k, v) -> v + i)", "{a=18}"),
        (
            "element_at(map_zip_with(MAP(ARRAY[1], ARRAY[10]), MAP(ARRAY[2], ARRAY[20]), (k, a, b) -> coalesce(a, b)), 2)",
            20,
        ),
        ("multimap_from_entries(ARRAY[ROW(1, 'x'), ROW(1, 'y')])", "{1=[x, y]}"),
        ("split_to_map('a=1,b=2,', ',', '=')", "{a=1, b=2}"),
        ("split_to_multimap('a=1,a=2', ',', '=')", "{a=[1, 2]}"),
        ("map_values(MAP(ARRAY['k'], ARRAY[7]))", "[7]"),
        ("map_concat(MAP(ARRAY[1, 2], ARRAY['a', 'b']), MAP(ARRAY[2], ARRAY['c']))", "{1=a, 2=c}"),
        # aggregate.md over the one row of t
        ("multimap_agg(s, i)", "{banana=[17]}"),
        ("histogram(s)", "{banana=1}"),
        # json.md and JsonTypeUtil: canonical text (keys sorted, Java doubles, compact)
        ('json_parse(\'{"b": 1, "a": [1.50, 1e10, -0]}\')', '{"a":[1.5,1.0E10,0],"b":1}'),
        ('json_format(JSON \'{"b": "x\\ty"}\')', '{"b":"x\\ty"}'),
        ("CAST(MAP(ARRAY['b', 'a'], ARRAY[1, 2]) AS JSON)", '{"a":2,"b":1}'),
        ("CAST(1.50 AS JSON)", "1.50"),
        ("CAST(s AS JSON)", '"banana"'),
        # JsonFunctions: json_array_get keeps an object's own key order; a string comes back unquoted
        ('json_array_get(\'[{"b": 1, "a": 2}]\', 0)', '{"b":1,"a":2}'),
        ("json_array_get('[\"x\", null]', -1)", None),
        ("json_array_length('not json')", None),
        ("json_array_contains('[\"5\"]', '5')", True),
        ('CAST(JSON \'{"b": 1, "a": null}\' AS MAP(VARCHAR, INTEGER))', "{a=null, b=1}"),
        ("CAST(JSON '[true, false]' AS ARRAY(BIGINT))", "[1, 0]"),
        # json.md, json_array (ABSENT ON NULL by default) and json_object (NULL ON NULL by default): varchars
        ("json_array(true, null, 1)", "[true,1]"),
        ("json_object('x' : null, 'y' : 1)", '{"x":null,"y":1}'),
        ("json_object('x' : null, 'y' : 1 ABSENT ON NULL)", '{"y":1}'),
        # JsonToRowCast: an object by field name in any case (missing fields NULL), an array by position
        ("CAST(JSON '{\"A\": 1}' AS ROW(a INTEGER, b VARCHAR))", "{a=1, b=null}"),
        ("CAST(JSON '[1, \"x\"]' AS ROW(a INTEGER, b VARCHAR))", "{a=1, b=x}"),
        # JsonExtract: Trino's JSONPath subset; the first field of a name; invalid JSON or a missing step is NULL
        ('json_extract(\'{"a": {"b": [1, 2.50, {"z": 1, "y": 2}]}}\', \'$.a.b[2]\')', '{"z":1,"y":2}'),
        ("json_extract('{\"a\": [1, 2.50]}', '$.a')", "[1,2.5]"),
        ("json_extract('[10, 20]', '$[1]')", "20"),
        ("json_extract('{\"a b\": true}', '$[\"a b\"]')", "true"),
        ("json_extract('{\"a\": 1}', '$.b')", None),
        ("json_extract_scalar('{\"a\": 1.50}', '$.a')", "1.50"),
        ('json_extract_scalar(\'{"a": "x\\"y"}\', \'$.a\')', 'x"y'),
        ("json_extract_scalar('not json', '$.a')", None),
        ('json_size(\'{"x": {"a": 1, "b": 2}}\', \'$.x\')', 2),
        ("json_size('{\"x\": 1}', '$.x')", 0),
    ],
)
def test_values(engine: DuckDBQueryEngine, expression: str, value: Any) -> None:
    assert answer(engine, expression)[0] == value


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        (
            "transform_keys(MAP(ARRAY[1, 2], ARRAY['a', 'b']), (k, v) -> 0)",
            "INVALID_FUNCTION_ARGUMENT: Duplicate map keys (0) are not allowed",
        ),
        (
            "transform_keys(MAP(ARRAY[1], ARRAY['a']), (k, v) -> NULL)",
            "INVALID_FUNCTION_ARGUMENT: map key cannot be null",
        ),
        ("trim_array(ARRAY[1], -1)", "INVALID_FUNCTION_ARGUMENT: size must not be negative"),
        ("transform(ARRAY[1], (x, y) -> x)", "INVALID_PARAMETER_USAGE: Expected a lambda that takes 1 argument(s)"),
        ("array_sort(ARRAY[1, 2], (x, y) -> 2)", "NOT_SUPPORTED: runs on Athena only: array_sort with a comparator"),
        # ArraySubscriptOperator (any index expression)
        ("ARRAY[1, 2, 3][i - 17]", "INVALID_FUNCTION_ARGUMENT: SQL array indices start at 1"),
        ("ARRAY[1, 2, 3][-1]", "INVALID_FUNCTION_ARGUMENT: Array subscript is negative: -1"),
        (
            "ARRAY[1, 2, 3][i]",
            "INVALID_FUNCTION_ARGUMENT: Array subscript must be less than or equal to array length: 17 > 3",
        ),
        ("slice(ARRAY[1, 2], 0, 1)", "INVALID_FUNCTION_ARGUMENT: SQL array indices start at 1"),
        ("slice(ARRAY[1, 2], 1, -1)", "INVALID_FUNCTION_ARGUMENT: length must be greater than or equal to 0"),
        ("MAP(ARRAY[1, 1], ARRAY[2, 3])", "INVALID_FUNCTION_ARGUMENT: Duplicate map keys are not allowed"),
        ("MAP(ARRAY[1], ARRAY[2, 3])", "INVALID_FUNCTION_ARGUMENT: Key and value arrays must be the same length"),
        ("json_array(s)", "NOT_SUPPORTED: runs on Athena only: json_array of values that are not literals"),
        ("json_value('{\"a\": 1}', 'lax $.a')", "NOT_SUPPORTED: runs on Athena only: json_value and json_query"),
        ("json_query('{\"a\": 1}', 'lax $.a')", "NOT_SUPPORTED: runs on Athena only: json_value and json_query"),
        ("array_join(ARRAY[1e10], ',')", "NOT_SUPPORTED: runs on Athena only: array_join of doubles"),
        ("array_position(ARRAY[1], 1, 0)", "INVALID_FUNCTION_ARGUMENT: array_position cannot take a 0-valued instance"),
        ("repeat(1, 10001)", "INVALID_FUNCTION_ARGUMENT: count argument of repeat function must be less than or equal"),
        ("split_to_map('a=1,a=2', ',', '=')", "INVALID_FUNCTION_ARGUMENT: Duplicate keys (a) are not allowed"),
        ("split_to_map('a', ',', '=')", "INVALID_FUNCTION_ARGUMENT: Key-value delimiter must appear exactly once"),
        ("CAST(JSON '[1]' AS ROW(a INTEGER, b VARCHAR))", "INVALID_CAST_ARGUMENT: Cannot cast to row"),
        ("shuffle(ARRAY[1, 2])", "NOT_SUPPORTED: runs on Athena only: shuffle"),
        ("json_parse('{')", "INVALID_FUNCTION_ARGUMENT: Cannot convert value to JSON: '{'"),
        ("is_json_scalar('[1')", "INVALID_FUNCTION_ARGUMENT: Invalid JSON value: [1"),
        ("CAST(JSON '[1, 2]' AS VARCHAR)", "INVALID_CAST_ARGUMENT: Cannot cast '[1,2]' to VARCHAR"),
        ("CAST(JSON '\"x\"' AS INTEGER)", "INVALID_CAST_ARGUMENT: Cannot cast 'x' to INTEGER"),
        ("CAST(ARRAY[1.5e0] AS JSON)", "NOT_SUPPORTED: runs on Athena only: a cast to json of an array or map"),
        ("map_agg(s, i) OVER ()", "NOT_SUPPORTED: runs on Athena only: map_agg as a window function"),
        (
            "map_agg(s, i) FILTER (WHERE i > 0)",
            "NOT_SUPPORTED: runs on Athena only: map_agg as a window function or with FILTER",
        ),
    ],
)
def test_failures(engine: DuckDBQueryEngine, expression: str, message: str) -> None:
    """Trino's failures in its words (ArrayTrimFunction, MapTransformKeysFunction, JsonFunctions, JsonUtil), or a
    one-line refusal for what the local engine does not reproduce (a comparator Trino's TimSort may or may not catch,
    a random permutation, Java's doubles inside json)."""
    assert unpositioned(failure(engine, expression)).startswith(message)


def test_nested_timestamps_print_with_their_types_precision() -> None:
    """A ``timestamp(0)`` inside an array prints without a fraction, as at the top level (Trino's
    TestArrayOperators: ARRAY[TIMESTAMP '1970-01-01 00:00:01'] is array(timestamp(0)))."""
    import datetime

    import duckdb

    from local.emulators.duckdb_engine.values import _render

    moment = datetime.datetime(1970, 1, 1, 0, 0, 1)
    duck_type = duckdb.sqltype("TIMESTAMP[]")
    _, rows = _render(["v"], [duck_type], [([moment],)], (), ("array(timestamp(0))",))
    assert rows == [["[1970-01-01 00:00:01]"]]
    _, rows = _render(["v"], [duck_type], [([moment],)])
    assert rows == [["[1970-01-01 00:00:01.000]"]]


@pytest.mark.parametrize(
    ("expression", "value", "trino_type"),
    [
        # TestArrayOperators.testConstructor (trinodb/trino@004dbce962cf23d945e002ca0bb22ff4aa6a4a0b): the check types
        # the array, and the values print by its type
        ("ARRAY[TIMESTAMP '1970-01-01 00:00:01']", "[1970-01-01 00:00:01]", "array(timestamp(0))"),
        # a lambda's body typed by the check (TestMapTransformKeysFunction at 029c93b693c7a3dbff995062fb9997f4acd86d77,
        # TestZipWithFunction at 03d8e5abc686c5c4a9f96ca14db07e2aed880174)
        (
            "transform_keys(MAP(ARRAY[1, 2], ARRAY['a', 'b']), (k, v) -> k + 1)",
            "{2=a, 3=b}",
            "map(integer, varchar(1))",
        ),
        ("zip_with(ARRAY['a'], ARRAY['d', 'f'], (x, y) -> coalesce(x, y))", "[a, f]", "array(varchar(1))"),
        ("transform(ARRAY['ab', 'c'], x -> upper(x))", "[AB, C]", "array(varchar(2))"),
    ],
)
def test_the_engine_reports_and_prints_the_checks_type(
    engine: DuckDBQueryEngine, expression: str, value: str, trino_type: str
) -> None:
    assert answer(engine, expression) == (value, trino_type)
