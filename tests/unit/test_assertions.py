"""``athena_refresh.assertions``: the row expressions' grammar (parsed, evaluated with SQL's three-valued logic) and
each assertion's failing count. Pure: no I/O."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from athena_refresh.assertions import ExpressionError, evaluate, failure_record, parse
from athena_refresh.checks import ConfigError
from athena_refresh.jobspec import AssertionsSpec

ROW = {"flights": 10, "on_time": 7, "origin": "EWR", "delay": None, "share": "0.70", "ok": True}


@pytest.mark.parametrize(
    ("text", "holds"),
    [
        ("flights >= 0", True),
        ("on_time <= flights AND origin = 'EWR'", True),
        ("flights > 10 OR origin IN ('JFK', 'EWR')", True),
        ("NOT (flights = 10)", False),
        ("delay IS NULL", True),
        ("delay IS NOT NULL", False),
        ("delay > 0", False),  # NULL: not true, the row fails
        ("delay > 0 OR flights = 10", True),  # TRUE OR NULL is TRUE
        ("delay > 0 AND flights = 11", False),
        ("flights BETWEEN 5 AND 10", True),
        ("flights NOT BETWEEN 5 AND 10", False),
        ("origin NOT IN ('JFK')", True),
        ("on_time * 100 / flights >= 70", True),
        ("-flights < 0", True),
        ("flights % 3 = 1", True),
        ("share = 0.7", True),  # a decimal column's exact text compares as a number
        ("origin = 1", False),  # text against a number: never equal
        ("ok = TRUE", True),
        ("\"origin\" = 'EWR'", True),
        ("FLIGHTS = 10", True),  # keywords and names in any case
        ("flights / 0 > 1", False),  # division by zero is NULL
        ("missing_column IS NULL", True),
        ("origin = 'it''s'", False),
    ],
)
def test_a_row_expression_is_true_false_or_null_as_in_sql(text: str, holds: bool) -> None:
    assert parse(text).holds(ROW) is holds


def test_an_expression_names_its_columns() -> None:
    assert parse("on_time <= flights AND \"Origin Airport\" <> 'x'").columns == ("on_time", "flights", "Origin Airport")


@pytest.mark.parametrize(
    ("text", "where"),
    [("flights >", 10), ("flights = = 1", 11), ("(flights", 9), ("flights NOT 1", 13), ("a ! b", 3), ("a IS 1", 6)],
)
def test_an_expression_that_does_not_parse_says_where(text: str, where: int) -> None:
    with pytest.raises(ExpressionError) as caught:
        parse(text)
    assert caught.value.position + 1 == where and f"at character {where} of {text!r}" in str(caught.value)


def test_each_assertion_counts_its_failing_rows() -> None:
    rows: list[dict[str, Any]] = [
        {"k": "a", "v": 1},
        {"k": "a", "v": None},
        {"k": "b", "v": -3},
        {"k": "z", "v": 2},
    ]
    spec = AssertionsSpec(
        rows_at_least=5,
        rows_at_most=3,
        not_null=("v",),
        unique=("k",),
        accepted_values={"k": ("a", "b")},
        expressions=("v >= 0",),
    )
    failures = evaluate(spec, rows)
    assert [(f.assertion, f.failing) for f in failures] == [
        ("rows_at_least 5", 4),
        ("rows_at_most 3", 4),
        ("not_null v", 1),
        ("unique k", 1),
        ("accepted_values k", 1),
        ("expression v >= 0", 2),  # -3 fails, and NULL is not true
    ]
    record = failure_record(failures, len(rows))
    assert record["type"] == "assertion" and record["failing_rows"] == 4 and record["row_count"] == 4
    assert record["error_message"].startswith("6 assertion(s) failed on 4 row(s): rows_at_least 5: 4 row(s);")
    assert evaluate(AssertionsSpec(rows_at_least=1, expressions=("v IS NULL OR v >= -3",)), rows) == []


def test_accepted_values_pass_null_and_compare_numbers_as_numbers() -> None:
    rows = [{"n": 1}, {"n": Decimal("2.0")}, {"n": None}, {"n": "3"}]
    assert evaluate(AssertionsSpec(accepted_values={"n": (1, 2, 3)}), rows) == []


@pytest.mark.parametrize(
    ("keys", "problem"),
    [
        ({"rows_at_least": -1}, "assertions.rows_at_least: must be"),
        ({"not_null": ["Bad Name"]}, "assertions.not_null: must be"),
        ({"accepted_values": {"k": []}}, "assertions.accepted_values: must be"),
        ({"expressions": ["v >"]}, "assertions.expressions: must be a row expression"),
    ],
)
def test_a_bad_assertion_is_refused_naming_its_key(keys: dict[str, Any], problem: str) -> None:
    with pytest.raises(ConfigError) as caught:
        AssertionsSpec(**keys)
    assert caught.value.problems[0].startswith(problem)


def test_the_assertions_round_trip_through_the_catalogs_typed_json() -> None:
    """Synth writes the spec as typed JSON (``as_raw``); the function's cold start reads it back, every rule run."""
    import json

    from athena_refresh.checks import Labels
    from athena_refresh.job_defaults import spec_of
    from athena_refresh.jobspec import JobSpec, as_raw

    guards = AssertionsSpec(rows_at_least=1, not_null=("a",), accepted_values={"a": (1, "x")}, expressions=("a >= 0",))
    spec = spec_of(
        job_name="j",
        schedule_expression="cron(0/30 * * * ? *)",
        database="d",
        table="t",
        workgroup="w",
        sql="SELECT 1 AS a",
        assertions=guards,
    )
    back = JobSpec.from_context(json.loads(json.dumps(as_raw(spec))), labels=Labels(""))
    assert back.assertions == guards
