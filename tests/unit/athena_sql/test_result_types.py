"""athena_sql's result types (CheckResult.output_types): Trino's types of each result column, as the local engine
reports them. The expected types are Trino's declarations: core/trino-main/src/main/java/io/trino/operator/scalar/
StringFunctions.java at 00e6f8b957a4352553a70648bb3ff9daf5d12d5c, JoniRegexpFunctions.java at
03d8e5abc686c5c4a9f96ca14db07e2aed880174, MathFunctions.java (ceiling's ``p - s + min(s, 1)``), and decimal.md's
arithmetic (docs/src/main/sphinx/functions/decimal.md at 6f7aadf5a9115ec244aac372e07df5a481a4907f)."""

from __future__ import annotations

import pytest

from athena_sql.analyzer import check_query
from athena_sql.signatures import result_type
from athena_sql.types import TrinoType, decimal_literal, decimal_result

TABLES = {"t": {"s": "varchar", "b": "bigint", "c": "varchar(4)"}}


def output_types(sql: str) -> tuple[str | None, ...]:
    result = check_query(sql, tables=TABLES, parameters={})
    assert not result.refused, result.refusals
    return result.output_types


@pytest.mark.parametrize(
    ("expression", "trino_type"),
    [
        ("chr(65)", "varchar(1)"),
        ("lower('Hello')", "varchar(5)"),
        ("upper(CAST('x' AS char(3)))", "char(3)"),
        ("reverse('hello')", "varchar(5)"),
        ("reverse(ARRAY[1, 2])", "array(integer)"),
        ("ltrim('  hello  ')", "varchar(9)"),
        ("trim(c)", "varchar(4)"),
        ("replace('abcdefabcdef', 'cd')", "varchar(12)"),
        ("replace('aaa', 'a', 'aa')", "varchar(11)"),  # min(2147483647, x + z * (x + 1)) = 3 + 2 * 4
        ("replace(s, 'a', 'b')", "varchar"),  # an unbounded varchar stays unbounded
        ("substr('Quadratically', 5, 6)", "varchar(13)"),
        ("SUBSTRING('Quadratically' FROM 5 FOR 6)", "varchar(13)"),
        ("substr(CAST('abc def' AS char(7)), 1, 4)", "varchar(7)"),
        ("split('a.b.c', '.')", "array(varchar(5))"),
        ("OVERLAY('Txxxxas' PLACING 'hom' FROM 2 FOR 4)", "varchar(10)"),  # TestStringFunctions.testOverlay
        ("split_part('abc-@-def', '-@-', 2)", "varchar(9)"),
        ("lpad('a', 3, 'x')", "varchar"),
        ("soundex('Robert')", "varchar(4)"),
        ("regexp_replace('fun stuff.', '[a-z]')", "varchar(10)"),
        ("regexp_replace('fun stuff.', '[a-z]', '*')", "varchar(65)"),  # x + max(x * y / 2, y) * (x + 1)
        ("regexp_extract('12345', 'x')", "varchar(5)"),
        ("regexp_extract_all('12345', '')", "array(varchar(5))"),
        ("regexp_split('abc', 'a')", "array(varchar(3))"),
        ("CAST('x' AS char(3))", "char(3)"),
        ("CAST('bar' AS char)", "char(1)"),  # language/types.md: CHAR without a length is CHAR(1)
        ("to_iso8601(DATE '2001-08-22')", "varchar(16)"),  # ToIso8601.java: 1 + 6 + 15 + min(p, 1) + p [+ 6]
        ("to_iso8601(TIMESTAMP '2001-08-22 03:04:05.321')", "varchar(26)"),
        ("to_iso8601(TIMESTAMP '2001-08-22 03:04:05.321 UTC')", "varchar(32)"),
        ("ARRAY['puppies', 'kittens']", "array(varchar(7))"),
        ("case when true then null else 'foo' end", "varchar(3)"),
        ("map(ARRAY[1, 3], ARRAY['a', 'bc'])", "map(integer, varchar(2))"),
        ("map_from_entries(ARRAY[(1, 'x'), (2, 'y')])", "map(integer, varchar(1))"),
        ("ARRAY[1, 2] || ARRAY[3, BIGINT '4']", "array(bigint)"),
        ("concat(ARRAY[], ARRAY[], NULL, ARRAY[])", "array(unknown)"),  # TestArrayOperators.testArrayToArrayConcat
        ("concat(ARRAY[1], ARRAY[BIGINT '2'])", "array(bigint)"),
        ("DECIMAL '137.7' + DECIMAL '17.1'", "decimal(5,1)"),
        ("DECIMAL '1.0' / DECIMAL '3'", "decimal(2,1)"),
        ("CAST('1.0' AS DECIMAL)", "decimal(38,0)"),
        ("1 + 2.5", "decimal(12,1)"),
        ("ceiling(CAST(DECIMAL '0.01' AS DECIMAL(3,2)))", "decimal(2,0)"),
        ("round(DECIMAL '3.449', 1)", "decimal(5,3)"),
        ("sign(DECIMAL '-2.5')", "decimal(1,0)"),
        ("abs(DECIMAL '-123.45')", "decimal(5,2)"),
        ("b / 2", "bigint"),
    ],
)
def test_a_results_type_is_trinos(expression: str, trino_type: str) -> None:
    assert output_types(f"SELECT {expression} FROM t") == (trino_type,)


def test_one_type_per_result_column_in_order_none_where_not_derived() -> None:
    assert output_types("SELECT s, b, json_object() AS j FROM t") == ("varchar", "bigint", None)


def test_no_result_types_for_a_star_or_a_refused_statement() -> None:
    assert check_query("SELECT * FROM t", tables=TABLES, parameters={}).output_types == ()
    assert check_query("SELECT nvl(s, 'x') FROM t", tables=TABLES, parameters={}).refused


def test_a_decimal_literal_that_is_not_a_number_is_invalid_literal() -> None:
    (refusal,) = check_query("SELECT DECIMAL 'x'", tables=TABLES, parameters={}).refusals
    assert (refusal.error_class, refusal.message) == ("INVALID_LITERAL", "'x' is not a valid DECIMAL literal")


def test_decimal_literals_and_arithmetic() -> None:
    assert decimal_literal("1.50") == TrinoType("decimal", (3, 2))
    assert decimal_literal("-12") == TrinoType("decimal", (2, 0))
    assert decimal_literal(".5") == TrinoType("decimal", (1, 1))
    assert decimal_literal("1e0") is None
    assert decimal_result("/", (2, 1), (1, 0)) == (2, 1)
    assert decimal_result("*", (30, 0), (30, 0)) == (38, 0)
    with pytest.raises(ValueError, match="not a decimal operator"):
        decimal_result("^", (1, 0), (1, 0))


def test_a_bound_beyond_trinos_maximum_is_the_unbounded_varchar() -> None:
    long = TrinoType("varchar", (2_000_000_000,))
    spec = "varchar(min(2147483647, x + z * (x + 1)))"
    parameters = ("varchar(x)", "varchar(y)", "varchar(z)")
    assert result_type(spec, [long, TrinoType("varchar", (1,)), TrinoType("varchar", (2,))], parameters) == (
        TrinoType("varchar")
    )
    assert result_type(spec, [None, None, None], parameters) is None
