"""The job-level SQL check (stacks.sql_check): what the analyzer is given for a job, and what it says about it."""

from __future__ import annotations

from pathlib import Path

import pytest

from athena_sql.diagnostics import CheckResult
from stacks import sql_check
from stacks.jobs import load_job
from stacks.stack_settings import StackSettings
from tests.sample_jobs import CARRIERS, FLIGHTS, TOP_ROUTES, fixture_job


@pytest.mark.parametrize(
    ("glue", "trino"),
    [
        ("string", "varchar"),
        ("int", "integer"),
        ("bigint", "bigint"),
        ("double", "double"),
        ("float", "real"),
        ("timestamp", "timestamp(3)"),
        ("date", "date"),
        ("boolean", "boolean"),
        ("binary", "varbinary"),
        ("decimal(10,2)", "decimal(10,2)"),
        ("varchar(12)", "varchar(12)"),
        ("array<string>", "array(varchar)"),
        ("map<string,int>", "map(varchar, integer)"),
        ("struct<a:int,b:array<string>>", "row(a integer, b array(varchar))"),
        ("ARRAY<STRUCT<x:DOUBLE>>", "array(row(x double))"),
    ],
)
def test_glue_types_become_the_trino_types_athena_reads(glue: str, trino: str) -> None:
    assert sql_check.trino_type(glue) == trino


@pytest.mark.parametrize("glue", ["money", "uniontype<int,string>", "struct<a>", "map<string>"])
def test_an_unknown_glue_type_has_no_trino_type(glue: str) -> None:
    assert sql_check.trino_type(glue) is None


def test_a_sample_job_checks_against_the_stack_glue_columns_and_varchar_window_parameters() -> None:
    job = fixture_job(CARRIERS)
    tables = sql_check.job_tables(job, None)
    assert list(tables) == ["flights"]
    flights = tables["flights"]
    assert (flights["sched_dep_utc"], flights["flight"], flights["carrier"], flights["dt"]) == (
        "timestamp(3)",
        "integer",
        "varchar",
        "varchar",
    )
    parameters = sql_check.job_parameters(job)
    assert parameters["window_start"] == "'2013-01-01 00:00:00'"
    assert parameters["window_first_date"] == "'2013-01-01'"
    assert parameters["on_time_delay_min"] == "15"  # a constant is its text as written


def own_job(tmp_path: Path, columns: str) -> Path:
    folder = tmp_path / "jobs" / "own"
    folder.mkdir(parents=True)
    (folder / "query.sql").write_text("SELECT carrier FROM orders WHERE t >= :window_start\n")
    (folder / "job.toml").write_text(
        f'source = {{ database = "sales", table = "orders", location = "s3://bucket/orders/"{columns} }}\n'
        'schedule_expression = "cron(0 * * * ? *)"\n'
    )
    return folder


def test_an_own_glue_table_checks_against_its_declared_columns(tmp_path: Path) -> None:
    job = load_job(
        own_job(tmp_path, ', columns = { carrier = "string", t = "timestamp", x = "geometry" }'), StackSettings()
    )
    assert sql_check.job_tables(job, None) == {"orders": {"carrier": "varchar", "t": "timestamp(3)", "x": "geometry"}}
    # columns known elsewhere (a caller read them from the table's files) win over none
    assert sql_check.job_tables(job, {"carrier": "string"}) == {"orders": {"carrier": "varchar"}}


def test_an_own_glue_table_without_columns_gives_the_analyzer_no_table(tmp_path: Path) -> None:
    job = load_job(own_job(tmp_path, ""), StackSettings())
    assert sql_check.job_tables(job, None) == {}


def test_check_job_sql_gives_the_user_text_and_the_job_inputs(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, object] = {}

    def fake(sql: str, *, tables: object, parameters: object) -> CheckResult:
        seen.update(sql=sql, tables=tables, parameters=parameters)
        return CheckResult()

    monkeypatch.setattr(sql_check, "check_query", fake)
    job = fixture_job(FLIGHTS)
    assert sql_check.check_job_sql(job, None) == CheckResult()
    assert seen["sql"] == (job.folder / "query.sql").read_text(encoding="utf-8")  # the user's text, :names and all
    assert seen["tables"] == sql_check.job_tables(job, None)
    assert seen["parameters"] == sql_check.job_parameters(job)


@pytest.mark.parametrize("name", [CARRIERS, FLIGHTS, TOP_ROUTES])
def test_the_fixture_jobs_pass_the_check(name: str) -> None:
    result = sql_check.check_job_sql(fixture_job(name), None)
    assert result.refusals == ()


def test_the_repositorys_jobs_pass_the_check() -> None:
    """Whatever jobs/ holds: every job's SQL is Athena's (the samples were fixed where they relied on DuckDB)."""
    from stacks.jobs import load_repo_jobs
    from tests.sample_jobs import REPO_ROOT

    for job in load_repo_jobs(REPO_ROOT)[1]:
        result = sql_check.check_job_sql(job, None)
        assert (job.job_name, result.refusals, result.unchecked) == (job.job_name, (), ())
