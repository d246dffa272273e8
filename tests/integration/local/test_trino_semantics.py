"""The local engine answers as Trino (Athena engine v3) answers, or refuses in one line: each expected value and type
comes from Trino's docs or Trino's own tests (file and commit in each test's docstring), never from DuckDB.

Every query runs on :class:`DuckDBQueryEngine` (the engine of ``run``, ``make demo``, chaos and capacity) over a
small Parquet table written here: ``t(ts timestamp, i integer, b bigint, d double, p decimal(10,2), s varchar)``.
"""

from __future__ import annotations

import uuid
from typing import Any

import duckdb
import pytest

from local.emulators.duckdb_engine import DuckDBQueryEngine


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> DuckDBQueryEngine:
    root = tmp_path_factory.mktemp("trino-semantics")
    (root / "data" / "t").mkdir(parents=True)
    with duckdb.connect() as con:
        con.execute(
            "COPY (SELECT TIMESTAMP '2020-01-01 10:00:00' AS ts, 17::INTEGER AS i, 37::BIGINT AS b, 2.5::DOUBLE AS d,"
            " 1.50::DECIMAL(10,2) AS p, 'banana' AS s)"
            f" TO '{root / 'data' / 't' / 'part.parquet'}' (FORMAT parquet)"
        )
    with DuckDBQueryEngine(data_dir=root / "data", state_dir=root / "state") as instance:
        yield instance


def answer(engine: DuckDBQueryEngine, expression: str) -> tuple[Any, str]:
    """(the value Athena would print, converted as the job converts it; its Trino type) of one expression over the
    one row of ``t``."""
    sql = f"SELECT {expression} AS v FROM t"
    query_id = engine.start_query(sql=sql, parameters=[], client_request_token=f"trino-{uuid.uuid4().hex}")
    execution = engine.get_query(query_id)
    assert execution.state == "SUCCEEDED", execution.error
    result = engine.get_results(query_id)
    return result.rows[0]["v"], engine.column_types(query_id)[0]


def failure(engine: DuckDBQueryEngine, expression: str, where: str = "true") -> str:
    """The one-line error message of a query over ``t`` that must fail (``CODE: message``), without DuckDB's words."""
    sql = f"SELECT {expression} AS v FROM t WHERE {where}"
    query_id = engine.start_query(sql=sql, parameters=[], client_request_token=f"trino-{uuid.uuid4().hex}")
    execution = engine.get_query(query_id)
    assert execution.state == "FAILED"
    assert execution.error is not None
    message = execution.error.error_message
    assert "\n" not in message and "DuckDB" not in message and "Error:" not in message
    return message


# --- arithmetic --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("expression", "value", "trino_type"),
    [
        ("17 / 37", 0, "integer"),
        ("37 / 17", 2, "integer"),
        ("(7 / 2) * 1000 + 1", 3001, "integer"),
        ("-7 / 2", -3, "integer"),
        ("7 / -2", -3, "integer"),
        ("BIGINT '37' / BIGINT '17'", 2, "bigint"),
        ("-7 % 2", -1, "integer"),
        ("7 % -2", 1, "integer"),
        ("INTEGER '37' % INTEGER '17'", 3, "integer"),
        ("7e0 / 2", 3.5, "double"),
        ("1e0 / 0", "Infinity", "double"),
        ("-1e0 / 0", "-Infinity", "double"),
        ("0e0 / 0", "NaN", "double"),
    ],
)
def test_integer_division_truncates_and_double_stays_ieee(
    engine: DuckDBQueryEngine, expression: str, value: Any, trino_type: str
) -> None:
    """functions/math.md at 6f7aadf5a9115ec244aac372e07df5a481a4907f: "integer division performs truncation";
    core/trino-main/src/test/java/io/trino/type/TestIntegerOperators.java (testDivide, testModulus) and
    TestBigintOperators.java at 029c93b693c7a3dbff995062fb9997f4acd86d77 (Java's / and %);
    TestDoubleOperators.java (IEEE: Infinity, NaN)."""
    assert answer(engine, expression) == (value, trino_type)


@pytest.mark.parametrize("expression", ["17 / 0", "INTEGER '17' % INTEGER '0'", "DECIMAL '1' / DECIMAL '0'"])
def test_division_by_zero_of_exact_numbers_fails(engine: DuckDBQueryEngine, expression: str) -> None:
    """TestIntegerOperators.testDivide/testModulus and TestDecimalOperators.testDivide at
    029c93b693c7a3dbff995062fb9997f4acd86d77: assertInvalidFunction(..., DIVISION_BY_ZERO)."""
    assert failure(engine, expression) == "DIVISION_BY_ZERO: Division by zero"


@pytest.mark.parametrize(
    ("expression", "value", "trino_type"),
    [
        ("DECIMAL '9' / DECIMAL '5'", "2", "decimal(1,0)"),
        ("DECIMAL '7' / DECIMAL '5'", "1", "decimal(1,0)"),
        ("DECIMAL '-9' / DECIMAL '5'", "-2", "decimal(1,0)"),
        ("DECIMAL '10' / DECIMAL '.000000001'", "10000000000.000000000", "decimal(20,9)"),
        ("DECIMAL '9' / DECIMAL '000000000000000003.0'", "3.0", "decimal(3,1)"),
        ("CAST(1000 AS DECIMAL(38,8)) / CAST(25 AS DECIMAL(38,8))", "40.00000000", "decimal(38,8)"),
        ("DECIMAL '10.0' % DECIMAL '3.000'", "1.000", "decimal(4,3)"),
        ("DECIMAL '-10' % DECIMAL '3'", "-1", "decimal(1,0)"),
        ("DECIMAL '.1' % DECIMAL '.03'", "0.01", "decimal(2,2)"),
        ("1.50 * 2", "3.00", "decimal(13,2)"),
        ("100.0 * 3 / 7", "42.9", "decimal(14,1)"),
        ("p / 3", "0.50", "decimal(10,2)"),
    ],
)
def test_decimal_arithmetic_is_exact_and_typed_by_trinos_rules(
    engine: DuckDBQueryEngine, expression: str, value: str, trino_type: str
) -> None:
    """core/trino-main/src/test/java/io/trino/type/TestDecimalOperators.java at
    029c93b693c7a3dbff995062fb9997f4acd86d77 (testDivide: rounded half up, the precision xp + ys + max(0, ys - xs);
    testModulus); docs/src/main/sphinx/functions/decimal.md at 6f7aadf5a9115ec244aac372e07df5a481a4907f (literal
    types, + - * and % result types; an integer operand is decimal(10,0))."""
    assert answer(engine, expression) == (value, trino_type)


@pytest.mark.parametrize(
    ("expression", "value", "trino_type"),
    [
        ("round(DECIMAL '3.449', 1)", "3.400", "decimal(5,3)"),
        ("round(DECIMAL '3', 1)", "3", "decimal(2,0)"),
        ("round(DECIMAL '9999.9')", "10000", "decimal(5,0)"),
        ("round(2.5e0)", 3.0, "double"),
        ("round(-2.5e0)", -3.0, "double"),
    ],
)
def test_round(engine: DuckDBQueryEngine, expression: str, value: Any, trino_type: str) -> None:
    """core/trino-main/src/test/java/io/trino/operator/scalar/TestMathFunctions.java (testRound) at
    029c93b693c7a3dbff995062fb9997f4acd86d77: round(decimal(p,s), n) is decimal(p+1,s); half away from zero."""
    assert answer(engine, expression) == (value, trino_type)


# --- casts -------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("expression", "value", "trino_type"),
    [
        ("CAST('37' AS integer)", 37, "integer"),
        ("CAST('+12' AS bigint)", 12, "bigint"),
        ("TRY_CAST('x' AS integer)", None, "integer"),
        ("TRY_CAST('2.5' AS integer)", None, "integer"),
        ("CAST('banana' AS varchar(3))", "ban", "varchar(3)"),
        ("CAST(s AS varchar(3))", "ban", "varchar(3)"),
        ("CAST(2.5e0 AS integer)", 3, "integer"),
        ("CAST(-2.5e0 AS integer)", -3, "integer"),
        ("CAST(d AS bigint)", 3, "bigint"),
        ("CAST(2.5 AS integer)", 3, "integer"),
        ("CAST(DECIMAL '-2.5' AS integer)", -3, "integer"),
    ],
)
def test_casts(engine: DuckDBQueryEngine, expression: str, value: Any, trino_type: str) -> None:
    """Trino's casts (trinodb/trino at 029c93b693c7a3dbff995062fb9997f4acd86d77): varchar -> integer is Java's
    Integer.parseInt (io/trino/type FromVarchar: "Cannot cast '%s' to INT"), TestIntegerOperators.testCastFromVarchar;
    double -> integer rounds half away from zero (TestDoubleOperators.testCastToInteger); decimal -> integer HALF_UP
    (TestDecimalCasts); varchar(n) truncates (docs/src/main/sphinx/functions/conversion.md)."""
    assert answer(engine, expression) == (value, trino_type)


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("CAST('x' AS integer)", "INVALID_CAST_ARGUMENT: Cannot cast 'x' to INT"),
        ("CAST(' 12' AS integer)", "INVALID_CAST_ARGUMENT: Cannot cast ' 12' to INT"),
        ("CAST('2.5' AS bigint)", "INVALID_CAST_ARGUMENT: Cannot cast '2.5' to BIGINT"),
    ],
)
def test_a_failed_cast_fails_the_query_in_trinos_words(
    engine: DuckDBQueryEngine, expression: str, message: str
) -> None:
    """FromVarchar.toInteger/toBigint (trinodb/trino, "Cannot cast '%s' to INT"): INVALID_CAST_ARGUMENT."""
    assert failure(engine, expression) == message


# --- strings -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("substr('Quadratically', 5)", "ratically"),
        ("substr('Quadratically', 50)", ""),
        ("substr('Quadratically', -5)", "cally"),
        ("substr('Quadratically', -50)", ""),
        ("substr('Quadratically', 0)", ""),
        ("substr('Quadratically', 5, 6)", "ratica"),
        ("substr('Quadratically', -5, 4)", "call"),
        ("substr('Quadratically', 0, 4)", ""),
        ("substr('Quadratically', 5, 0)", ""),
        ("strpos('high', 'ig')", 2),
        ("strpos('x', '')", 1),
        ("length('Quadratically')", 13),
        ("concat('hello', NULL)", None),
        ("regexp_replace('fun stuff.', '[a-z]', '*')", "*** *****."),
        (
            "regexp_replace('call 555.123.4444 now', '(\\d{3})\\.(\\d{3}).(\\d{4})', '($1) $2-$3')",
            "call (555) 123-4444 now",
        ),
        ("regexp_replace('xxx xxx xxx', 'x', '\\x')", "xxx xxx xxx"),
        ("regexp_replace('xxx', '', 'y')", "yxyxyxy"),
        ("regexp_replace('xxx xxx xxx', 'x', '$0')", "xxx xxx xxx"),
        ("regexp_extract('Hello world bye', '\\b[a-z]([a-z]*)')", "world"),
        ("regexp_extract('Hello world bye', '\\b[a-z]([a-z]*)', 1)", "orld"),
        ("regexp_extract('abc', '[0-9]')", None),
        ("cardinality(split('a.b.c', '.'))", 3),
    ],
)
def test_string_functions(engine: DuckDBQueryEngine, expression: str, value: Any) -> None:
    """core/trino-main/src/test/java/io/trino/operator/scalar/TestStringFunctions.java at
    29e4b2ed1947cd0431248d68e2abcf0da6242bf7 (testSubstring, testStringPosition, testLength, testConcat) and
    TestRegexpFunctions.java at 105c122c0043c01a3c97ae34883d795a61c0bf34 (testRegexpReplace: Java's $1 and \\x,
    testRegexpExtract: NULL when nothing matches)."""
    assert answer(engine, expression)[0] == value


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("regexp_replace('xxx', 'x', '\\')", "INVALID_FUNCTION_ARGUMENT: "),
        ("regexp_replace('xxx', 'x', '$')", "INVALID_FUNCTION_ARGUMENT: "),
    ],
)
def test_what_strings_cannot_reproduce_is_refused(engine: DuckDBQueryEngine, expression: str, message: str) -> None:
    """TestRegexpFunctions.testRegexpReplace at 105c122c0043c01a3c97ae34883d795a61c0bf34: a trailing backslash and a
    lone '$' are INVALID_FUNCTION_ARGUMENT ('$01', named groups, split with a limit and regexp_extract of a group
    that took no part now run:
    test_trino_strings.py)."""
    assert failure(engine, expression).startswith(message)


# --- result types ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("expression", "trino_type"),
    [
        ("i", "integer"),
        ("b", "bigint"),
        ("d", "double"),
        ("p", "decimal(10,2)"),
        ("s", "varchar"),
        ("CAST(ts AS date)", "date"),
        ("ts", "timestamp(3)"),
        ("ts AT TIME ZONE 'UTC'", "timestamp(3) with time zone"),
        ("ARRAY['a', 'b']", "array(varchar(1))"),
        ("MAP(ARRAY['a'], ARRAY[b])", "map(varchar(1), bigint)"),
        ("CAST(ROW(1, 'x') AS ROW(a integer, b varchar))", "row(a integer, b varchar)"),
        ("i > 1", "boolean"),
        ("count(*)", "bigint"),
        ("sum(i)", "bigint"),
    ],
)
def test_result_types_are_trinos(engine: DuckDBQueryEngine, expression: str, trino_type: str) -> None:
    """Trino's type names (docs/src/main/sphinx/language/types.md at 6f7aadf5a9115ec244aac372e07df5a481a4907f);
    Athena's table columns read as timestamp(3); count and sum of integers are bigint (functions/aggregate.md)."""
    assert answer(engine, expression)[1] == trino_type


# --- functions: refused in one line, or run ----------------------------------------------------------------------
def test_map_agg_runs_as_trino(engine: DuckDBQueryEngine) -> None:
    """Issue 33's map_agg runs (aggregate.md at 6f7aadf5a9115ec244aac372e07df5a481a4907f): a map of the rows' pairs."""
    assert answer(engine, "map_agg(s, i)") == ("{banana=17}", "map(varchar, integer)")


@pytest.mark.parametrize("expression", ["strftime(ts, '%Y')", "epoch_ms(1)", "no_such_function(1)"])
def test_a_function_athena_does_not_have_is_function_not_found(engine: DuckDBQueryEngine, expression: str) -> None:
    """Trino's analyzer: FUNCTION_NOT_FOUND, "Function 'x' not registered" (DuckDB-only functions included)."""
    name = expression.split("(")[0]
    assert failure(engine, expression).startswith(f"FUNCTION_NOT_FOUND: line 1:8: Function '{name}' not registered")


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("element_at(ARRAY[1, 2, 3], 2)", 2),
        ("element_at(ARRAY[1, 2, 3], 5)", None),
        ("element_at(ARRAY[1, 2, 3], -1)", 3),
        ("element_at(MAP(ARRAY['a', 'b'], ARRAY[1, 2]), 'b')", 2),
        ("element_at(MAP(ARRAY['a'], ARRAY[1]), 'z')", None),
        ("cardinality(ARRAY[1, 2, 3])", 3),
        ("array_join(ARRAY['a', 'b'], '-')", "a-b"),
        ("contains(ARRAY[1, 2], 2)", True),
        ("json_extract_scalar('{\"a\": {\"b\": 7}}', '$.a.b')", "7"),
        ("json_extract_scalar('{\"a\": {\"b\": 7}}', '$.a')", None),
        ("json_extract_scalar('[1, 2]', '$[1]')", "2"),
    ],
)
def test_array_map_and_json_functions(engine: DuckDBQueryEngine, expression: str, value: Any) -> None:
    """docs/src/main/sphinx/functions/array.md, map.md, json.md at 6f7aadf5a9115ec244aac372e07df5a481a4907f:
    element_at is NULL past the end and counts from the end for a negative index; json_extract_scalar is NULL for
    an object or an array."""
    assert answer(engine, expression)[0] == value


@pytest.mark.parametrize(
    "expression", ["json_extract('[1]', '$[*]')", "CAST(1.5e0 AS json)", "sequence(1, 3)", "CAST(ROW(1) AS json)"]
)
def test_json_values_and_others_not_reproduced_are_refused(engine: DuckDBQueryEngine, expression: str) -> None:
    """A JSONPath beyond Trino's subset, doubles and rows as json, sequence: not reproduced, refused in one line."""
    assert failure(engine, expression).startswith("NOT_SUPPORTED: runs on Athena only: ")


# --- comparisons Trino refuses -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("where", "message"),
    [
        ("i = '17'", "TYPE_MISMATCH: line 1:30: Cannot apply operator: integer = varchar(2)"),
        ("'17' = i", "TYPE_MISMATCH: line 1:33: Cannot apply operator: varchar(2) = integer"),
        ("ts >= '2020-01-01 00:00:00'", "TYPE_MISMATCH: line 1:31: Cannot apply operator: timestamp(3) >= varchar(19)"),
        (
            "ts BETWEEN '2020-01-01' AND '2020-01-02'",
            "TYPE_MISMATCH: line 1:31: Cannot check if timestamp(3) is BETWEEN varchar(10) and varchar(10)",
        ),
        (
            "p IN ('1.50')",
            (
                "TYPE_MISMATCH: line 1:30: IN value and list items must be the same type or coercible to a common"
                " type. Cannot find common type between decimal(10,2) and varchar(4)"
            ),
        ),
    ],
)
def test_a_number_or_timestamp_compared_with_a_varchar_is_a_type_mismatch(
    engine: DuckDBQueryEngine, where: str, message: str
) -> None:
    """Trino has no implicit cast from varchar to a number or a timestamp (docs/src/main/sphinx/language/types.md,
    functions/conversion.md at 6f7aadf5a9115ec244aac372e07df5a481a4907f; its analyzer's "Cannot apply operator");
    issue 33's `flight = '1545'` and an uncast `:window_start` (bound as a varchar literal)."""
    assert failure(engine, "1", where).startswith(message)


def test_a_cast_literal_compares(engine: DuckDBQueryEngine) -> None:
    assert answer(engine, "count(*) FILTER (WHERE ts >= CAST('2020-01-01 00:00:00' AS timestamp) AND i = 17)") == (
        1,
        "bigint",
    )


def test_avg_of_a_decimal_is_an_exact_decimal(engine: DuckDBQueryEngine) -> None:
    """functions/aggregate.md at 6f7aadf5a9115ec244aac372e07df5a481a4907f: avg(x) -> [same as input] for decimals
    (avg of integers is double)."""
    assert answer(engine, "avg(p)") == ("1.50", "decimal(10,2)")
    assert answer(engine, "avg(i)") == (17.0, "double")


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("CAST(ts AS varchar)", "2020-01-01 10:00:00.000"),
        ("CAST(TIMESTAMP '2020-01-01 10:00:00' AS varchar)", "2020-01-01 10:00:00"),
        ("CAST(ts AT TIME ZONE 'Europe/Berlin' AS varchar)", "2020-01-01 11:00:00.000 Europe/Berlin"),
        ("CAST(DATE '2020-01-02' AS varchar)", "2020-01-02"),
        ("CAST(1.50 AS varchar)", "1.50"),
        ("CAST(INTEGER '37' AS varchar)", "37"),
        ("lpad('text', 3, 'x')", "tex"),
        ("lpad('text', 8, 'def')", "defdtext"),
        ("rpad('text', 8, 'def')", "textdefd"),
    ],
)
def test_casts_to_varchar_and_padding(engine: DuckDBQueryEngine, expression: str, value: str) -> None:
    """Trino prints a timestamp(p) with p fraction digits (a table's column is timestamp(3); TIMESTAMP '... 10:00:00'
    is timestamp(0): docs/src/main/sphinx/language/types.md at 6f7aadf5a9115ec244aac372e07df5a481a4907f), a zoned one
    with its zone's name; TestIntegerOperators.testCastToVarchar; TestStringFunctions.testLeftPad/testRightPad at
    29e4b2ed1947cd0431248d68e2abcf0da6242bf7."""
    assert answer(engine, expression)[0] == value


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("2147483647 + i", "NUMERIC_VALUE_OUT_OF_RANGE: integer addition overflow: 2147483647 + 17"),
        ("lpad('text', 8, '')", "INVALID_FUNCTION_ARGUMENT: Padding string must not be empty"),
        ("CAST(d AS varchar)", "NOT_SUPPORTED: runs on Athena only: a cast of a double to varchar"),
    ],
)
def test_overflow_padding_and_double_text(engine: DuckDBQueryEngine, expression: str, message: str) -> None:
    """TestIntegerOperators.testAdd (integer addition overflow), TestStringFunctions.testLeftPad (empty padding:
    INVALID_FUNCTION_ARGUMENT); Java's Double.toString spelling (1.0E10) is not reproduced: refused."""
    assert failure(engine, expression).startswith(message)


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("slice(ARRAY[1, 2, 3, 4], 2, 2)", "[2, 3]"),
        ("array_position(ARRAY[10, 20], 20)", 2),
        ("array_position(ARRAY[10, 20], 30)", 0),
        ("contains(ARRAY[1, NULL], 2)", None),
        ("contains(ARRAY[1, NULL], 1)", True),
        ("contains(ARRAY[1], 2)", False),
        ("split_part('a,b', ',', 2)", "b"),
        ("split_part('a,b', ',', 5)", None),
        ("ARRAY[1, 2, 3][2]", 2),
        ("MAP(ARRAY['a'], ARRAY[1])['a']", 1),
        ("cardinality(MAP(ARRAY['a', 'b'], ARRAY[1, 2]))", 2),
        ("array_sort(ARRAY[3, NULL, 1])", "[1, 3, null]"),
        ("typeof(1)", "integer"),
        ("typeof('abc')", "varchar(3)"),
        ("typeof(1.50)", "decimal(3,2)"),
        ("parse_datetime('2020-01-02 10:11', 'yyyy-MM-dd HH:mm')", "2020-01-02T10:11:00.000+00:00"),
        ("date_parse('2020-01-02 10:11', '%Y-%m-%d %H:%i')", "2020-01-02T10:11:00.000"),
    ],
)
def test_collection_and_parsing_functions(engine: DuckDBQueryEngine, expression: str, value: Any) -> None:
    """docs/src/main/sphinx/functions/array.md (slice's length, array_position's 0, contains' NULL when the array
    holds a NULL, array_sort's NULLs last), string.md (split_part past the end is NULL), map.md, datetime.md
    (parse_datetime: a timestamp with time zone in the session zone; date_parse) at
    6f7aadf5a9115ec244aac372e07df5a481a4907f; typeof names Trino's type (a literal 'abc' is varchar(3))."""
    assert answer(engine, expression)[0] == value


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("ARRAY[1, 2, 3][5]", "INVALID_FUNCTION_ARGUMENT: Array subscript must be less than or equal to array length"),
        ("MAP(ARRAY['a'], ARRAY[1])['z']", "INVALID_FUNCTION_ARGUMENT: Key not present in map: z"),
        ("element_at(ARRAY[1, 2], 0)", "INVALID_FUNCTION_ARGUMENT: SQL array indices start at 1"),
        ("split_part('a,b', ',', 0)", "INVALID_FUNCTION_ARGUMENT: Index must be greater than zero"),
        ("trim_array(ARRAY[1], 2)", "INVALID_FUNCTION_ARGUMENT: size must not exceed array cardinality 1: 2"),
        ("typeof(ARRAY[1])", "NOT_SUPPORTED: runs on Athena only: typeof"),
    ],
)
def test_collection_failures(engine: DuckDBQueryEngine, expression: str, message: str) -> None:
    """array.md and map.md at 6f7aadf5a9115ec244aac372e07df5a481a4907f: a subscript past the end or a missing key
    fails (element_at gives NULL instead); trim_array past the cardinality fails (ArrayTrimFunction)."""
    assert failure(engine, expression).startswith(message)


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("no_such_column", "COLUMN_NOT_FOUND: line 1:8: Column 'no_such_column' cannot be resolved"),
        ("CAST('x' AS date)", "INVALID_CAST_ARGUMENT: Value cannot be cast to date: x"),
        ("i + true", "TYPE_MISMATCH: line 1:10: Cannot apply operator: integer + boolean"),
        ("date_parse('x', '%Y')", 'INVALID_FUNCTION_ARGUMENT: Invalid format: "x"'),
    ],
)
def test_other_failures_are_in_trinos_words(engine: DuckDBQueryEngine, expression: str, message: str) -> None:
    """Trino's messages (its analyzer's "Column 'x' cannot be resolved", "Cannot apply operator"; DateTimeFunctions'
    "Invalid format"; the date cast's "Value cannot be cast to date"); never DuckDB's words (``failure`` checks)."""
    assert failure(engine, expression).startswith(message)


# --- syntax and operators Trino does not have ---------------------------------------------------------------------
@pytest.mark.parametrize(
    ("expression", "where", "message"),
    [
        ("ts::date", "true", "SYNTAX_ERROR: line 1:10: '::' casts are not Trino syntax; use CAST(x AS type)"),
        ("1", "s ILIKE 'b%'", "SYNTAX_ERROR: line 1:30: ILIKE is not Trino syntax"),
        ("ts + INTERVAL 1 DAY", "true", "SYNTAX_ERROR: line 1:13: INTERVAL needs a quoted value in Trino"),
        (
            "CAST(current_date - 1 AS varchar)",
            "true",
            "TYPE_MISMATCH: line 1:26: Cannot apply operator: date - integer",
        ),
        (
            "s || i",
            "true",
            "FUNCTION_NOT_FOUND: line 1:10: Unexpected parameters (varchar, integer) for function concat",
        ),
    ],
)
def test_what_trino_refuses_is_refused(engine: DuckDBQueryEngine, expression: str, where: str, message: str) -> None:
    """Trino's grammar (core/trino-parser SqlBase.g4: no ``::``, no ILIKE, an interval's quantity is a string),
    datetime.md's operators (no date - integer) and string.md's concat (varchar arguments), at
    6f7aadf5a9115ec244aac372e07df5a481a4907f; issue 33's examples."""
    assert failure(engine, expression, where).startswith(message)


@pytest.mark.parametrize(
    ("expression", "value", "trino_type"),
    [
        ("sign(-2)", -1, "integer"),
        ("sign(BIGINT '5')", 1, "bigint"),
        ("sign(-2.5e0)", -1.0, "double"),
        ("sign(DECIMAL '-2.5')", "-1", "decimal(1,0)"),
        ("floor(-1.5)", "-2", "decimal(2,0)"),
        ("ceil(DECIMAL '123.45')", "124", "decimal(4,0)"),
        ("truncate(-17.88e0)", -17.0, "double"),
        ("sqrt(-1e0)", "NaN", "double"),
        ("ln(0e0)", "-Infinity", "double"),
        ("mod(-7, 2)", -1, "integer"),
        ("abs(DECIMAL '-123.45')", "123.45", "decimal(5,2)"),
    ],
)
def test_math_functions(engine: DuckDBQueryEngine, expression: str, value: Any, trino_type: str) -> None:
    """core/trino-main/src/test/java/io/trino/operator/scalar/TestMathFunctions.java at
    029c93b693c7a3dbff995062fb9997f4acd86d77 (testSign, testFloor, testCeil, testTruncate, testSqrt, testLn,
    testMod, testAbs): the result has the argument's type; IEEE NaN and -Infinity for doubles."""
    assert answer(engine, expression) == (value, trino_type)


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("try(CAST('x' AS integer))", None),
        ("try(CAST('7' AS integer))", 7),
        ("try(1 / 0)", None),
        ("try(ARRAY[1][3])", None),
        ("coalesce(try(CAST(s AS integer)), -1)", -1),
    ],
)
def test_try_gives_null_for_the_errors_it_catches(engine: DuckDBQueryEngine, expression: str, value: Any) -> None:
    """docs/src/main/sphinx/functions/conditional.md at 6f7aadf5a9115ec244aac372e07df5a481a4907f: try() returns NULL
    for division by zero, invalid casts and out-of-range subscripts."""
    assert answer(engine, expression)[0] == value
