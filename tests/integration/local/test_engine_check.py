"""local.emulators.duckdb_engine.analysis: the SQL check before every local run; the run refuses what the check
refuses, in the check's words, and answers what the check only notes."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import duckdb
import pytest

from athena_sql.analyzer import check_query
from athena_sql.diagnostics import Diagnostic
from local.emulators.duckdb_engine import DuckDBQueryEngine
from local.emulators.duckdb_engine.analysis import _inlined, _original_position, check_statement, result_types

TABLES = {"t": {"s": "varchar", "i": "integer"}}


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DuckDBQueryEngine]:
    root = tmp_path_factory.mktemp("check")
    data = root / "data"
    (data / "t").mkdir(parents=True)
    with duckdb.connect() as con:
        con.execute(f"COPY (SELECT 'abc' AS s, 17::INTEGER AS i) TO '{data / 't' / 'part.parquet'}' (FORMAT parquet)")
    with DuckDBQueryEngine(data_dir=data, state_dir=root / "state") as instance:
        yield instance


def run(engine: DuckDBQueryEngine, sql: str, parameters: list[str] | None = None) -> tuple[str, str]:
    """(the execution's state, its error message or '')."""
    query_id = engine.start_query(sql=sql, parameters=parameters or [], client_request_token=uuid.uuid4().hex)
    execution = engine.get_query(query_id)
    return execution.state, execution.error.error_message if execution.error else ""


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT nvl(s, 'x') FROM t",
        "SELECT s FROM t LIMIT 1 OFFSET 0",
        "SELECT len(s) FROM t",
        "SELECT s FROM t WHERE i IN [1, 2]",
    ],
)
def test_what_the_check_refuses_the_run_refuses_in_its_words(engine: DuckDBQueryEngine, sql: str) -> None:
    """The check's first refusal, as ``CODE: line L:C: message`` (the words ``check`` prints)."""
    first = check_query(sql, tables=TABLES, parameters={}).refusals[0]
    assert run(engine, sql) == ("FAILED", f"{first.error_class}: line {first.line}:{first.column}: {first.message}")


def test_a_refusal_after_a_parameter_is_located_in_the_statements_own_text(engine: DuckDBQueryEngine) -> None:
    """The parameters are checked as the literals Athena binds (``'abc'`` is a varchar(3)); the position is the
    statement's (the comparison's operator, as Trino locates it), not the inlined text's."""
    sql = "SELECT s FROM t WHERE s = ? AND i = 'x'"
    state, message = run(engine, sql, ["'a much longer literal than one character'"])
    assert state == "FAILED"
    assert message.startswith("TYPE_MISMATCH: line 1:35: Cannot apply operator: integer = varchar(1)")
    assert sql[34:] == "= 'x'"


def test_a_parameters_type_is_its_literals() -> None:
    refusal = check_statement("SELECT s FROM t WHERE i = ?", ["'17'"], TABLES).refusal
    assert refusal is not None and refusal.error_code == "TYPE_MISMATCH"
    assert refusal.message.startswith("line 1:25: Cannot apply operator: integer = varchar(2)")


def test_a_position_inside_an_inlined_parameter_is_its_placeholders() -> None:
    sql = "SELECT ?,\n  ?, i FROM t"
    text, segments = _inlined(sql, ["'abc'", "'de'"])
    assert text == "SELECT 'abc',\n  'de', i FROM t"
    inside, after = Diagnostic(2, 4, "X", "", ""), Diagnostic(2, 9, "X", "", "")
    assert _original_position(sql, text, segments, inside) == (2, 3)
    assert _original_position(sql, text, segments, after) == (2, 6)


def test_a_constant_run_time_error_has_no_location(engine: DuckDBQueryEngine) -> None:
    """Trino raises DIVISION_BY_ZERO while executing: its message has no ``line:column``."""
    assert run(engine, "SELECT 17 / 0 FROM t") == ("FAILED", "DIVISION_BY_ZERO: Division by zero")


def test_an_analysis_error_comes_before_a_constant_run_time_error() -> None:
    refusal = check_statement("SELECT 17 / 0, nvl(s, 'x') FROM t", [], TABLES).refusal
    assert refusal is not None and refusal.error_code == "FUNCTION_NOT_FOUND"


def test_what_the_check_only_notes_runs(engine: DuckDBQueryEngine) -> None:
    """A table whose columns the check does not know (a note, not a refusal): the run answers."""
    result = check_query("SELECT count(*) FROM other", tables=TABLES, parameters={})
    assert not result.refused and result.unchecked
    assert check_statement("SELECT count(*) FROM other", [], TABLES).refusal is None
    assert run(engine, "SELECT count(*) AS n FROM t WHERE s = ?", ["'abc'"]) == ("SUCCEEDED", "")


def test_a_parameter_that_is_not_a_literal_is_refused_by_the_binder_not_read_by_the_check(
    engine: DuckDBQueryEngine,
) -> None:
    state, message = run(engine, "SELECT s FROM t WHERE s = ?", ["'a' OR 1=1"])
    assert state == "FAILED" and message.startswith("INVALID_PARAMETER_USAGE: execution parameter 1")


def test_result_types_are_the_checks_where_it_derived_them() -> None:
    assert result_types(("varchar(5)", None), ("varchar", "timestamp(0)")) == ("varchar(5)", "timestamp(0)")
    assert result_types(("array(varchar(7))", "char(3)"), ("array(varchar)", "varchar")) == (
        "array(varchar(7))",
        "char(3)",
    )
    assert result_types(("decimal(5,1)", "not a type"), ("decimal(38,0)", "bigint")) == ("decimal(5,1)", "bigint")
    assert result_types((), ("varchar",)) == ("varchar",)


def test_the_engine_reports_trinos_bounded_types(engine: DuckDBQueryEngine) -> None:
    """StringFunctions.java at 00e6f8b957a4352553a70648bb3ff9daf5d12d5c: replace's ``x + z * (x + 1)``, split's
    ``array(varchar(x))``; a column's unbounded varchar stays unbounded."""
    sql = "SELECT replace('aaa', 'a', 'aa') AS r, split(s, 'b') AS p, upper(s) AS u, reverse('abc') AS v FROM t"
    query_id = engine.start_query(sql=sql, parameters=[], client_request_token=uuid.uuid4().hex)
    assert engine.get_query(query_id).state == "SUCCEEDED"
    assert engine.column_types(query_id) == ("varchar(11)", "array(varchar)", "varchar", "varchar(3)")


def test_a_failure_of_the_check_itself_runs_the_statement(monkeypatch: pytest.MonkeyPatch) -> None:
    """The check never raises by contract; if it did, the engine would run the statement unchecked, not fail it."""
    from local.emulators.duckdb_engine import analysis

    def broken(text: str, tables: object) -> None:
        raise RuntimeError("a bug in the check")

    monkeypatch.setattr(analysis, "_checked", broken)
    checked = check_statement("SELECT nvl(s, 'x') FROM t", [], TABLES)
    assert checked.refusal is None and not checked.result.refused
