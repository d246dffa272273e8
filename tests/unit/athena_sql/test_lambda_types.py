"""athena_sql types a lambda's body: its parameters bound to the element, key and value types of the arguments it is
applied to, the call's result typed by the body (CheckResult.output_types, as the local engine reports them).

Expected types are Trino's own tests' (core/trino-main/src/test/java/io/trino/operator/scalar/):
TestMapTransformKeysFunction at trinodb/trino@029c93b693c7a3dbff995062fb9997f4acd86d77, TestZipWithFunction at
03d8e5abc686c5c4a9f96ca14db07e2aed880174, TestMapZipWithFunction at 210463ef2a191c3f8443debf6d7b114c0b0973f1,
TestArrayReduceFunction at 199fe72dd72e619bbc6ccd1a2754b72e09ecd596; and the documented signatures
(docs/src/main/sphinx/functions/array.md, map.md at 710f987d2946b93a951ec710f7856012761dca5a).
"""

from __future__ import annotations

import pytest

from athena_sql.analyzer import check_query
from athena_sql.calls import function_type, lambda_parameter_types
from athena_sql.signatures import result_type
from athena_sql.types import TrinoType, parse_type


def output_type(expression: str) -> str | None:
    result = check_query(f"SELECT {expression}", tables={}, parameters={})
    assert not result.refused, result.refusals
    (only,) = result.output_types
    return only


def of(text: str) -> TrinoType:
    kind = parse_type(text)
    assert kind is not None, text
    return kind


@pytest.mark.parametrize(
    ("expression", "trino_type"),
    [
        # TestMapTransformKeysFunction.testBasic / testTypeCombinations / testEmpty
        ("transform_keys(map(ARRAY [1, 2, 3, 4], ARRAY [10, 20, 30, 40]), (k, v) -> k + v)", "map(integer, integer)"),
        (
            "transform_keys(map(ARRAY ['a', 'b'], ARRAY [1, 2]), (k, v) -> k || CAST(v as VARCHAR))",
            "map(varchar, integer)",
        ),
        (
            (
                "transform_keys(map(ARRAY[1, 2, 3], ARRAY [1.0E0, 1.4E0, 1.7E0]),"
                " (k, v) -> map(ARRAY[1, 2, 3], ARRAY['one', 'two', 'three'])[k])"
            ),
            "map(varchar(5), double)",
        ),
        (
            "transform_keys(map(ARRAY ['a', 'ab', 'abc'], ARRAY [25, 26, 27]), (k, v) -> length(k) + v)",
            "map(bigint, integer)",
        ),
        ("transform_keys(map(ARRAY ['a', 'x'], ARRAY ['bc', 'yz']), (k, v) -> k || v)", "map(varchar, varchar(2))"),
        (
            (
                "transform_keys(map(ARRAY [25.5E0, 26.5E0, 27.5E0], ARRAY ['abc', 'def', 'xyz']),"
                " (k, v) -> CAST(k AS VARCHAR) || substr(v, 1, 1))"
            ),
            "map(varchar, varchar(3))",
        ),
        (
            (
                "transform_keys(map(ARRAY [ARRAY [1, 2], ARRAY [3, 4]], ARRAY [25, 26]),"
                " (k, v) -> reduce(k, 0, (s, x) -> s + x, s -> s) + v)"
            ),
            "map(integer, integer)",
        ),
        ("transform_keys(map(ARRAY[], ARRAY[]), (k, v) -> 'key')", "map(varchar(3), unknown)"),
        # transform_values(map(K,V1), function(K,V1,V2)) -> map(K,V2) (map.md)
        (
            "transform_values(MAP(ARRAY ['a', 'b'], ARRAY [1, 2]), (k, v) -> k || CAST(v as VARCHAR))",
            "map(varchar(1), varchar)",
        ),
        ("transform_values(MAP(ARRAY [1, 2], ARRAY [1.5, 2.5]), (k, v) -> v * 2)", "map(integer, decimal(12,1))"),
        # TestZipWithFunction
        ("zip_with(ARRAY[1, 2], ARRAY['a', 'b'], (x, y) -> (y, x))", "array(row(varchar(1), integer))"),
        ("zip_with(ARRAY[1], ARRAY['a', 'bc'], (x, y) -> (y, x))", "array(row(varchar(2), integer))"),
        ("zip_with(ARRAY[1, 1], ARRAY[1, 2], (x, y) -> x + y)", "array(integer)"),
        ("zip_with(ARRAY['a', 'b'], ARRAY[1, 3], (x, y) -> NULL)", "array(unknown)"),
        ("zip_with(ARRAY['a'], ARRAY['d', null, 'f'], (x, y) -> coalesce(x, y))", "array(varchar(1))"),
        # TestMapZipWithFunction: K the keys' type, V3 the body's
        (
            "map_zip_with(map(ARRAY [1, 2, 3], ARRAY [10, 20, 30]), map(ARRAY [1, 2, 3], ARRAY [1, 4, 9]), (k, v1, v2) -> k + v1 + v2)",
            "map(integer, integer)",
        ),
        (
            "map_zip_with(map(ARRAY ['a', 'b'], ARRAY [1, 2]), map(ARRAY ['c', 'd'], ARRAY [30, 40]), (k, v1, v2) -> v1)",
            "map(varchar(1), integer)",
        ),
        (
            (
                "map_zip_with(map(ARRAY ['s0', 's1'], ARRAY [25, 26]), map(ARRAY ['s0', 's1'], ARRAY [1, 2]),"
                " (k, v1, v2) -> k || ':' || CAST(v1/v2 AS VARCHAR))"
            ),
            "map(varchar(2), varchar)",
        ),
        # transform(array(T), function(T,U)) -> array(U) (array.md)
        ("transform(ARRAY[5, 6], x -> x + 1.5)", "array(decimal(12,1))"),  # decimal.md: integer is decimal(10,0)
        ("transform(ARRAY['ab', 'c'], x -> upper(x))", "array(varchar(2))"),
        # TestArrayReduceFunction: the output function sees the state; a row state's fields by name or position
        ("reduce(ARRAY [5, 20, 50], CAST (0 AS BIGINT), (s, x) -> s + x, s -> s)", "bigint"),
        ("reduce(ARRAY [5, 6, 10, 20], 0.0E0, (s, x) -> s + x, s -> s)", "double"),
        ("reduce(ARRAY [123456789012345, NULL, 54321], 0, (s, x) -> s + coalesce(x, 0), s -> s)", "bigint"),
        (
            (
                "reduce(ARRAY [5, 20, 50], CAST(ROW(0, 0) AS ROW(sum BIGINT, count INTEGER)),"
                " (s, x) -> CAST(ROW(x + s[1], s[2] + 1) AS ROW(sum BIGINT, count INTEGER)), s -> s[1] / s[2])"
            ),
            "bigint",
        ),
        (
            (
                "reduce(ARRAY[5, 6, 10, 20], CAST(ROW(0.0, 0) AS ROW(sum DOUBLE, count INTEGER)),"
                " (s, x) -> CAST(ROW(x + s.sum, s.count + 1) AS ROW(sum DOUBLE, count INTEGER)), s -> s.sum / s.count)"
            ),
            "double",
        ),
        ("reduce(ARRAY[ARRAY[1, 2], ARRAY[3, 4]], ARRAY[0], (s, x) -> concat(s, x), s -> s)", "array(integer)"),
    ],
)
def test_a_lambda_calls_type_is_trinos(expression: str, trino_type: str) -> None:
    assert output_type(expression) == trino_type


def test_a_lambdas_parameters_are_bound_to_the_element_key_and_value_types() -> None:
    # GIVEN the argument types before each lambda
    integers, letters = of("array(integer)"), of("array(varchar(1))")
    short, wide = of("map(varchar(1), integer)"), of("map(varchar(2), double)")
    # THEN each parameter has the type Trino binds to its type variable
    assert lambda_parameter_types("zip_with", 2, [integers, letters]) == [of("integer"), of("varchar(1)")]
    assert lambda_parameter_types("transform_keys", 1, [short]) == [of("varchar(1)"), of("integer")]
    # map_zip_with's K: the common super type of both maps' keys
    assert lambda_parameter_types("map_zip_with", 2, [short, wide]) == [of("varchar(2)"), of("integer"), of("double")]
    assert lambda_parameter_types("transform", 1, [None]) == [None, None]


def test_reduces_output_function_sees_the_state_its_input_function_returns() -> None:
    integers = of("array(integer)")
    assert lambda_parameter_types("reduce", 2, [integers, of("integer")]) == [of("integer"), of("integer")]
    merged = function_type([of("integer"), of("integer")], of("bigint"))
    assert lambda_parameter_types("reduce", 3, [integers, of("integer"), merged]) == [of("bigint")]
    # a state the input function's result cannot hold (TestArrayReduceFunction.testCoercion: FUNCTION_NOT_FOUND in
    # Trino): not derived
    narrowed = function_type([of("integer"), of("integer")], of("tinyint"))
    assert lambda_parameter_types("reduce", 3, [integers, of("integer"), narrowed]) == [None]


def test_a_lambda_whose_body_or_parameters_are_not_known_has_no_type() -> None:
    assert function_type([of("integer")], None) is None
    assert function_type([None], of("integer")) is None
    assert str(function_type([of("integer")], of("varchar(1)"))) == "function(integer, varchar(1))"
    # a column of a table whose columns are not known: its elements' type is not known, nor the body's
    assert check_query("SELECT transform(t.a, x -> x * 2) FROM t", tables={}, parameters={}).output_types == (None,)
    assert result_type("array(return($2))", [of("array(integer)"), None]) is None


def test_result_terms_take_parts_of_the_arguments_types() -> None:
    body = function_type([of("varchar(1)"), of("integer"), of("bigint")], of("double"))
    arguments = [of("map(varchar(1), integer)"), of("map(varchar(1), bigint)"), body]
    assert result_type("map(parameter($3), return($3))", arguments) == of("map(varchar(1), double)")
    assert result_type("map(key($1), elem($2))", arguments) == of("map(varchar(1), bigint)")
    assert result_type("key($3)", arguments) is None  # a lambda has no key


def test_a_lambda_function_applied_to_a_value_of_another_type_is_refused() -> None:
    # transform(array(T), function(T,U)): an integer is no array (FunctionResolver: "Unexpected parameters")
    result = check_query("SELECT transform(5, x -> x + 1)", tables={}, parameters={})
    (refusal,) = result.refusals
    assert refusal.error_class == "FUNCTION_NOT_FOUND"
    assert refusal.message.startswith("Unexpected parameters (integer, ?) for function transform. Expected: transform(")
