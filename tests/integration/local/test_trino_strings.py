"""The local engine's string, regexp and conversion functions answer as Trino's (Athena engine v3), or fail as
Trino fails, or are refused in one line. Each expectation comes from Trino's docs or its implementation and tests
(file and commit in each test's docstring), never from DuckDB.

Every query runs on :class:`DuckDBQueryEngine` over a one-row Parquet table ``t(s varchar, i integer)``.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

import duckdb
import pytest

from local.emulators.duckdb_engine import DuckDBQueryEngine
from local.emulators.duckdb_engine.trino_format import java_format, unsupported


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> DuckDBQueryEngine:
    root = tmp_path_factory.mktemp("trino-strings")
    (root / "data" / "t").mkdir(parents=True)
    with duckdb.connect() as con:
        con.execute(
            f"COPY (SELECT 'new york' AS s, 42::INTEGER AS i)"
            f" TO '{root / 'data' / 't' / 'part.parquet'}' (FORMAT parquet)"
        )
    with DuckDBQueryEngine(data_dir=root / "data", state_dir=root / "state") as instance:
        yield instance


def _run(engine: DuckDBQueryEngine, expression: str) -> tuple[Any, Any]:
    sql = f"SELECT {expression} AS v FROM t"
    query_id = engine.start_query(sql=sql, parameters=[], client_request_token=f"trino-{uuid.uuid4().hex}")
    return query_id, engine.get_query(query_id)


def answer(engine: DuckDBQueryEngine, expression: str) -> tuple[Any, str]:
    """(the value as the job converts it, its Trino type) of `expression` over the one row of ``t``."""
    query_id, execution = _run(engine, expression)
    assert execution.state == "SUCCEEDED", execution.error
    return engine.get_results(query_id).rows[0]["v"], engine.column_types(query_id)[0]


def unpositioned(message: str) -> str:
    """``CODE: message`` without the ``line L:C:`` the SQL check adds to an analysis error (the run refuses in the
    check's words, with the construct's position): these tests compare the wording."""
    return re.sub(r"^([A-Z_]+): line \d+:\d+: ", r"\1: ", message)


def failure(engine: DuckDBQueryEngine, expression: str) -> str:
    """The one-line message of a query that must fail, without DuckDB's words."""
    _, execution = _run(engine, expression)
    assert execution.state == "FAILED"
    message = execution.error.error_message
    assert "\n" not in message and "DuckDB" not in message and "Error:" not in message and "UDF" not in message
    return unpositioned(str(message))


@pytest.mark.parametrize(
    ("expression", "value", "trino_type"),
    [
        ("codepoint('x')", 120, "integer"),
        ("hamming_distance('like', 'hate')", 3, "bigint"),
        ("hamming_distance('', '')", 0, "bigint"),
        ("hamming_distance('hello', NULL)", None, "bigint"),
        ("luhn_check('79927398713')", True, "boolean"),
        ("luhn_check('79927398714')", False, "boolean"),
        ("luhn_check('')", False, "boolean"),
        ("split('a.b.c', '.', 2)", "[a, b.c]", "array(varchar(5))"),
        ("split('a.b.c.', '.', 3)", "[a, b, c.]", "array(varchar(6))"),
        ("split('a,b', ',', 1)", "[a,b]", "array(varchar(3))"),
        ("parse_data_size('1B')", "1", "decimal(38,0)"),
        ("parse_data_size('1kB')", "1024", "decimal(38,0)"),
        ("parse_data_size('2.3MB')", "2411724", "decimal(38,0)"),
        ("format_number(123456)", "123K", "varchar"),
        ("format_number(1000000)", "1M", "varchar"),
        ("format_number(-1234)", "-1.23K", "varchar"),
        ("format_number(999999)", "1000K", "varchar"),
        ("format_number(12345678e0)", "12.3M", "varchar"),
    ],
)
def test_string_and_conversion_functions(
    engine: DuckDBQueryEngine, expression: str, value: Any, trino_type: str
) -> None:
    """functions/string.md and conversion.md (trinodb/trino at 6f7aadf5a9115ec244aac372e07df5a481a4907f);
    core/trino-main/src/main/java/io/trino/operator/scalar/StringFunctions.java at
    00e6f8b957a4352553a70648bb3ff9daf5d12d5c (codepoint, hammingDistance, split with a limit: the last part holds the
    rest), LuhnCheckFunction.java at 029c93b693c7a3dbff995062fb9997f4acd86d77 ('' is false), FormatNumberFunction.java
    at 9d429d765254461c046a086a1f1aedd1f99b7b9d (#.## / #.# / # HALF_UP by magnitude: 999999 is 1000K),
    DataSizeFunctions.java at 03d8e5abc686c5c4a9f96ca14db07e2aed880174 (powers of 1024, toward zero)."""
    assert answer(engine, expression) == (value, trino_type)


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("format('%s%%', 123)", "123%"),
        ("format('%.5f', pi())", "3.14159"),
        ("format('%03d', 8)", "008"),
        ("format('%,.2f', 1234567.89)", "1,234,567.89"),
        ("format('%-7s,%7s', 'hello', 'world')", "hello  ,  world"),
        ("format('%2$s %3$s %1$s', 'a', 'b', 'c')", "b c a"),
        ("format('%s and %<s', s)", "new york and new york"),
        ("format('%06d|%+d|%(d|%x|%#o', -42, 5, -7, 255, 8)", "-00042|+5|(7)|ff|010"),
        ("format('%S|%b|%s|%.2s', 'abc', NULL, NULL, 'hello')", "ABC|false|null|he"),
        ("format('%.2f', 0.125e0)", "0.13"),
        ("format('%s|%s', DECIMAL '0.0000001', 1.50)", "1E-7|1.50"),
    ],
)
def test_format_is_javas_formatter(engine: DuckDBQueryEngine, expression: str, value: str) -> None:
    """functions/conversion.md's examples (format: Java's Formatter syntax) and FormatFunction.java at
    03d8e5abc686c5c4a9f96ca14db07e2aed880174 (integers as Long, decimals as BigDecimal, doubles as Double: %f rounds
    their decimal digits HALF_UP, so 0.125 is 0.13)."""
    assert answer(engine, expression) == (value, "varchar")


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("regexp_replace('xxx', '(x)', '$01')", "xxx"),
        ("regexp_replace('xxx', 'x', '$05')", "x5x5x5"),
        ("regexp_replace('123456789', '(1)(2)(3)(4)(5)(6)(7)(8)(9)', '$10')", "10"),
        ("regexp_replace('wxyz', '(?<xyz>[xyz])', '${xyz}${xyz}')", "wxxyyzz"),
        ("regexp_replace(VARCHAR 'x', '.*', 'xxxxx')", "xxxxxxxxxx"),
        ("regexp_replace(s, '(\\w)(\\w*)', x -> upper(x[1]) || lower(x[2]))", "New York"),
        ("regexp_replace('new', '(\\w)', x -> x[1] || upper(x[1]))", "nNeEwW"),
        ("regexp_replace('abbabba', '(abba)', x -> 'm')", "mbba"),
        ("regexp_replace('new york', '(a)', x -> upper(x[1]))", "new york"),
        ("regexp_replace('abde', 'ab(c)?de', x -> x[1])", None),
        ("regexp_like('Hello', '^(?i)[a-z]+$')", True),
        ("regexp_like('abc1', '(?=.*\\d)a')", True),
        ("regexp_extract('xaay', '(a)\\1')", "aa"),
        ("regexp_count('aaa', 'a++')", 1),
        ("regexp_replace('abab', '(?<=a)b', 'X')", "aXaX"),
        ("regexp_split('a1b', '(?<=\\d)')", "[a1, b]"),
        ("regexp_extract('wx', '(?<n>x)', 1)", "x"),
        ("regexp_replace('Hello', '(?i)h', 'j')", "jello"),
        ("regexp_replace('a b  ', '\\s+$', '')", "a b"),
        ("regexp_replace('ab', 'b', NULL)", None),
        ("regexp_position('I have 23 apples, 5 pears and 13 oranges', '\\b\\d+\\b')", 8),
        ("regexp_position('I have 23 apples, 5 pears and 13 oranges', '\\b\\d+\\b', 12)", 19),
        ("regexp_position('I have 23 apples, 5 pears and 13 oranges', '\\b\\d+\\b', 12, 2)", 31),
        ("regexp_position('I have 23 apples, 5 pears and 13 oranges', '\\b\\d+\\b', 12, 3)", -1),
    ],
)
def test_regexp_functions_are_javas(engine: DuckDBQueryEngine, expression: str, value: Any) -> None:
    """functions/regexp.md (regexp_position, regexp_replace with a lambda) and JoniRegexpFunctions.java at
    03d8e5abc686c5c4a9f96ca14db07e2aed880174 (``$n`` reads as many digits as name a group: '$05' is group 0 then
    '5', '$10' of nine groups is group 1 then '0'; ``${name}``; an empty match right after a match counts),
    JoniRegexpReplaceLambdaFunction.java at 19a0b3068a06422f155df75556c276a82a881509 (a NULL from the lambda makes
    the result NULL); Java reads an inline flag anywhere; Java's lookaround, back references, possessive quantifiers
    and named groups (regexp.md: "the Java pattern syntax"), which DuckDB's RE2 lacks."""
    assert answer(engine, expression)[0] == value


@pytest.mark.parametrize(
    ("expression", "value", "trino_type"),
    [
        ("length(CAST('hello' AS CHAR(20)))", 20, "bigint"),
        ("CAST('bar  ' AS CHAR(10))", "bar       ", "char(10)"),
        ("CAST('bar' AS CHAR)", "b", "char(1)"),
        ("reverse(CAST('racecar' AS CHAR(10)))", "   racecar", "char(10)"),
        ("ltrim(CAST('  hello  ' AS CHAR(9)))", "hello", "varchar(9)"),
        ("substr(CAST('keep trailing' AS CHAR(14)), 1)", "keep trailing ", "varchar(14)"),
        ("CAST(CAST('bar' AS CHAR(5)) AS VARCHAR(10))", "bar  ", "varchar(10)"),
        ("CAST(CAST('bar' AS CHAR(5)) AS VARCHAR(1))", "b", "varchar(1)"),
        ("CAST('ab' AS CHAR(3)) = CAST('ab' AS CHAR(5))", True, "boolean"),
        ("CAST('ab' AS CHAR(3)) = 'ab'", True, "boolean"),
    ],
)
def test_char_is_space_padded(engine: DuckDBQueryEngine, expression: str, value: Any, trino_type: str) -> None:
    """CharacterStringCasts.java at e478e579c66e35d76b2d38590980d4b4010ce2f6 (varchar to char(n): truncated, then
    padded; char is char(1); char to varchar(n) keeps the padding) and StringFunctions.java at
    00e6f8b957a4352553a70648bb3ff9daf5d12d5c (length of char(x) is x; reverse and substr of the padded text; ltrim
    of a char trims its padding too); comparisons coerce to the longer char."""
    got, kind = answer(engine, expression)
    assert got == value
    assert kind == trino_type or kind == "varchar"  # the char(n) type text: another rule's work


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("hamming_distance('hello', 'hi')", "INVALID_FUNCTION_ARGUMENT: The input strings to hamming_distance"),
        ("luhn_check('12a')", "INVALID_FUNCTION_ARGUMENT: Input contains non-digit character"),
        ("split('a,b', ',', 0)", "INVALID_FUNCTION_ARGUMENT: Limit must be positive"),
        ("split('a,b', '', 2)", "INVALID_FUNCTION_ARGUMENT: The delimiter may not be the empty string"),
        ("split('a,b', '')", "INVALID_FUNCTION_ARGUMENT: The delimiter may not be the empty string"),
        ("strpos('abc/xyz/foo/bar', '/', 0)", "INVALID_FUNCTION_ARGUMENT: 'instance' must be a positive or negative"),
        ("parse_data_size('1xB')", "INVALID_FUNCTION_ARGUMENT: Invalid data size: '1xB'"),
        ("format('%d', 1.5)", "INVALID_FUNCTION_ARGUMENT: Invalid format string: %d"),
        ("format('%s %s', 'a')", "INVALID_FUNCTION_ARGUMENT: Invalid format string"),
        ("codepoint('hello')", "FUNCTION_NOT_FOUND: Unexpected parameters (varchar(5)) for function codepoint"),
        ("regexp_extract(s, '\\b[a-z]([a-z]*)', 2)", "INVALID_FUNCTION_ARGUMENT: Pattern has 1 groups. Cannot access"),
        ("regexp_extract_all('12345', '(')", "INVALID_FUNCTION_ARGUMENT: Invalid regular expression"),
        (
            "regexp_replace('xxx', 'x', '$1')",
            "INVALID_FUNCTION_ARGUMENT: Illegal replacement sequence: unknown group 1",
        ),
        ("regexp_replace('xxx', 'x', '\\')", "INVALID_FUNCTION_ARGUMENT: Illegal replacement sequence"),
        ("regexp_position('abc', 'b', 0)", "INVALID_FUNCTION_ARGUMENT: start position cannot be smaller than 1"),
        ("regexp_position('abc', 'b', 1, 0)", "INVALID_FUNCTION_ARGUMENT: occurrence cannot be smaller than 1"),
        ("listagg(s, ',')", "SYNTAX_ERROR: listagg needs WITHIN GROUP (ORDER BY ...) in Trino"),
        ("listagg(s, 123) WITHIN GROUP (ORDER BY s)", "SYNTAX_ERROR: listagg's separator must be a string literal"),
    ],
)
def test_failures_are_trinos(engine: DuckDBQueryEngine, expression: str, message: str) -> None:
    """The run-time failures of the implementations named above (INVALID_FUNCTION_ARGUMENT with their messages;
    JoniRegexpFunctions.validateGroup: "Pattern has %d groups. Cannot access group %d"); codepoint's signature
    takes a varchar(1) only (FUNCTION_NOT_FOUND); listagg without WITHIN GROUP is not Trino's grammar
    (functions/aggregate.md)."""
    assert failure(engine, expression).startswith(message)


@pytest.mark.parametrize(
    "expression",
    [
        "format('%e', 1e0)",
        "format('%s', 1e0)",
        "format('%tY', DATE '2006-07-04')",
        "regexp_position('abc', '\\p{L}')",
        "regexp_replace('abc', '\\p{L}', x -> 'y')",
    ],
)
def test_what_is_not_reproduced_is_refused(engine: DuckDBQueryEngine, expression: str) -> None:
    """Java's %e/%g/%t and Double.toString, and regex syntax Python's re reads differently: one line."""
    assert failure(engine, expression).startswith("NOT_SUPPORTED: runs on Athena only: ")


@pytest.mark.parametrize(
    ("expression", "value", "trino_type"),
    [
        ("ceil(TINYINT '-123')", -123, "tinyint"),
        ("floor(-12300000000)", -12300000000, "bigint"),
        (
            "DECIMAL '12345678901234567' * DECIMAL '123456789012345670'",
            1524157875323883455265967556774890,
            "decimal(35,0)",
        ),
    ],
)
def test_math_keeps_trinos_types(engine: DuckDBQueryEngine, expression: str, value: Any, trino_type: str) -> None:
    """functions/math.md (ceil, floor: [same as input]) and decimal.md (decimal(17,0) * decimal(18,0) is
    decimal(35,0), exact) at 6f7aadf5a9115ec244aac372e07df5a481a4907f."""
    got, kind = answer(engine, expression)
    assert (int(got), kind) == (value, trino_type)


def test_listagg_and_typeof_of_an_aggregate(engine: DuckDBQueryEngine) -> None:
    """functions/aggregate.md at 6f7aadf5a9115ec244aac372e07df5a481a4907f: listagg's separator defaults to '';
    typeof(count(*)) is one row ('bigint'), the query aggregated."""
    sql = "SELECT listagg(v) WITHIN GROUP (ORDER BY v) AS v FROM (VALUES 'a', 'b', 'c') x(v)"
    query_id = engine.start_query(sql=sql, parameters=[], client_request_token=f"trino-{uuid.uuid4().hex}")
    assert engine.get_results(query_id).rows == [{"v": "abc"}]
    sql = "SELECT typeof(count(*)) AS v FROM t CROSS JOIN (VALUES 1, 2, 3) x(n)"
    query_id = engine.start_query(sql=sql, parameters=[], client_request_token=f"trino-{uuid.uuid4().hex}")
    assert engine.get_results(query_id).rows == [{"v": "bigint"}]


def test_java_format_directly() -> None:
    """Java's Formatter rules the engine's format() runs on: argument indexes, a missing argument, what is refused."""
    assert java_format("%2$s-%1$s-%<s", ["varchar", "integer"], ["a", "7"]) == "7-a-a"
    assert java_format("%,d|%,.1f", ["bigint", "decimal"], ["-1234567", "-0.04"]) == "-1,234,567|-0.0"
    with pytest.raises(ValueError, match="MissingFormatArgument"):
        java_format("%s %s", ["varchar"], ["a"])
    assert unsupported("%e", ["double"]) == "the conversion %e"
    assert unsupported("%s", ["double"]) == "%s of a double"
    assert unsupported("%d %s", ["integer", "varchar"]) is None


#: AbstractTestRegexpFunctions.java (trinodb/trino at 3007cb4d0c77951daf03711a131c010cc1ae2436): testRegexpReplace,
#: testRegexpReplaceLambda, testRegexpSplit, testRegexpCount, testRegexpPosition (arrays as Athena prints them).
TRINO_REGEXP_TESTS = [
    ("regexp_replace('abc有朋$%X自9远方来', '', 'Y')", "YaYbYcY有Y朋Y$Y%YXY自Y9Y远Y方Y来Y"),
    ("regexp_replace('a有朋💰', '.', '1$02')", "1a21有21朋21💰2"),
    ("regexp_replace('', '', 'Y')", "Y"),
    ("regexp_replace('1234567890', '(1)(2)(3)(4)(5)(6)(7)(8)(9)(0)', '$1a')", "1a"),
    ("regexp_replace('wxyz', '(?<w>w)|(?<xyz>[xyz])', '[${w}](${xyz})')", "[w]()[](x)[](y)[](z)"),
    ("regexp_replace('xyz', '(?<xyz>[xyz])+', '${xyz}')", "z"),
    ("regexp_replace('abc有朋$%X自9远方来', '', x -> 'Y')", "YaYbYcY有Y朋Y$Y%YXY自Y9Y远Y方Y来Y"),
    ("regexp_replace('a有朋💰', '(.)', x -> '1' || x[1] || '2')", "1a21有21朋21💰2"),
    ("regexp_replace('', '', x -> 'Y')", "Y"),
    ("regexp_replace('new york', '((\\w)(\\w*))', x -> upper(x[2]) || lower(x[3]))", "New York"),
    ("regexp_replace('new york city', '(yo\\w*)', x -> upper(x[1]))", "new YORK city"),
    ("regexp_replace('123 456', '([0-9]*)', x -> x[1])", "123 456"),
    ("regexp_replace('123 456', '(([0-9]*) ([0-9]*))', x -> x[2] || x[3])", "123456"),
    ("regexp_replace('abbabba', '(abba)', x -> 'm' || x[1])", "mabbabba"),
    ("regexp_replace('abcde', 'ab(c)?de', x -> CASE WHEN x[1] IS NULL THEN 'foo' ELSE 'bar' END)", "bar"),
    ("regexp_replace('abde', 'ab(c)?de', x -> CASE WHEN x[1] IS NULL THEN 'foo' ELSE 'bar' END)", "foo"),
    ("regexp_replace('abc', '()', x -> x[1])", "abc"),
    ("regexp_replace('abc', '()', x -> 'OK')", "OKaOKbOKcOK"),
    ("regexp_replace('new', '(\\w*)', x -> x[1] || upper(x[1]))", "newNEW"),
    ("regexp_replace('new', '(\\w*)', x -> CAST(length(x[1]) AS VARCHAR))", "30"),
    ("regexp_replace('new york', '(\\w*)', x -> '<' || x[1] || '>')", "<new><> <york><>"),
    ("regexp_replace('aaa', '(b)?', x -> x[1])", None),
    ("regexp_replace('aaa', '(a)', x -> CAST(NULL AS VARCHAR))", None),
    ("regexp_replace('', '(a)', x -> upper(x[1]))", ""),
    ("regexp_replace(NULL, '(a)', x -> upper(x[1]))", None),
    ("regexp_split('abc有朋$%X自9远方来💰', '')", "[, a, b, c, 有, 朋, $, %, X, 自, 9, 远, 方, 来, 💰, ]"),
    ("regexp_split('a有朋💰', '.')", "[, , , , ]"),
    ("regexp_split('', '')", "[, ]"),
    ("regexp_split('abcd', '')", "[, a, b, c, d, ]"),
    ("regexp_split('', 'x')", "[]"),
    ("regexp_split(',,,', ',')", "[, , , ]"),
    ("regexp_extract('rat cat\nbat dog', 'ra(.)|blah(.)(.)', 2)", None),
    ("regexp_extract('12345', 'x')", None),
    ("regexp_extract('Baby X', 'by ([A-Z].*)\\b[a-z]')", None),
    ("regexp_extract('abcde', 'ab(c)?de', 1)", "c"),
    ("cardinality(regexp_extract_all('rat cat\nbat dog', 'ra(.)|blah(.)(.)', 2))", 1),
    ("regexp_count('a.b:c;d', '[\\.:;]')", 3),
    ("regexp_count('Hello world bye', '\\b[a-z]([a-z]*)')", 2),
    ("regexp_count('rat cat\nbat dog', 'ra(.)|blah(.)(.)')", 1),
    ("regexp_count('', '')", 1),
    ("regexp_count('abcd', '')", 5),
    ("regexp_count('君子矜而不争，党而不群', '不')", 2),
    ("regexp_position('a1b2c3d4e', '\\d', 4, 2)", 6),
    ("regexp_position('a1b2c3d', '')", 1),
    ("regexp_position('a1b2c3d', '', 2, 7)", 8),
    ("regexp_position('a1b2c3d', '', 2, 8)", -1),
    ("regexp_position('行成于思str而毁123于随', '于', 3, 2)", 13),
    ("regexp_position('行成于思str而毁123于随', '', 3, 2)", 4),
    ("regexp_position('', ', ', 4, 2)", -1),
    ("regexp_position('有朋$%X自9远方9来', '\\d', 10, 1)", 10),
    ("regexp_position('有朋$%X自9远方9来', '来', 999)", -1),
    ("regexp_position('natasha, 9102, miss you', '\\s*[a-z]+\\s*', 10)", 15),
    ("regexp_position('natasha, 9102, miss you', '\\s', 10, 2)", 20),
]


@pytest.mark.parametrize(("expression", "value"), TRINO_REGEXP_TESTS)
def test_trinos_own_regexp_tests(engine: DuckDBQueryEngine, expression: str, value: Any) -> None:
    """Trino's regexp function tests (the list's source), run locally."""
    assert answer(engine, expression)[0] == value


@pytest.mark.parametrize(
    "expression",
    [
        "regexp_replace('xxx', 'x', '$a')",
        "regexp_replace('xxx', '(?<name>x)', '${}')",
        "regexp_replace('xxx', '(?<name>x)', '${0}')",
        "regexp_replace('xxx', '(?<name>x)', '${nam}')",
        "regexp_replace('new', '(\\w)', x -> upper(x[2]))",
        "regexp_replace('new', '(\\w)', x -> upper(x[0]))",
        "regexp_replace('abc', '', x -> x[1])",
        "regexp_replace('abbabba', 'abba', x -> 'm' || x[1])",
        "regexp_extract('Hello world bye', '\\b[a-z]([a-z]*)', -1)",
        "regexp_extract_all('hello', '(.)', 2)",
        "regexp_like('abc', '[invalid')",
        "regexp_position('有朋$%X自9远方9来', '来', 1, -1)",
    ],
)
def test_trinos_own_regexp_failures(engine: DuckDBQueryEngine, expression: str) -> None:
    """The INVALID_FUNCTION_ARGUMENT cases of the same tests."""
    assert failure(engine, expression).startswith("INVALID_FUNCTION_ARGUMENT: ")


#: TestStringFunctions.java (trinodb/trino at 29e4b2ed1947cd0431248d68e2abcf0da6242bf7: testLeftTrim,
#: testCharLeftTrim, testRightTrim, testLeftTrimParametrized, testCharLeftTrimParametrized, testRightTrimParametrized,
#: testCharRightTrimParametrized, testHammingDistance, testStringPosition, testCharSubstring, testSplit): Java's
#: whitespace (U+2028 too), a char's padding, strpos with an instance (overlapping, from the end when negative).
TRINO_STRING_TESTS = [
    ("ltrim('   ')", ""),
    ("ltrim(' \u2028 \u4fe1\u5ff5 \u7231 \u5e0c\u671b')", "\u4fe1\u5ff5 \u7231 \u5e0c\u671b"),
    ("rtrim('\u4fe1\u5ff5 \u7231 \u5e0c\u671b \u2028 ')", "\u4fe1\u5ff5 \u7231 \u5e0c\u671b"),
    ("ltrim(CAST('' AS CHAR(20)))", ""),
    ("ltrim(CAST('hello  ' AS CHAR(7)))", "hello"),
    ("ltrim(CAST(' \u2028 \u4fe1\u5ff5 \u7231 \u5e0c\u671b' AS CHAR(10)))", "\u4fe1\u5ff5 \u7231 \u5e0c\u671b"),
    ("rtrim(CAST('  hello  ' AS CHAR(9)))", "  hello"),
    ("ltrim('   ', '')", "   "),
    ("ltrim('  hello  ', 'he ')", "llo  "),
    ("ltrim(' hello world ', ' ehlowrd')", ""),
    ("ltrim('\u017a\u00f3\u0142\u0107', '\u00f3\u017a')", "\u0142\u0107"),
    ("ltrim(CAST('   ' AS CHAR(3)), '')", ""),
    ("ltrim(CAST('  hello  ' AS CHAR(9)), '')", "  hello"),
    ("ltrim(CAST('hello  ' AS CHAR(7)), 'l')", "hello"),
    ("ltrim(CAST(' hello world ' AS CHAR(13)), ' eh')", "llo world"),
    ("rtrim('  hello  ', 'lo ')", "  he"),
    ("rtrim(' hello world ', ' ld')", " hello wor"),
    ("rtrim(CAST('abc def' AS CHAR(7)), 'def')", "abc"),
    ("rtrim(CAST('  hello  ' AS CHAR(9)), '')", "  hello"),
    ("trim(' \t x \n')", "x"),
    ("hamming_distance('hello na\u00efve world', 'hello naive world')", 1),
    ("hamming_distance('hello', 'world')", 4),
    ("strpos('abc/xyz/foo/bar', '/', 2)", 8),
    ("strpos('abc/xyz/foo/bar', '/', 4)", 0),
    ("strpos('highhigh', 'ig', 1)", 2),
    ("strpos('foobarfoo', 'oo', 1)", 2),
    ("strpos('abc abc abc', 'abc', -1)", 9),
    ("strpos('abc/xyz/foo/bar', '/', -3)", 4),
    ("strpos('abc/xyz/foo/bar', '/', -4)", 0),
    ("strpos('highhigh', 'ig', -2)", 2),
    ("strpos('foobarfoo', 'oo', -1)", 8),
    ("strpos('\u4fe1\u5ff5,\u7231,\u5e0c\u7231\u671b', '\u7231', -2)", 4),
    ("strpos('', '', 3)", 1),
    ("reverse('')", ""),
    ("reverse('hello')", "olleh"),
    ("reverse('\u4fe1\u5ff5,\u7231,\u5e0c\u671b')", "\u671b\u5e0c,\u7231,\u5ff5\u4fe1"),
    ("reverse('e\u0301x')", "x\u0301e"),
    ("substr(CAST('Quadratically' AS CHAR(13)), -5, 4)", "call"),
    ("substr(CAST('keep trailing' AS CHAR(14)), 1, 14)", "keep trailing "),
    ("substr(CAST('abc def' AS CHAR(7)), 1, 4)", "abc "),
]


@pytest.mark.parametrize(("expression", "value"), TRINO_STRING_TESTS)
def test_trinos_own_string_tests(engine: DuckDBQueryEngine, expression: str, value: Any) -> None:
    """Trino's string function tests (the list's source), run locally."""
    assert answer(engine, expression)[0] == value


@pytest.mark.parametrize(
    ("sql", "value"),
    [
        ("SELECT geometric_mean(x) AS v FROM (VALUES 1, 4) t(x)", 2.0),
        ("SELECT geometric_mean(x) AS v FROM (VALUES 1e0, 0e0) t(x)", 0.0),
        ("SELECT geometric_mean(x) AS v FROM (VALUES CAST(NULL AS DOUBLE), 4e0) t(x)", 4.0),
        ("SELECT geometric_mean(x) AS v FROM (VALUES CAST(NULL AS DOUBLE)) t(x)", None),
        ("SELECT every(x) AS v FROM (VALUES true, false) t(x)", False),
    ],
)
def test_aggregates_trino_has(engine: DuckDBQueryEngine, sql: str, value: Any) -> None:
    """functions/aggregate.md at 6f7aadf5a9115ec244aac372e07df5a481a4907f (every is bool_and) and
    GeometricMeanAggregations.java at 141a36a96de03b243a8ffcaaa6cc4e18c0443ba9 (exp of the mean of Math.log: log(0)
    is -Infinity, so 0; NULLs skipped, none: NULL)."""
    query_id = engine.start_query(sql=sql, parameters=[], client_request_token=f"trino-{uuid.uuid4().hex}")
    assert engine.get_results(query_id).rows == [{"v": value}]
