"""The local engine's Trino rules without DuckDB: types of literals and decimal arithmetic, DuckDB type names as
Trino's, Joda patterns, and the refusals ``prepare_query`` raises before anything runs (no I/O)."""

from __future__ import annotations

import pytest
from sqlglot import exp

from athena_sql.types import decimal_result
from local.emulators.duckdb_engine import QueryRejected, prepare_query
from local.emulators.duckdb_engine.trino_functions import joda_to_strftime
from local.emulators.duckdb_engine.trino_types import of_literal, trino_type_text

SCHEMA = {"t": {"i": "integer", "d": "double", "p": "decimal(10,2)", "ts": "timestamp(3)", "s": "varchar"}}


@pytest.mark.parametrize(
    ("literal", "name", "precision", "scale"),
    [
        (exp.Literal.number("42"), "integer", None, None),
        (exp.Literal.number("12300000000"), "bigint", None, None),
        (exp.Literal.number("1.50"), "decimal", 3, 2),
        (exp.Literal.number("0000012345.1234500000"), "decimal", 20, 10),
        (exp.Literal.number("1e0"), "double", None, None),
        (exp.Literal.string("abc"), "varchar", 3, None),
    ],
)
def test_literal_types(literal: exp.Literal, name: str, precision: int | None, scale: int | None) -> None:
    """docs/src/main/sphinx/functions/decimal.md at 6f7aadf5a9115ec244aac372e07df5a481a4907f ("Decimal literals":
    DECIMAL '0000012345.1234500000' is DECIMAL(20, 10)); an integer literal beyond 2^31-1 is bigint."""
    kind = of_literal(literal)
    assert (kind.name, kind.precision, kind.scale) == (name, precision, scale)


@pytest.mark.parametrize(
    ("operator", "left", "right", "result"),
    [
        ("+", (4, 1), (10, 0), (12, 1)),
        ("*", (4, 1), (19, 0), (23, 1)),
        ("/", (1, 0), (1, 0), (1, 0)),  # DECIMAL '9' / DECIMAL '5'
        ("/", (2, 0), (9, 9), (20, 9)),  # DECIMAL '10' / DECIMAL '.000000001'
        ("/", (23, 1), (25, 3), (28, 3)),  # '9999999999999999999999.9' / '1111111111111111111111.100'
        ("/", (38, 8), (38, 8), (38, 8)),
        ("%", (3, 1), (4, 3), (4, 3)),  # DECIMAL '10.0' % DECIMAL '3.000'
    ],
)
def test_decimal_result_types(
    operator: str, left: tuple[int, int], right: tuple[int, int], result: tuple[int, int]
) -> None:
    """decimal.md at 6f7aadf5a9115ec244aac372e07df5a481a4907f (+, *, %) and
    core/trino-main/src/test/java/io/trino/type/TestDecimalOperators.java at
    029c93b693c7a3dbff995062fb9997f4acd86d77 (testDivide's result types, the precision capped at 38)."""
    assert decimal_result(operator, left, right) == result


@pytest.mark.parametrize(
    ("duck", "trino"),
    [
        ("DECIMAL(23,1)", "decimal(23,1)"),
        ("VARCHAR[]", "array(varchar)"),
        ("MAP(VARCHAR, BIGINT)", "map(varchar, bigint)"),
        ("STRUCT(a INTEGER, b VARCHAR[])", "row(a integer, b array(varchar))"),
        ("TIMESTAMP", "timestamp(3)"),
        ("TIMESTAMP WITH TIME ZONE", "timestamp(3) with time zone"),
        ("HUGEINT", "bigint"),
    ],
)
def test_duckdb_types_are_named_as_trino_names_them(duck: str, trino: str) -> None:
    """Trino's type names (docs/src/main/sphinx/language/types.md at 6f7aadf5a9115ec244aac372e07df5a481a4907f)."""
    assert trino_type_text(duck) == trino


@pytest.mark.parametrize(
    ("joda", "strftime"),
    [
        ("yyyy-MM-dd HH:mm:ss", "%Y-%m-%d %H:%M:%S"),
        ("yyyy-MM-dd'T'HH:mm:ss.SSS", "%Y-%m-%dT%H:%M:%S.%g"),
        ("EEE, d MMM yyyy h:mm a", "%a, %-d %b %Y %-I:%M %p"),
        ("'100%' yy", "100%% %y"),
        ("''", "'"),
    ],
)
def test_joda_patterns(joda: str, strftime: str) -> None:
    """format_datetime's Joda-Time patterns (functions/datetime.md, "Java date functions", at
    02d8a7108d6894aa8b07ca42f161e5a3d992a16b): quoted text is literal."""
    assert joda_to_strftime(joda) == strftime


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("SELECT shuffle(ARRAY[i]) FROM t", "NOT_SUPPORTED: runs on Athena only: shuffle (a random permutation)"),
        ("SELECT strftime(ts, '%Y') FROM t", "FUNCTION_NOT_FOUND: Function 'strftime' not registered"),
        ("SELECT i FROM t WHERE i = '1545'", "TYPE_MISMATCH: Cannot apply operator: integer = varchar(4)"),
        ("SELECT ts AT TIME ZONE s FROM t", "NOT_SUPPORTED: runs on Athena only: AT TIME ZONE with a zone"),
        ("SELECT format_datetime(ts, 'Q') FROM t", "NOT_SUPPORTED: runs on Athena only: format_datetime"),
    ],
)
def test_refused_before_anything_runs(sql: str, message: str) -> None:
    with pytest.raises(QueryRejected) as caught:
        prepare_query(sql, [], SCHEMA)
    assert str(caught.value).startswith(message)


@pytest.mark.parametrize(
    ("sql", "duckdb_sql"),
    [
        ("SELECT i / 2 AS v FROM t", "SELECT i // 2 AS v FROM t"),
        ("SELECT d / 2 AS v FROM t", "SELECT d / 2 AS v FROM t"),
        ("SELECT -7 % 2 AS v", "SELECT -7 % 2 AS v"),
    ],
)
def test_division_is_generated_by_the_operands_types(sql: str, duckdb_sql: str) -> None:
    """functions/math.md at 6f7aadf5a9115ec244aac372e07df5a481a4907f: integer division truncates (DuckDB's //)."""
    assert prepare_query(sql, [], SCHEMA).duckdb_sql == duckdb_sql
