"""stacks.query_sql: named parameters -> positional ExecutionParameters, spliced into the user's own text."""

from __future__ import annotations

import pytest

from stacks.query_sql import BUILTIN_PARAMETERS, QuerySqlError, is_literal_text, prepare_sql


def problems(sql: str, **kwargs: object) -> list[str]:
    with pytest.raises(QuerySqlError) as caught:
        prepare_sql(sql, **kwargs)  # type: ignore[arg-type]
    return caught.value.problems


def test_named_parameters_become_question_marks_in_the_users_own_text() -> None:
    sql = (
        "select  origin,count(*)   AS flights\n"
        "FROM flights WHERE sched >= CAST(:window_start AS timestamp)\n"
        "  AND sched < CAST(:window_end AS timestamp) GROUP BY 1"
    )
    prepared = prepare_sql(sql)
    # Spacing, case and the GROUP BY ordinal stay exactly as written: nothing is regenerated from an AST.
    assert prepared.text == sql.replace(":window_start", "?").replace(":window_end", "?")
    assert prepared.parameter_order == ("window_start", "window_end")
    assert prepared.output_columns == ("origin", "flights")


def test_a_name_used_twice_is_bound_twice_in_order() -> None:
    prepared = prepare_sql("SELECT 1 AS a FROM t WHERE x BETWEEN :window_start AND :slot_time OR y = :window_start")
    assert prepared.parameter_order == ("window_start", "slot_time", "window_start")
    assert prepared.text.count("?") == 3
    assert prepared.used_parameters == {"window_start", "slot_time"}


def test_colons_and_question_marks_in_literals_and_comments_are_not_parameters() -> None:
    sql = (
        "-- a comment with :window_end and ?\n"
        "SELECT ':slot_time ?' AS literal, /* :nope ? */ \"a:b\" AS quoted\n"
        "FROM t WHERE ts < CAST(:window_end AS timestamp)"
    )
    prepared = prepare_sql(sql)
    assert prepared.parameter_order == ("window_end",)
    assert prepared.text.count("?") == 4  # the two comments', the literal's and the one placeholder
    assert "':slot_time ?'" in prepared.text and "/* :nope ? */" in prepared.text
    assert prepared.output_columns == ("literal", "quoted")


def test_the_window_dates_are_built_in_for_a_partition_filter() -> None:
    prepared = prepare_sql(
        "SELECT count(*) AS n FROM t WHERE ts >= CAST(:window_start AS timestamp)"
        " AND ts < CAST(:window_end AS timestamp) AND dt BETWEEN :window_first_date AND :window_last_date"
    )
    assert prepared.parameter_order == ("window_start", "window_end", "window_first_date", "window_last_date")


def test_synth_and_runtime_know_the_same_built_in_parameters() -> None:
    # The synth prepares the SQL with these names; the function binds exactly these at run time.
    from athena_refresh.catalog import BUILTIN_PARAMETERS as RUNTIME_BUILTIN_PARAMETERS

    assert BUILTIN_PARAMETERS == RUNTIME_BUILTIN_PARAMETERS
    assert set(BUILTIN_PARAMETERS) == {
        "window_start",
        "window_end",
        "slot_time",
        "window_first_date",
        "window_last_date",
    }


def test_user_constants_are_parameters_too() -> None:
    prepared = prepare_sql(
        "SELECT carrier FROM t WHERE carrier = :carrier AND ts < :window_end",
        defined=(*BUILTIN_PARAMETERS, "carrier"),
    )
    assert prepared.parameter_order == ("carrier", "window_end")


def test_a_name_the_job_does_not_define_is_named_with_its_line() -> None:
    (problem,) = problems("SELECT a\nFROM t\nWHERE x = :windw_start")
    assert problem.startswith("line 3: parameter :windw_start is not defined")
    assert "window_start" in problem


def test_every_problem_is_reported_at_once() -> None:
    found = problems("SELECT ? AS a, :nope AS b, :other AS c FROM t")
    assert len(found) == 3
    assert "positional '?'" in found[0] and ":nope" in found[1] and ":other" in found[2]


@pytest.mark.parametrize("sql", ["SELECT a FROM t WHERE x = : window_start", "SELECT a FROM t WHERE x = :"])
def test_a_colon_without_a_name_is_refused(sql: str) -> None:
    assert any("not followed by a parameter name" in p for p in problems(sql))


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("", "the query is empty"),
        ("SELECT 'unterminated", "cannot be tokenized"),
        ("SELECT a FROM", "does not parse as Trino"),
        ("SELECT 1 AS a; SELECT 2 AS b", "exactly one statement, found 2"),
        ("INSERT INTO t VALUES (1)", "must be a query"),
        ("DROP TABLE flights", "must be a query"),
    ],
)
def test_what_is_not_one_query_is_refused(sql: str, expected: str) -> None:
    assert any(expected in p for p in problems(sql))


def test_output_columns_are_named_as_athena_names_them() -> None:
    prepared = prepare_sql("SELECT count(*), origin, t.dest, x + 1 AS y FROM t")
    assert prepared.output_columns == ("_col0", "origin", "dest", "y")
    assert prepare_sql("WITH w AS (SELECT 1 AS z) SELECT z FROM w").output_columns == ("z",)
    assert prepare_sql("SELECT * FROM t").output_columns is None  # unknown at synth


@pytest.mark.parametrize(
    "text",
    [
        "'UA'",
        "15",
        "-1.5",
        "1e3",
        "true",
        "NULL",
        "DATE '2024-01-31'",
        "TIMESTAMP '2024-01-31 00:00:00'",
        "X'AB'",
        "INTERVAL '1' DAY",
        "CAST('7' AS integer)",
        "'it''s'",
    ],
)
def test_a_parameter_literal_is_accepted(text: str) -> None:
    assert is_literal_text(text)


@pytest.mark.parametrize("text", ["UA", "carrier", "1 + 1", "upper('x')", "'a' OR 1=1", "SELECT 1", "(", "x'"])
def test_text_that_is_not_one_literal_is_refused(text: str) -> None:
    assert not is_literal_text(text)


def test_an_unquoted_text_parameter_is_named_with_the_fix_not_reported_as_a_missing_column() -> None:
    """Issue 34: ``carrier = "UA"`` was reported as column "ua" not found."""
    from athena_refresh.checks import Labels
    from stacks.query_sql import job_parameters

    problems: list[str] = []
    constants = job_parameters({"carrier": "UA", "min_delay": "15"}, Labels("jobs/x/job.toml: "), problems)
    assert constants == {"carrier": "UA", "min_delay": "15"}  # still defined: the query's :carrier is known
    (problem,) = problems
    assert problem.startswith("jobs/x/job.toml: parameters.carrier: 'UA' is not a SQL literal")
    assert "text is quoted: carrier = \"'UA'\"" in problem
