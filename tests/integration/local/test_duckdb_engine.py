"""local.emulators.duckdb_engine: the job's real Trino SQL on the real flights data, with Athena's observable behaviour."""

from __future__ import annotations

import datetime as dt
import json
import multiprocessing
import uuid
from pathlib import Path
from typing import Any

import duckdb
import pytest

from athena_refresh.engine import Column, QueryEngine, QueryExecution, QueryResult, wait_for_query
from athena_refresh.errors import QueryEngineError, QueryFailedError, ResultTypeError
from local.emulators.duckdb_engine import DuckDBQueryEngine, prepare_query
from sample_data.flights import ensure_flights_table
from tests.sample_jobs import FLIGHTS, fixture_job

JOB_QUERY = fixture_job(FLIGHTS).query  # the flights-dashboard sample's (tests/fixtures/jobs), whatever jobs/ holds
JOB_SQL: str = JOB_QUERY.text  # window start, end, then its first and last UTC date (the partition filter)


def window(start: str, end: str) -> list[str]:
    """The job's parameters for the window ``[start, end)`` ('YYYY-MM-DD HH:MM:SS'), as Settings binds them."""
    last = dt.datetime.fromisoformat(end) - dt.timedelta(seconds=1)
    values = {
        "window_start": f"'{start}'",
        "window_end": f"'{end}'",
        "window_first_date": f"'{start[:10]}'",
        "window_last_date": f"'{last:%Y-%m-%d}'",
    }
    return [values[name] for name in JOB_QUERY.parameter_order]


WINDOW_NOV = window("2013-11-21 00:30:00", "2013-11-22 00:30:00")
WINDOW_JUL = window("2013-07-04 12:00:00", "2013-07-05 12:00:00")
EXPECTED_COLUMNS = (
    Column("origin", "varchar"),
    Column("flights", "bigint"),
    Column("delayed_departures", "bigint"),
    Column("cancelled", "bigint"),
    Column("avg_dep_delay_min", "double"),
    Column("p90_arr_delay_min", "double"),
    Column("worst_delay_dest", "varchar"),
)


@pytest.fixture(scope="session")
def flights_table() -> Path:
    """The repository's cached table directory (dt=YYYY-MM-DD/data.parquet), built once per session (and once ever)."""
    return ensure_flights_table()


@pytest.fixture(scope="session")
def data_dir(flights_table: Path) -> Path:
    return flights_table.parent


@pytest.fixture()
def state_dir(tmp_path: Path) -> Path:
    return tmp_path / "engine-state"


@pytest.fixture()
def engine(data_dir: Path, state_dir: Path) -> DuckDBQueryEngine:
    with DuckDBQueryEngine(data_dir=data_dir, state_dir=state_dir) as instance:
        yield instance


def token(label: str) -> str:
    """A ClientRequestToken of Athena's length (32..128) that is unique per test run."""
    return f"{label}-{uuid.uuid4().hex}"


def run(engine: DuckDBQueryEngine, sql: str, parameters: list[str] | None = None) -> tuple[str, QueryExecution]:
    query_execution_id = engine.start_query(sql=sql, parameters=parameters or [], client_request_token=token("t"))
    return query_execution_id, engine.get_query(query_execution_id)


def succeeded_result(engine: DuckDBQueryEngine, sql: str, parameters: list[str] | None = None) -> QueryResult:
    query_execution_id, execution = run(engine, sql, parameters)
    execution.raise_for_state()
    assert execution.state == "SUCCEEDED"
    return engine.get_results(query_execution_id)


def direct_counts(flights_table: Path, window: list[str]) -> dict[str, int]:
    """Flights per origin in the window, computed by hand (independent of sqlglot and the engine)."""
    with duckdb.connect() as con:
        rows = con.execute(
            "SELECT origin, count(*) FROM read_parquet(?, hive_partitioning = true)"
            " WHERE sched_dep_utc >= CAST(? AS TIMESTAMP) AND sched_dep_utc < CAST(? AS TIMESTAMP) GROUP BY origin",
            [str(flights_table / "**" / "*.parquet"), window[0].strip("'"), window[1].strip("'")],
        ).fetchall()
    return dict(rows)


# --------------------------------------------------------------------------------------------------
# The real query
# --------------------------------------------------------------------------------------------------
def test_is_a_query_engine(engine: DuckDBQueryEngine) -> None:
    assert isinstance(engine, QueryEngine)


def test_real_job_sql_returns_one_row_per_origin(engine: DuckDBQueryEngine, flights_table: Path) -> None:
    # WHEN the job's SQL from cdk.json runs with a one-day window
    query_execution_id, execution = run(engine, JOB_SQL, WINDOW_NOV)
    result = engine.get_results(query_execution_id)

    # THEN Athena-shaped columns, one row per NYC airport, numbers that agree with a hand-written count
    assert execution.state == "SUCCEEDED" and execution.error is None
    assert result.columns == EXPECTED_COLUMNS
    assert [row["origin"] for row in result.rows] == ["EWR", "JFK", "LGA"]
    assert {row["origin"]: row["flights"] for row in result.rows} == direct_counts(flights_table, WINDOW_NOV)
    for row in result.rows:
        assert type(row["flights"]) is int and 200 < row["flights"] < 500
        assert 0 <= row["cancelled"] <= row["flights"] and 0 <= row["delayed_departures"] <= row["flights"]
        assert type(row["avg_dep_delay_min"]) is float and -30 < row["avg_dep_delay_min"] < 120
        assert row["avg_dep_delay_min"] == round(row["avg_dep_delay_min"], 2)
        assert type(row["p90_arr_delay_min"]) is float
        assert isinstance(row["worst_delay_dest"], str) and len(row["worst_delay_dest"]) == 3
    json.dumps(result.rows, allow_nan=False)  # JSON-safe as stored by the job


def test_statistics_report_the_bytes_athena_would_scan(engine: DuckDBQueryEngine, data_dir: Path) -> None:
    # The accounting itself is checked by hand in test_scan_accounting.py.
    from local.emulators.duckdb_engine.scan import scanned_bytes

    _, execution = run(engine, JOB_SQL, WINDOW_NOV)

    with duckdb.connect() as con:
        expected = scanned_bytes(con, data_dir / "flights", JOB_SQL, parameters=WINDOW_NOV)
    table_files = [p for p in (data_dir / "flights").rglob("*.parquet") if not p.name.startswith(("_", "."))]
    stats = execution.statistics
    # The job's columns in the row groups (and partitions) its window can touch: a fraction of the table.
    assert stats.data_scanned_bytes == expected.bytes
    assert 0 < stats.data_scanned_bytes < sum(p.stat().st_size for p in table_files)
    assert set(expected.columns) == {"origin", "dep_delay", "dep_time", "arr_delay", "dest", "sched_dep_utc"}
    assert 0 < expected.row_groups_read < expected.row_groups_total
    assert stats.total_execution_time_ms == stats.query_queue_time_ms + stats.engine_execution_time_ms
    assert 0 <= stats.engine_execution_time_ms < 5000


def test_two_windows_give_different_numbers(engine: DuckDBQueryEngine, flights_table: Path) -> None:
    november = succeeded_result(engine, JOB_SQL, WINDOW_NOV).rows
    july = succeeded_result(engine, JOB_SQL, WINDOW_JUL).rows

    assert [r["origin"] for r in july] == ["EWR", "JFK", "LGA"]
    assert {r["origin"]: r["flights"] for r in july} == direct_counts(flights_table, WINDOW_JUL)
    assert [(r["flights"], r["delayed_departures"]) for r in november] != [
        (r["flights"], r["delayed_departures"]) for r in july
    ]


def test_rerunning_a_query_gives_identical_numbers(engine: DuckDBQueryEngine, data_dir: Path, state_dir: Path) -> None:
    whole_year = window("2013-01-01 00:00:00", "2014-01-02 00:00:00")  # in UTC the year ends on 2014-01-01
    first = succeeded_result(engine, JOB_SQL, whole_year).rows
    with DuckDBQueryEngine(data_dir=data_dir, state_dir=state_dir) as other:
        second = succeeded_result(other, JOB_SQL, whole_year).rows

    assert sum(r["flights"] for r in first) == 336_776
    assert first == second  # approx_percentile included


def test_window_bounds_are_minute_exact(engine: DuckDBQueryEngine) -> None:
    # The first flight of the year is scheduled at 2013-01-01 10:15 UTC (05:15 in New York).
    def total(start: str, end: str) -> int:
        return sum(r["flights"] for r in succeeded_result(engine, JOB_SQL, window(start, end)).rows)

    assert total("2013-01-01 10:00:00", "2013-01-01 10:15:00") == 0
    assert total("2013-01-01 10:00:00", "2013-01-01 10:16:00") > 0


def test_empty_window_returns_no_rows(engine: DuckDBQueryEngine) -> None:
    result = succeeded_result(engine, JOB_SQL, window("2012-01-01 00:00:00", "2012-01-02 00:00:00"))

    assert result.columns == EXPECTED_COLUMNS and result.rows == []


# --------------------------------------------------------------------------------------------------
# Idempotency and adoption
# --------------------------------------------------------------------------------------------------
def test_same_token_same_request_returns_the_same_id(engine: DuckDBQueryEngine, state_dir: Path) -> None:
    shared = token("idem")

    first = engine.start_query(sql=JOB_SQL, parameters=WINDOW_NOV, client_request_token=shared)
    second = engine.start_query(sql=JOB_SQL, parameters=tuple(WINDOW_NOV), client_request_token=shared)

    assert first == second
    assert [p.name for p in (state_dir / "queries").glob("*.json")] == [f"{first}.json"]


@pytest.mark.parametrize(
    ("sql", "parameters"),
    [(JOB_SQL, WINDOW_JUL), (JOB_SQL.replace("ORDER BY origin", "ORDER BY origin DESC"), WINDOW_NOV)],
    ids=["changed-parameters", "changed-sql"],
)
def test_same_token_different_request_is_rejected(engine: DuckDBQueryEngine, sql: str, parameters: list[str]) -> None:
    shared = token("idem")
    first = engine.start_query(sql=JOB_SQL, parameters=WINDOW_NOV, client_request_token=shared)

    with pytest.raises(QueryEngineError, match="Idempotent parameters do not match") as caught:
        engine.start_query(sql=sql, parameters=parameters, client_request_token=shared)

    assert caught.value.operation == "StartQueryExecution"
    assert caught.value.query_execution_id == first


def test_another_instance_adopts_the_query_and_its_results(
    engine: DuckDBQueryEngine, data_dir: Path, state_dir: Path
) -> None:
    # GIVEN a query started by one engine (think: a Lambda invocation that then timed out)
    shared = token("adopt")
    query_execution_id = engine.start_query(sql=JOB_SQL, parameters=WINDOW_NOV, client_request_token=shared)
    original = engine.get_results(query_execution_id)

    # WHEN a fresh engine on the same state directory (think: the next racer) looks it up
    with DuckDBQueryEngine(data_dir=data_dir, state_dir=state_dir) as successor:
        adopted = successor.get_query(query_execution_id)
        results = successor.get_results(query_execution_id)
        restarted = successor.start_query(sql=JOB_SQL, parameters=WINDOW_NOV, client_request_token=shared)

    # THEN it sees the same execution and results, and the same token maps to the same id
    assert adopted.state == "SUCCEEDED"
    assert adopted.statistics == engine.get_query(query_execution_id).statistics
    assert results == original
    assert restarted == query_execution_id


def test_loser_of_a_token_race_returns_the_winner_id(
    engine: DuckDBQueryEngine, data_dir: Path, state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a winner that published the token while the loser was already past its token check
    shared = token("race")
    winner = engine.start_query(sql=JOB_SQL, parameters=WINDOW_NOV, client_request_token=shared)
    loser = DuckDBQueryEngine(data_dir=data_dir, state_dir=state_dir)
    monkeypatch.setattr(loser, "_read_token", lambda _token: None)

    # WHEN the loser runs the same request, then a different one, with that token
    same = loser.start_query(sql=JOB_SQL, parameters=WINDOW_NOV, client_request_token=shared)
    with pytest.raises(QueryEngineError, match="Idempotent parameters do not match"):
        loser.start_query(sql=JOB_SQL, parameters=WINDOW_JUL, client_request_token=shared)

    # THEN it gets the winner's id, and its own executions vanished (nobody ever saw their ids)
    assert same == winner
    assert sorted(p.name for p in (state_dir / "queries").iterdir()) == [f"{winner}.json"]
    assert sorted(p.name for p in (state_dir / "results").iterdir()) == [f"{winner}.json"]
    assert len(list((state_dir / "tokens").iterdir())) == 1
    loser.close()


def _start_in_subprocess(data_dir: str, state_dir: str, shared_token: str, barrier: Any, out: Any) -> None:
    engine = DuckDBQueryEngine(data_dir=Path(data_dir), state_dir=Path(state_dir))
    barrier.wait(timeout=60)
    out.put(engine.start_query(sql=JOB_SQL, parameters=WINDOW_NOV, client_request_token=shared_token))


@pytest.mark.slow
def test_concurrent_processes_with_one_token_get_one_query(data_dir: Path, state_dir: Path) -> None:
    ctx = multiprocessing.get_context("spawn")  # no fork after DuckDB started its threads
    barrier, out = ctx.Barrier(2), ctx.Queue()  # each child imports duckdb/sqlglot/boto3 (~1 s): keep it to 2
    shared = token("race")
    workers = [
        ctx.Process(target=_start_in_subprocess, args=(str(data_dir), str(state_dir), shared, barrier, out))
        for _ in range(2)
    ]
    for worker in workers:
        worker.start()
    ids = [out.get(timeout=120) for _ in workers]
    for worker in workers:
        worker.join(timeout=60)

    assert all(worker.exitcode == 0 for worker in workers)
    assert len(set(ids)) == 1
    assert [p.name for p in (state_dir / "queries").glob("*.json")] == [f"{ids[0]}.json"]


# --------------------------------------------------------------------------------------------------
# Simulated server-side duration
# --------------------------------------------------------------------------------------------------
class FakeClock:
    def __init__(self, now_ms: int = 1_700_000_000_000) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms

    def sleep_s(self, seconds: float) -> None:
        self.now_ms += round(seconds * 1000)


def test_simulated_duration_reports_queued_then_running_then_succeeded(data_dir: Path, state_dir: Path) -> None:
    clock = FakeClock()
    t0 = clock.now_ms
    with DuckDBQueryEngine(data_dir=data_dir, state_dir=state_dir, simulated_duration_ms=10_000, clock_ms=clock) as eng:
        query_execution_id = eng.start_query(sql=JOB_SQL, parameters=WINDOW_NOV, client_request_token=token("slow"))

        def state_at(offset_ms: int) -> str:
            clock.now_ms = t0 + offset_ms
            return eng.get_query(query_execution_id).state

        assert [state_at(ms) for ms in (0, 999, 1000, 9_999)] == ["QUEUED", "QUEUED", "RUNNING", "RUNNING"]
        with pytest.raises(QueryEngineError, match="RUNNING"):
            eng.get_results(query_execution_id)
        assert state_at(10_000) == "SUCCEEDED"
        done = eng.get_query(query_execution_id)
        assert done.statistics.total_execution_time_ms >= 10_000
        assert done.statistics.query_queue_time_ms == 1_000
        assert len(eng.get_results(query_execution_id).rows) == 3

        # a second instance (any simulated duration of its own) sees the same timeline: it is the query's
        clock.now_ms = t0 + 5_000
        with DuckDBQueryEngine(data_dir=data_dir, state_dir=state_dir, clock_ms=clock) as other:
            assert other.get_query(query_execution_id).state == "RUNNING"


def test_wait_for_query_polls_the_simulated_query_to_success(data_dir: Path, state_dir: Path) -> None:
    clock = FakeClock()
    seen: list[str] = []
    with DuckDBQueryEngine(data_dir=data_dir, state_dir=state_dir, simulated_duration_ms=3_000, clock_ms=clock) as eng:
        query_execution_id = eng.start_query(sql=JOB_SQL, parameters=WINDOW_NOV, client_request_token=token("wait"))

        final = wait_for_query(
            eng,
            query_execution_id,
            deadline_ms=clock.now_ms + 60_000,
            clock_ms=clock,
            sleep_s=clock.sleep_s,
            on_poll=lambda execution: seen.append(execution.state),
        )

    assert final.state == "SUCCEEDED"
    assert seen[0] == "QUEUED" and "RUNNING" in seen and seen[-1] == "SUCCEEDED"


# --------------------------------------------------------------------------------------------------
# Parameters: bound as literals into the parsed tree, never formatted into the SQL text
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "hostile",
    [
        "1; DROP TABLE flights",
        "'2013-01-01' OR 1=1",
        "dep_delay",
        "(SELECT max(sched_dep_utc) FROM flights)",
        "now()",
        "'a' || 'b'",
        "?",
        "CAST(dep_delay AS varchar)",
        "'unterminated",
    ],
)
def test_non_literal_parameter_fails_the_query_as_a_user_error(engine: DuckDBQueryEngine, hostile: str) -> None:
    query_execution_id, execution = run(engine, JOB_SQL, [hostile, *WINDOW_NOV[1:]])

    assert execution.state == "FAILED"
    assert execution.error is not None
    assert (execution.error.error_category, execution.error.retryable) == (2, False)
    assert "INVALID_PARAMETER_USAGE" in execution.error.error_message
    assert "execution parameter 1" in execution.error.error_message
    with pytest.raises(QueryFailedError) as caught:
        execution.raise_for_state()
    assert caught.value.error_category == 2
    with pytest.raises(QueryEngineError, match="FAILED"):
        engine.get_results(query_execution_id)
    # and the data is untouched
    assert succeeded_result(engine, "SELECT count(*) AS n FROM flights").rows == [{"n": 336_776}]


@pytest.mark.parametrize(
    ("literal", "expected_type", "expected_value"),
    [
        ("42", "integer", 42),
        ("-1.5", "decimal", "-1.5"),
        ("-2.5e0", "double", -2.5),
        ("'it''s'", "varchar", "it's"),
        ("NULL", "unknown", None),
        ("true", "boolean", True),
        ("TIMESTAMP '2013-01-01 05:15:00'", "timestamp", "2013-01-01T05:15:00.000"),
        ("DATE '2013-07-04'", "date", "2013-07-04"),
        ("CAST('7' AS bigint)", "bigint", 7),
    ],
)
def test_literal_parameters_are_bound(
    engine: DuckDBQueryEngine, literal: str, expected_type: str, expected_value: Any
) -> None:
    result = succeeded_result(engine, "SELECT ? AS v", [literal])

    assert result.columns == (Column("v", expected_type),)
    assert result.rows == [{"v": expected_value}]


def test_placeholders_bind_in_text_order_even_inside_a_cte() -> None:
    prepared = prepare_query("WITH w AS (SELECT ? AS a) SELECT a, ? AS b FROM w WHERE a < ?", ["1", "2", "3"])

    assert prepared.duckdb_sql == "WITH w AS (SELECT 1 AS a) SELECT a, 2 AS b FROM w WHERE a < 3"
    assert prepared.tables == ()


def test_qualified_table_names_resolve_to_the_parquet_table() -> None:
    prepared = prepare_query('SELECT count(*) AS n FROM "awsdatacatalog"."flights_demo"."flights"', [])

    assert prepared.duckdb_sql == 'SELECT COUNT(*) AS n FROM "flights"'
    assert prepared.tables == ("flights",)


@pytest.mark.parametrize("parameters", [[WINDOW_NOV[0]], [*WINDOW_NOV, "'extra'"], []])
def test_wrong_parameter_count_fails(engine: DuckDBQueryEngine, parameters: list[str]) -> None:
    _, execution = run(engine, JOB_SQL, parameters)

    assert execution.state == "FAILED"
    assert execution.error.error_category == 2
    assert (
        f"Incorrect number of parameters: expected {len(WINDOW_NOV)} but found {len(parameters)}"
        in execution.error.error_message
    )


def test_request_validation_mirrors_the_athena_engine(engine: DuckDBQueryEngine) -> None:
    with pytest.raises(ValueError, match="32..128"):
        engine.start_query(sql=JOB_SQL, parameters=WINDOW_NOV, client_request_token="short")
    with pytest.raises(TypeError, match="not one str"):
        engine.start_query(sql=JOB_SQL, parameters=WINDOW_NOV[0], client_request_token=token("p"))
    with pytest.raises(QueryEngineError, match="non-empty"):
        engine.start_query(sql=JOB_SQL, parameters=["", ""], client_request_token=token("p"))


# --------------------------------------------------------------------------------------------------
# Failures and values
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("sql", "code"),
    [
        ("SELEC origin FROM flights", "SYNTAX_ERROR"),
        ("SELECT 1; SELECT 2", "SYNTAX_ERROR"),
        ("SELECT no_such_column FROM flights", "COLUMN_NOT_FOUND"),
        ("SELECT * FROM no_such_table", "TABLE_NOT_FOUND"),
        ("SELECT * FROM read_csv('/etc/passwd')", "GENERIC_USER_ERROR"),
        ("DROP TABLE flights", "NOT_SUPPORTED"),
        ("SELECT sum(CAST(9223372036854775807 AS bigint)) AS s FROM flights", "NUMERIC_VALUE_OUT_OF_RANGE"),
    ],
)
def test_bad_sql_fails_with_a_user_error(engine: DuckDBQueryEngine, sql: str, code: str) -> None:
    _, execution = run(engine, sql)

    assert execution.state == "FAILED"
    assert execution.error is not None
    assert execution.error.error_category == 2 and execution.error.error_type == 1000
    assert execution.error.retryable is False
    assert execution.error.error_message.startswith(f"{code}: ")
    assert execution.error.state_change_reason == execution.error.error_message
    assert "\x1b[" not in execution.error.error_message


def test_nulls_come_back_as_none(engine: DuckDBQueryEngine) -> None:
    result = succeeded_result(
        engine,
        "SELECT dep_time, arr_delay, tailnum, CAST(NULL AS double) AS d FROM flights"
        " WHERE dep_time IS NULL AND tailnum IS NULL ORDER BY sched_dep_utc LIMIT 3",
    )

    assert [c.type for c in result.columns] == ["integer", "double", "varchar", "double"]
    assert len(result.rows) == 3
    assert all(row == {"dep_time": None, "arr_delay": None, "tailnum": None, "d": None} for row in result.rows)


def test_values_are_converted_like_athena_values(engine: DuckDBQueryEngine) -> None:
    result = succeeded_result(
        engine,
        "SELECT sched_dep_utc, CAST(sched_dep_utc AS date) AS d, count(*) AS n, sum(flight) AS s,"
        " CAST(1.50 AS decimal(10, 2)) AS dec, dep_delay > 0 AS Late, 'x' FROM flights"
        " WHERE sched_dep_utc = TIMESTAMP '2013-01-01 10:15:00' GROUP BY 1, 2, 5, 6, 7 ORDER BY 1, 6",
    )

    assert result.columns == (
        Column("sched_dep_utc", "timestamp"),
        Column("d", "date"),
        Column("n", "bigint"),
        Column("s", "bigint"),  # DuckDB HUGEINT, Trino bigint
        Column("dec", "decimal"),
        Column("late", "boolean"),  # unquoted names are lowercase, as Athena reports them
        Column("_col6", "varchar"),  # Trino's name for an unaliased expression
    )
    assert result.rows == [
        {"sched_dep_utc": "2013-01-01T10:15:00.000", "d": "2013-01-01", "n": 1, "s": 1545, "dec": "1.50",
         "late": True, "_col6": "x"},
    ]  # fmt: skip


def test_duplicate_column_names_are_refused_like_the_athena_engine(engine: DuckDBQueryEngine) -> None:
    query_execution_id, _ = run(engine, "SELECT origin AS a, dest AS a FROM flights LIMIT 1")

    with pytest.raises(ResultTypeError, match="duplicate column name"):
        engine.get_results(query_execution_id)


@pytest.mark.parametrize("query_execution_id", ["5f0b9c1e-7d2a-4c3b-9e8f-0a1b2c3d4e5f", "../../etc/passwd", ""])
def test_unknown_query_id_is_an_engine_error(engine: DuckDBQueryEngine, query_execution_id: str) -> None:
    with pytest.raises(QueryEngineError, match="was not found") as caught:
        engine.get_query(query_execution_id)
    assert caught.value.operation == "GetQueryExecution"
    with pytest.raises(QueryEngineError, match="was not found"):
        engine.get_results(query_execution_id)


def test_one_query_is_fast(engine: DuckDBQueryEngine) -> None:
    run(engine, JOB_SQL, WINDOW_NOV)  # warm: connection and view

    _, execution = run(engine, JOB_SQL, WINDOW_JUL)

    assert execution.statistics.engine_execution_time_ms < 1000
