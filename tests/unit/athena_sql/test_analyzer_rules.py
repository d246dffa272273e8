"""check_query's rules for lambdas, ``prefix.*``, ORDER BY in and around aggregates, special forms and literals: each
refused as Trino refuses it (class, position, words) and its valid neighbour accepted.

Pure (no I/O). The statements are Trino's own where it has them: core/trino-main/src/test/java/io/trino/sql/analyzer/
TestAnalyzer.java at trinodb/trino@009eb018a32bbc675aa442e2f38f0d702038de2b (testLambda*, testSelectAllColumns,
testReferenceToOutputColumnFromOrderByAggregation, testAggregationWithOrderBy, testInvalidAggregationFilter,
testQuantifiedComparisonExpression, testNullTreatment, testLiteral), TestListagg.java (trinodb/trino@3f2f6685),
TestStringFunctions.testCodepoint, TestArrayOperators.testArrayToArrayConcat and the grammar (SqlBase.g4,
language/reserved.md).
"""

from __future__ import annotations

import pytest

from athena_sql.analyzer import check_query
from athena_sql.diagnostics import CheckResult

FLIGHTS = {"carrier": "varchar", "flight": "integer", "dep_delay": "double", "dest": "varchar", "dt": "varchar"}


def check(sql: str) -> CheckResult:
    return check_query(sql, tables={"flights": FLIGHTS}, parameters={})


def refused(sql: str) -> tuple[int, int, str, str]:
    """(line, column, class, message) of the first refusal of ``sql`` (there must be one)."""
    result = check(sql)
    assert result.refusals, f"accepted: {sql}"
    for refusal in result.refusals:
        assert "sqlglot" not in refusal.message and "<class" not in refusal.message  # never sqlglot's words
    first = result.refusals[0]
    return first.line, first.column, first.error_class, first.message


def refusals(sql: str) -> dict[str, str]:
    """Each refusal class of ``sql`` -> its message (every refusal, not only the first)."""
    refused(sql)
    return {r.error_class: r.message for r in check(sql).refusals}


@pytest.mark.parametrize(
    ("sql", "error", "words"),
    [
        # apply is a function of TestAnalyzer's own (it registers ApplyFunction); Athena has none
        ("SELECT apply(5, (x, y) -> 6)", "FUNCTION_NOT_FOUND", "Function 'apply' not registered"),
        # testLambdaWithInvalidParameterCount: the arity from the signature's function(T, U)
        ("SELECT transform(ARRAY[1], (x, y) -> x)", "INVALID_PARAMETER_USAGE", "takes 1 argument(s) but got 2"),
        ("SELECT map_filter(MAP(ARRAY[1], ARRAY[2]), k -> true)", "INVALID_PARAMETER_USAGE", "takes 2 argument(s)"),
        # testLambdaWithAggregationAndGrouping: in any lambda, known function or not
        (
            "SELECT transform(ARRAY[1], x -> max(x)) FROM (VALUES (1,2)) t(x,y) GROUP BY y",
            "EXPRESSION_NOT_SCALAR",
            "Lambda expression cannot contain aggregations",
        ),
        (
            "SELECT filter(ARRAY[1], x -> count(*) > x) FROM flights",
            "EXPRESSION_NOT_SCALAR",
            "Lambda expression cannot contain aggregations",
        ),
        # testLambdaWithSubquery
        ("SELECT apply(1, i -> (SELECT 3)) FROM (VALUES 1) t(x)", "NOT_SUPPORTED", "cannot contain subqueries"),
        (
            "SELECT transform(ARRAY[1], i -> (SELECT i)) FROM (VALUES 1) t(x)",
            "NOT_SUPPORTED",
            "cannot contain subqueries",
        ),
        # testLambdaInAggregationContext: x + y inside the lambda is not the grouping key x + y
        (
            "SELECT transform(ARRAY[1], y -> x + y) FROM (VALUES (1,2)) t(x, y) GROUP BY x+y",
            "EXPRESSION_NOT_AGGREGATE",
            "must be an aggregate expression or appear in GROUP BY clause",
        ),
        (
            (
                "SELECT transform(ARRAY[1], x -> y + transform(array[1], z -> x)[1]) FROM (VALUES (1, 2)) t(x,y)"
                " GROUP BY y + transform(array[1], z -> x)[1]"
            ),
            "EXPRESSION_NOT_AGGREGATE",
            "must be an aggregate expression",
        ),
        # a lambda using an outer column in a grouped query (the user's mistake of the same kind)
        (
            "SELECT transform(ARRAY[1, 2], x -> x * flight) FROM flights GROUP BY carrier",
            "EXPRESSION_NOT_AGGREGATE",
            "must be an aggregate expression",
        ),
        # testGroupByWithSubquerySelectExpression: a subquery uses the grouped query's grouping keys only
        (
            "SELECT carrier, (SELECT count(*) FROM flights f2 WHERE f2.dest = f.dest) FROM flights f GROUP BY carrier",
            "EXPRESSION_NOT_AGGREGATE",
            "Subquery uses 'f.dest' which must appear in GROUP BY clause",
        ),
        # testGroupByWithWildcard: * selects every column, each grouped or refused
        (
            "SELECT * FROM flights GROUP BY 1",
            "EXPRESSION_NOT_AGGREGATE",
            "' must be an aggregate expression or appear in",
        ),
        ("SELECT * FROM flights ORDER BY 9", "INVALID_COLUMN_REFERENCE", "ORDER BY position 9 is not in select list"),
        # testSelectAllColumns
        ("SELECT non_row.* FROM (VALUES ('true', 1)) t(non_row, b)", "TABLE_NOT_FOUND", "Unable to resolve reference"),
        ("SELECT foo.* FROM flights", "TABLE_NOT_FOUND", "Unable to resolve reference foo"),
        ("SELECT t.a FROM (SELECT t.* FROM (VALUES 1) t(a))", "COLUMN_NOT_FOUND", "Column 't.a' cannot be resolved"),
        # testReferenceToOutputColumnFromOrderByAggregation / testAggregationWithOrderBy
        (
            "SELECT 1 AS x FROM (values (1,2)) t(x, y) GROUP BY y ORDER BY sum(transform(ARRAY[1], z -> x)[1])",
            "COLUMN_NOT_FOUND",
            "Invalid reference to output projection attribute from ORDER BY aggregation",
        ),
        (
            "SELECT 1 AS c FROM (VALUES (1), (2)) t(x) ORDER BY sum(x order by c)",
            "COLUMN_NOT_FOUND",
            "Invalid reference to output projection attribute",
        ),
        (
            "SELECT array_agg(DISTINCT x ORDER BY y) FROM (VALUES (1, 2), (3, 4)) t(x, y)",
            "EXPRESSION_NOT_IN_DISTINCT",
            "ORDER BY expressions must appear in arguments",
        ),
        (
            "SELECT array_agg(x ORDER BY x) FROM (VALUES MAP(ARRAY['a'], ARRAY['b'])) t(x)",
            "TYPE_MISMATCH",
            "is not orderable",
        ),
        # a map has no order in a query's or a window's ORDER BY either
        ("SELECT m FROM (VALUES MAP(ARRAY[1], ARRAY[2])) t(m) ORDER BY m", "TYPE_MISMATCH", "is not orderable"),
        (
            "SELECT row_number() OVER (ORDER BY m) FROM (VALUES MAP(ARRAY[1], ARRAY[2])) t(m)",
            "TYPE_MISMATCH",
            "is not orderable",
        ),
        (
            "SELECT array_agg(DISTINCT carrier ORDER BY f.flight) FROM flights f",
            "EXPRESSION_NOT_IN_DISTINCT",
            "must appear in arguments",
        ),
        # testQuantifiedComparisonExpression: a map has no order, whatever it is compared with
        (
            "SELECT map(ARRAY[1], ARRAY['hello']) < ALL (VALUES map(ARRAY[1], ARRAY['hello']))",
            "TYPE_MISMATCH",
            "is not orderable",
        ),
        # a quantified comparison's VALUES: its column type is compared (Trino: TYPE_MISMATCH)
        ("SELECT carrier FROM flights WHERE dest = SOME (VALUES 1)", "TYPE_MISMATCH", "varchar = integer"),
        # testInvalidAggregationFilter, testNullTreatment
        (
            "SELECT sum(x) FILTER (WHERE x > 1) OVER (PARTITION BY x) FROM (VALUES (1), (2), (2), (4)) t (x)",
            "NOT_SUPPORTED",
            "FILTER is not yet supported for window functions",
        ),
        ("SELECT count() RESPECT NULLS OVER ()", "NULL_TREATMENT_NOT_ALLOWED", "non-value window function count"),
        # TestArrayOperators.testArrayToArrayConcat
        ("SELECT ARRAY[ARRAY[1]] || ARRAY[ARRAY[true], ARRAY[false]]", "FUNCTION_NOT_FOUND", "for function concat"),
        # TestStringFunctions.testCodepoint: codepoint(varchar(1))
        ("SELECT codepoint('hello')", "FUNCTION_NOT_FOUND", "Expected: codepoint(varchar(1))"),
        ("SELECT codepoint(carrier) FROM flights", "FUNCTION_NOT_FOUND", "codepoint(varchar(1))"),
        # testLiteral
        ("SELECT TIMESTAMP '2012-10-31 01:00:00 PT'", "INVALID_LITERAL", "unknown time zone 'PT'"),
        # the grammar: special values, LISTAGG, UNNEST (reserved words)
        ("SELECT CURRENT_DATE()", "SYNTAX_ERROR", "write CURRENT_DATE without brackets"),
        ("SELECT current_timestamp()", "SYNTAX_ERROR", "takes only an integer precision"),
        ("SELECT listagg(carrier, ',') FROM flights", "SYNTAX_ERROR", "needs WITHIN GROUP"),
        (
            "SELECT listagg(carrier, 123) WITHIN GROUP (ORDER BY carrier) FROM flights",
            "SYNTAX_ERROR",
            "separator must be a string literal",
        ),
        ("SELECT unnest(ARRAY[1, 2])", "SYNTAX_ERROR", "UNNEST is not a function in Trino"),
        ("SELECT carrier FROM flights WHERE flight IN (SELECT unnest(ARRAY[1]))", "SYNTAX_ERROR", "written in FROM"),
    ],
)
def test_refused_as_trino_refuses(sql: str, error: str, words: str) -> None:
    found = refusals(sql)
    assert error in found, found
    assert words in found[error]


@pytest.mark.parametrize(
    ("sql", "line", "column"),
    [
        # TestAnalyzer's own positions
        ("SELECT max(a) AS a FROM (values (1,2)) t(a,b) GROUP BY b ORDER BY max(a+b)", 1, 71),
        ("SELECT DISTINCT a AS a, max(a) AS c from (VALUES (1, 2)) t(a, b) GROUP BY a ORDER BY max(a)", 1, 90),
        ("SELECT non_row.* FROM (VALUES ('true', 1)) t(non_row, b)", 1, 8),
        ("SELECT t.a FROM (SELECT t.* FROM (VALUES 1) t(a))", 1, 8),
        ("SELECT carrier,\n  CURRENT_DATE() FROM flights", 2, 3),
        ("SELECT (SELECT u.a from (values 1) x(a)) FROM (VALUES (1, 2)) u(a, b) GROUP BY b", 1, 16),
        ("SELECT (SELECT a+2) FROM (VALUES (1, 2)) t1(a, b) GROUP BY a+1", 1, 16),
        ("SELECT (SELECT 1 FROM flights WHERE flight = u.a) FROM (VALUES (1, 2)) u(a, b) GROUP BY b", 1, 46),
    ],
)
def test_located_where_trino_locates_it(sql: str, line: int, column: int) -> None:
    assert refused(sql)[:2] == (line, column)


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT transform(ARRAY[5], x -> x + 1)",
        "SELECT transform(ARRAY[x], i -> i * i) FROM (SELECT 10 x)",
        "SELECT transform(ARRAY[x], i -> i - 1), sum(y) FROM (VALUES (1, 10), (1, 20), (2, 50)) t(x, y) GROUP BY x",
        "SELECT (SELECT transform(ARRAY[0], x -> x + b) FROM (VALUES 1) x(a)) FROM (VALUES (1, 2)) u(a, b) GROUP BY b",
        "SELECT transform(ARRAY[1, 2], x -> x * 2), reduce(ARRAY[1, 2], 0, (s, x) -> s + x, s -> s)",
        "SELECT map_filter(MAP(ARRAY[1], ARRAY[2]), (k, v) -> v > 1)",
        "SELECT flights.* FROM flights",
        "SELECT f.carrier, g.* FROM flights f JOIN flights g ON f.flight = g.flight",
        "SELECT s.a FROM (SELECT t.* FROM (VALUES 1) t(a)) s",
        "SELECT x.* FROM (SELECT CAST(ROW(1, 'a') AS ROW(a integer, b varchar)) AS x) s",
        "SELECT u.* FROM flights CROSS JOIN UNNEST(ARRAY[1, 2]) AS u(x)",
        "SELECT carrier, count(*) AS n FROM flights GROUP BY carrier ORDER BY count(*) DESC, max(dep_delay)",
        "SELECT carrier AS c FROM flights GROUP BY carrier ORDER BY c",
        "SELECT * FROM flights GROUP BY 1, 2, 3, 4, 5",
        "SELECT *, count(*) FROM flights GROUP BY carrier, flight, dep_delay, dest, dt",
        "SELECT * FROM flights ORDER BY 5",
        "SELECT * FROM flights WHERE flight <= ALL (VALUES 10, 20)",
        "SELECT (SELECT t1.a) FROM (VALUES (1, 2)) t1(a, b) GROUP BY a",
        "SELECT (SELECT u.a FROM (values 1) u(a)) FROM (VALUES (1, 2)) u(a, b) GROUP BY b",
        "SELECT carrier, (SELECT count(*) FROM flights g WHERE g.carrier = f.carrier) FROM flights f GROUP BY carrier",
        "SELECT array_agg(DISTINCT x ORDER BY x) FROM (VALUES (1, 2), (3, 4)) t(x, y)",
        "SELECT array_agg(x ORDER BY y) FROM (VALUES (1, 2), (3, 4)) t(x, y)",
        "SELECT array_agg(DISTINCT f.carrier ORDER BY carrier) FROM flights f",
        "SELECT m FROM (VALUES MAP(ARRAY[1], ARRAY[2])) t(m) ORDER BY cardinality(m)",
        "SELECT map(ARRAY[1], ARRAY['a']) = map(ARRAY[1], ARRAY['a'])",
        "SELECT sum(flight) FILTER (WHERE flight > 1) FROM flights",
        "SELECT count(), count(*) FROM flights",
        "SELECT lag(flight) IGNORE NULLS OVER (ORDER BY flight) FROM flights",
        "SELECT ARRAY[ARRAY[1]] || ARRAY[1], ARRAY[1] || 2, 2 || ARRAY[1], ARRAY[1] || ARRAY[2.5]",
        "SELECT codepoint('x'), codepoint(CAST(carrier AS varchar(1))) FROM flights",
        "SELECT TIMESTAMP '2012-10-31 01:00:00 America/Los_Angeles', TIMESTAMP '2020-05-01 12:34:56.123 +07:09'",
        "SELECT TIMESTAMP '2012-10-31 01:00:00 UTC', TIMESTAMP '2012-10-31 01:00:00'",
        "SELECT current_date, current_timestamp, current_timestamp(3), localtimestamp(6), current_time(0)",
        "SELECT listagg(carrier) WITHIN GROUP (ORDER BY carrier) FROM flights",
        (
            "SELECT listagg(DISTINCT carrier, ', ' ON OVERFLOW TRUNCATE '...' WITH COUNT) WITHIN GROUP (ORDER BY carrier)"
            " FROM flights"
        ),
        "SELECT listagg(carrier, ',') WITHIN GROUP (ORDER BY carrier) FILTER (WHERE flight > 1) FROM flights",
        "SELECT carrier, x FROM flights CROSS JOIN UNNEST(ARRAY[1, 2]) AS t(x)",
        "SELECT DATE '2013-01-02' - DATE '2013-01-01'",  # subtract(timestamp(p), timestamp(p)): see test below
    ],
)
def test_valid_neighbours_are_accepted(sql: str) -> None:
    assert check(sql).refusals == ()


def test_date_minus_date_is_an_interval_day_to_second() -> None:
    """A date coerces to timestamp(0) (TypeCoercion.coerceTypeBase, trinodb/trino@01767030), which binds Trino's
    ``subtract(timestamp(p), timestamp(p)) -> interval day to second`` (TimestampOperators.TimestampMinusTimestamp):
    the difference is an interval, so comparing it with a number is refused."""
    _, _, error, message = refused("SELECT DATE '2013-01-02' - DATE '2013-01-01' > 1")
    assert error == "TYPE_MISMATCH"
    assert "interval day to second > integer" in message


@pytest.mark.parametrize(
    ("sql", "words"),
    [
        ("SELECT carrier FROM flights WHERE", "an incomplete WHERE clause"),
        ("SELECT count(*) FROM flights HAVING", "an incomplete HAVING clause"),
        ("SELECT CASE WHEN THEN 1 END", "an incomplete CASE WHEN ... THEN"),
        ("SELECT 1 +", "an incomplete expression"),
    ],
)
def test_a_parse_error_is_said_in_sql_words_never_sqlglots(sql: str, words: str) -> None:
    _, _, error, message = refused(sql)
    assert error == "SYNTAX_ERROR"
    assert words in message


def test_a_lambda_without_parameters_is_unchecked_not_refused() -> None:
    # Trino's grammar allows ``() -> x`` (SqlBase.g4 #lambda); sqlglot does not parse it
    result = check("SELECT filter(ARRAY[1], () -> true)")
    assert result.refusals == ()
    assert "lambda without parameters" in result.unchecked[0].reason
