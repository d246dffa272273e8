"""``python -m tools.jobs run`` and ``check`` (tools/jobs/run.py, check.py) and the value-metrics cost warning
(stacks/value_metrics_cost.py), on job folders written under tmp_path and on the repository's own jobs."""

from __future__ import annotations

import io
import json
from dataclasses import replace
from pathlib import Path

import pytest

from athena_refresh.cost import load_prices
from athena_refresh.jobspec import ValueMetricsSpec
from sample_data.flights import ensure_flights_table
from stacks import value_metrics_cost
from stacks.jobs import load_repo_jobs
from tests.sample_jobs import load_fixture_jobs, repo_job_names
from tools.cost import monthly
from tools.cost.usage import AlarmCount, Durations, JobInputs, Scan
from tools.jobs import check, cli, run

REPO_ROOT = Path(__file__).resolve().parents[3]
SLOT = "2026-11-24T20:30Z"  # mapped onto 2013-11-24 20:30 by the sample's data_year

#: A job's settings but its source: the two-line job.toml's schedule (every other key defaulted), and the sample's
#: 24-hour window (the default is one period) so that each slot has rows.
FULL_SETTINGS = """\
schedule_expression = "cron(0/30 * * * ? *)"
window_s = 86400
"""

SAMPLE_SQL = """\
-- Departures per origin.
SELECT origin,
       count(*) AS flights,
       max_by(dest, dep_delay) AS worst_delay_dest
FROM flights
WHERE sched_dep_utc >= CAST(:window_start AS timestamp)
  AND sched_dep_utc < CAST(:window_end AS timestamp)
  AND dt BETWEEN :window_first_date AND :window_last_date
GROUP BY origin
ORDER BY origin
"""

OWN_SQL = """\
SELECT carrier, avg(dep_delay) AS avg_delay
FROM sales.orders
WHERE dt BETWEEN :window_first_date AND :window_last_date
GROUP BY carrier
"""


def write_job(
    jobs_dir: Path,
    name: str,
    sql: str = SAMPLE_SQL,
    *,
    source: str = 'source = "sample:flights"\n',
    extra: str = "",
) -> Path:
    """The one place job folders are written: ``jobs_dir/name/{job.toml,query.sql}``. ``source`` is the source's
    TOML (a sample gets its ``[sample]`` table), ``extra`` more TOML (tables) appended."""
    folder = jobs_dir / name
    folder.mkdir(parents=True, exist_ok=True)
    sample = "\n[sample]\ndata_year = 2013\n" if "sample:" in source else ""
    head, tables = (source, "") if source.startswith("source =") else ("", "\n" + source)
    (folder / "job.toml").write_text(head + FULL_SETTINGS + sample + tables + extra, encoding="utf-8")
    (folder / "query.sql").write_text(sql, encoding="utf-8")
    return folder


def own_source(columns: str | None) -> str:
    text = '[source]\ndatabase = "sales"\ntable = "orders"\nlocation = "s3://my-bucket/orders/"\n'
    return text + (f"columns = {columns}\n" if columns is not None else "")


def invoke(*argv: str) -> tuple[int, str, str]:
    """The subcommand as ``python -m tools.jobs`` runs it (the dispatcher's parser, these two modules)."""
    commands = {"run": run, "check": check}
    args = cli.build_parser(commands).parse_args(argv)
    out, err = io.StringIO(), io.StringIO()
    status = commands[args.command].execute(args, out, err)
    return status, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def data_dir() -> Path:
    """The sample's data directory (.cache/data), built once if missing (as `make data` does)."""
    return ensure_flights_table().parent


@pytest.fixture
def jobs_dir(tmp_path: Path) -> Path:
    return tmp_path / "jobs"


# --- run -------------------------------------------------------------------------------------------------------
def test_run_prints_rows_bytes_scanned_and_estimated_cost(jobs_dir: Path, data_dir: Path) -> None:
    write_job(jobs_dir, "dash")
    status, out, err = invoke("run", "--job", "dash", "--slot", SLOT, "--jobs-dir", str(jobs_dir))
    assert (status, err) == (0, "")
    assert "EWR" in out and "JFK" in out and "LGA" in out and "worst_delay_dest" in out
    summary = out.strip().splitlines()[-1]
    assert "dash, slot 2026-11-24T20:30:00Z (window 2013-11-23 20:30 .. 2013-11-24 20:30 UTC): 3 row(s)" in summary
    assert "bytes scanned" in summary and "estimated Athena cost $0.000048" in summary and "estimate" in summary


def test_run_formats_csv_and_json(jobs_dir: Path, data_dir: Path) -> None:
    write_job(jobs_dir, "dash")
    status, out, err = invoke("run", "--job", "dash", "--slot", SLOT, "--format", "csv", "--jobs-dir", str(jobs_dir))
    assert status == 0
    lines = out.splitlines()
    assert lines[0] == "origin,flights,worst_delay_dest" and [line.split(",")[0] for line in lines[1:]] == [
        "EWR",
        "JFK",
        "LGA",
    ]
    assert "bytes scanned" in err  # the summary stays out of the CSV
    status, out, _ = invoke("run", "--job", "dash", "--slot", SLOT, "--format", "json", "--jobs-dir", str(jobs_dir))
    document = json.loads(out)
    assert status == 0 and document["job"] == "dash" and document["slot"] == "2026-11-24T20:30:00Z"
    assert [row["origin"] for row in document["rows"]] == ["EWR", "JFK", "LGA"]
    assert document["parameters"]["window_end"] == "'2013-11-24 20:30:00'"
    assert document["data_scanned_bytes"] > 0 and document["estimated_cost_usd"] == pytest.approx(
        10 * 2**20 / 2**40 * 5
    )


def test_run_defaults_to_the_latest_firing(jobs_dir: Path, data_dir: Path) -> None:
    write_job(jobs_dir, "dash")
    status, out, _ = invoke("run", "--job", "dash", "--jobs-dir", str(jobs_dir))
    assert status == 0
    assert ":00:00Z" in out or ":30:00Z" in out  # a half-hourly slot


def test_run_misspelt_column_is_one_line_with_file_line_column_and_suggestion(jobs_dir: Path, data_dir: Path) -> None:
    write_job(jobs_dir, "top-routes", SAMPLE_SQL.replace("max_by(dest,", "max_by(dst,"))
    status, out, err = invoke("run", "--job", "top-routes", "--slot", SLOT, "--jobs-dir", str(jobs_dir))
    assert (status, out) == (1, "")
    assert err == 'jobs/top-routes/query.sql:4: column "dst" not found; did you mean "dest"?\n'


def test_run_other_engine_errors_name_the_file_and_job(jobs_dir: Path, data_dir: Path) -> None:
    write_job(jobs_dir, "dash", SAMPLE_SQL.replace("count(*) AS flights", "no_such_function(origin) AS flights"))
    status, _, err = invoke("run", "--job", "dash", "--slot", SLOT, "--jobs-dir", str(jobs_dir))
    assert status == 1 and len(err.splitlines()) == 1
    assert err.startswith("jobs/dash/query.sql") and "no_such_function" in err and "Traceback" not in err


def test_run_refuses_what_the_check_refuses_at_the_checks_line(jobs_dir: Path, data_dir: Path) -> None:
    """The engine runs the SQL check first; its position's line is query.sql's (the check's words, no DuckDB's)."""
    sql = SAMPLE_SQL.replace("count(*) AS flights", "nvl(origin, 'x') AS flights")
    write_job(jobs_dir, "dash", sql)
    line = next(number for number, text in enumerate(sql.splitlines(), start=1) if "nvl(" in text)
    status, out, err = invoke("run", "--job", "dash", "--slot", SLOT, "--jobs-dir", str(jobs_dir))
    assert (status, out) == (1, "")
    assert err == (
        f"jobs/dash/query.sql:{line}: Function 'nvl' not registered; Trino's way: coalesce(a, b)"
        " (job dash, local engine)\n"
    )


def test_run_without_data_says_where_to_put_it(jobs_dir: Path, tmp_path: Path) -> None:
    write_job(jobs_dir, "own", OWN_SQL, source=own_source(None))
    status, out, err = invoke("run", "--job", "own", "--jobs-dir", str(jobs_dir))
    assert (status, out) == (2, "")
    assert err == (
        "no Parquet files for table orders: put them under .cache/data/orders/ (or DIR/orders/ with --data DIR),"
        " Hive-partitioned like dt=2024-01-31/part-0.parquet\n"
    )


def test_run_reads_a_users_table_from_data_dir(jobs_dir: Path, tmp_path: Path, data_dir: Path) -> None:
    write_job(jobs_dir, "own", OWN_SQL, source=own_source(None))
    table = tmp_path / "data" / "orders"
    for day in ("2013-11-23", "2013-11-24"):
        (table / f"dt={day}").mkdir(parents=True)
        (table / f"dt={day}" / "part-0.parquet").write_bytes(
            (data_dir / "flights" / f"dt={day}" / "data.parquet").read_bytes()
        )
    status, out, err = invoke(
        "run",
        "--job",
        "own",
        "--slot",
        SLOT,
        "--data",
        str(tmp_path / "data"),
        "--format",
        "json",
        "--jobs-dir",
        str(jobs_dir),
    )
    assert (status, err) == (0, "")
    document = json.loads(out)
    assert document["parameters"] == {"window_first_date": "'2026-11-23'", "window_last_date": "'2026-11-24'"}
    assert document["rows"] == []  # a Glue source's window is the slot's own: 2026, not the data's 2013
    status, out, _ = invoke(
        "run",
        "--job",
        "own",
        "--slot",
        "2013-11-24T20:30Z",
        "--data",
        str(tmp_path / "data"),
        "--jobs-dir",
        str(jobs_dir),
    )
    assert status == 0 and "AA" in out


def test_invalid_job_configuration_prints_each_problem_and_exits_2(jobs_dir: Path) -> None:
    folder = write_job(jobs_dir, "dash")
    text = (
        (folder / "job.toml")
        .read_text()
        .replace("window_s = 86400", "window_s = 86400\nracers = 0\nlease_duration_s = 99")
    )
    (folder / "job.toml").write_text(text)
    for command in ("run", "check"):
        argv = [command, "--job", "dash", "--jobs-dir", str(jobs_dir)]
        status, out, err = invoke(*argv)
        assert (status, out) == (2, "")
        lines = err.splitlines()
        assert len(lines) >= 2 and all(line.startswith("jobs/dash/job.toml") for line in lines)
        assert any("racers" in line for line in lines) and any("lease_duration_s" in line for line in lines)


def test_unknown_job_exits_2() -> None:
    status, _, err = invoke("run", "--job", "nope")
    assert status == 2 and err.startswith("no job 'nope'; jobs: ")


# --- check -------------------------------------------------------------------------------------------------------
def test_check_passes_on_the_repositorys_jobs() -> None:
    """Whatever jobs/ holds (the samples, a fork's own jobs): every folder passes, none is skipped."""
    status, out, err = invoke("check")
    assert (status, err) == (0, "")
    count = len(repo_job_names())
    assert out == f"{count} job{'s' if count != 1 else ''} checked\n"


def test_check_misspelt_column_names_file_line_and_closest_names(jobs_dir: Path) -> None:
    write_job(jobs_dir, "ok")
    write_job(jobs_dir, "top-routes", SAMPLE_SQL.replace("max_by(dest,", "max_by(dst,"))
    status, out, err = invoke("check", "--jobs-dir", str(jobs_dir))
    assert (status, err) == (1, "")
    assert out.splitlines() == [
        'jobs/top-routes/query.sql:4: column "dst" not found in flights; did you mean dest or dt?',
        "2 jobs checked: 1 problem",
    ]


@pytest.mark.parametrize(
    ("old", "new", "where"),
    [
        ("max_by(dest, dep_delay) AS worst_delay_dest\n", "max_by(dest, dep_delay) AS worst_delay_dest,\n", "4:51"),
        ("GROUP BY origin\n", "GROUP BY origin,\n", "9:16"),
        ("count(*) AS flights,", "count(*) AS flights,,", "3:27"),
    ],
    ids=["select-list", "group-by", "empty-item"],
)
def test_check_refuses_a_trailing_comma(jobs_dir: Path, old: str, new: str, where: str) -> None:
    # issue 33: every refusal has the line and column of the comma and Athena's error class
    write_job(jobs_dir, "dash", SAMPLE_SQL.replace(old, new))
    status, out, _ = invoke("check", "--jobs-dir", str(jobs_dir))
    problems = out.splitlines()[:-1]
    assert status == 1
    assert problems == [
        f"jobs/dash/query.sql:{where}: SYNTAX_ERROR: trailing comma (Trino refuses it; remove the last ',')"
    ]


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        (
            "sched_dep_utc >= CAST(:window_start AS timestamp)",
            "sched_dep_utc >= :window_start",
            "jobs/dash/query.sql:6:21: TYPE_MISMATCH: Cannot apply operator: timestamp(3) >= varchar(19)",
        ),
        ("count(*) AS flights", "count(*)::bigint AS flights", "jobs/dash/query.sql:3:16: SYNTAX_ERROR: '::' casts"),
        (
            "max_by(dest, dep_delay)",
            "strftime(sched_dep_utc, '%H')",
            "jobs/dash/query.sql:4:8: FUNCTION_NOT_FOUND: Function 'strftime' not registered",
        ),
        (
            "GROUP BY origin",
            "GROUP BY dest",
            "jobs/dash/query.sql:2:8: EXPRESSION_NOT_AGGREGATE: 'origin' must be an aggregate expression",
        ),
    ],
    ids=["uncast-window-start", "double-colon", "duckdb-function", "not-grouped"],
)
def test_check_refuses_what_athena_refuses_with_line_column_and_class(
    jobs_dir: Path, old: str, new: str, expected: str
) -> None:
    write_job(jobs_dir, "dash", SAMPLE_SQL.replace(old, new))
    status, out, err = invoke("check", "--jobs-dir", str(jobs_dir))
    assert (status, err) == (1, "")
    assert out.splitlines()[0].startswith(expected), out
    assert out.splitlines()[-1].startswith("1 job checked: ") and "problem" in out.splitlines()[-1]


def test_check_notes_what_it_could_not_check_and_passes(jobs_dir: Path) -> None:
    columns = '{ carrier = "string", dep_delay = "double", dt = "string", shape = "geometry" }'
    write_job(
        jobs_dir,
        "own",
        OWN_SQL.replace("carrier, avg", "carrier, shape, avg").replace("GROUP BY carrier", "GROUP BY carrier, shape"),
        source=own_source(columns),
    )
    status, out, err = invoke("check", "--jobs-dir", str(jobs_dir))
    assert (status, err) == (0, "")
    note, summary = out.splitlines()
    assert note.startswith("note: jobs/own/query.sql:2:6: not checked: orders.shape: its type 'geometry'")
    assert summary == "1 job checked"


def test_trailing_comma_ignores_functions_strings_and_comments() -> None:
    sql = "SELECT left(a, 1), 'x, FROM', b -- c, FROM\nFROM t"
    assert check.trailing_comma_line(sql) is None
    assert check.trailing_comma_line("SELECT a,\n  b,\nFROM t") == 2
    assert check.trailing_comma_line("SELECT f(a,) FROM t") == 1


def test_check_refuses_a_table_other_than_the_source(jobs_dir: Path) -> None:
    write_job(jobs_dir, "dash", SAMPLE_SQL.replace("FROM flights", "FROM airports"))
    status, out, _ = invoke("check", "--jobs-dir", str(jobs_dir))
    assert status == 1
    assert out.splitlines()[0].startswith("jobs/dash/query.sql:5: table airports is not the job's source")


def test_check_resolves_a_users_table_with_source_columns(jobs_dir: Path) -> None:
    columns = '{ carrier = "string", dep_delay = "double", dt = "string" }'
    write_job(jobs_dir, "own", OWN_SQL, source=own_source(columns))
    assert invoke("check", "--jobs-dir", str(jobs_dir)) == (0, "1 job checked\n", "")
    write_job(jobs_dir, "own", OWN_SQL.replace("avg(dep_delay)", "avg(dep_dly)"), source=own_source(columns))
    status, out, _ = invoke("check", "--jobs-dir", str(jobs_dir))
    assert status == 1
    assert out.splitlines()[0] == 'jobs/own/query.sql:1: column "dep_dly" not found in orders; did you mean dep_delay?'


def test_check_refuses_source_columns_that_are_not_glue_types(jobs_dir: Path) -> None:
    write_job(jobs_dir, "own", OWN_SQL, source=own_source("{ carrier = 3 }"))
    status, _, err = invoke("check", "--jobs-dir", str(jobs_dir))
    assert status == 2 and err.startswith("jobs/own/job.toml:")
    assert "source.columns.carrier: must be a Glue (Hive) type" in err and "got 3" in err


def test_check_without_a_schema_warns_and_passes(jobs_dir: Path, tmp_path: Path) -> None:
    write_job(jobs_dir, "own", OWN_SQL.replace("dep_delay", "anything"), source=own_source(None))
    status, out, err = invoke("check", "--jobs-dir", str(jobs_dir), "--data", str(tmp_path / "nodata"))
    assert (status, err) == (0, "")
    warning, summary = out.splitlines()
    assert warning.startswith("warning: jobs/own/query.sql: columns not checked: no schema for table orders")
    assert summary == "1 job checked"


def test_check_reads_the_schema_of_a_users_parquet(jobs_dir: Path, tmp_path: Path, data_dir: Path) -> None:
    write_job(jobs_dir, "own", OWN_SQL.replace("dep_delay", "dep_delai"), source=own_source(None))
    day = tmp_path / "data" / "orders" / "dt=2013-11-24"
    day.mkdir(parents=True)
    (day / "part-0.parquet").write_bytes((data_dir / "flights" / "dt=2013-11-24" / "data.parquet").read_bytes())
    status, out, _ = invoke("check", "--jobs-dir", str(jobs_dir), "--data", str(tmp_path / "data"))
    assert status == 1
    assert (
        out.splitlines()[0] == 'jobs/own/query.sql:1: column "dep_delai" not found in orders; did you mean dep_delay?'
    )


# --- value metrics cost ---------------------------------------------------------------------------------------
def test_value_metrics_warning_fires_for_an_expensive_config_only(jobs_dir: Path) -> None:
    _, jobs = load_repo_jobs(REPO_ROOT)
    assert value_metrics_cost.value_metrics_warnings(jobs) == []  # the samples: 3x and 8x their work
    many = ", ".join(f"count(*) + {i} AS c{i}" for i in range(10))  # 10 value columns x 50 series: 500 metrics
    names = ", ".join(f'"c{i}"' for i in range(10))
    write_job(
        jobs_dir,
        "dash",
        SAMPLE_SQL.replace("count(*) AS flights", many),
        extra=f'\n[value_metrics]\ncolumns = [{names}]\ndimensions = ["origin"]\nmax_series = 50\n',
    )
    status, out, _ = invoke("check", "--jobs-dir", str(jobs_dir))
    assert status == 0
    warning, summary = out.splitlines()
    assert warning.startswith("warning: jobs/dash/job.toml: value_metrics: about $150.04")
    assert "500 custom metrics = 10 columns x max_series 50 by origin) is " in warning
    assert "x the job's work ($" in warning and "operational metrics and alarm" in warning
    assert "lower value_metrics.max_series" in warning
    assert summary == "1 job checked"


def test_value_metrics_figure_is_make_costs(jobs_dir: Path) -> None:
    """The warning's figure is `make cost`'s "value metrics" line (the difference of its totals, rounded)."""
    prices = load_prices()
    for job in load_fixture_jobs():  # the samples as shipped: both publish value metrics
        config = job.config
        assert config.value_metrics is not None
        for values in (config.value_metrics, ValueMetricsSpec(columns=("a", "b", "c", "d"), max_series=50)):
            cost = value_metrics_cost.value_metrics_cost(
                replace(job, config=replace(config, value_metrics=values)), prices
            )
            assert cost is not None
            made = JobInputs(
                name=job.job_name,
                racers=config.racers,
                memory_mb=config.lambda_memory_mb,
                heartbeat_interval_s=float(config.heartbeat_interval_s),
                schedule=cost.rate,
                period_s=config.period.shortest_s,
                scan=Scan(0, "flag", "test"),
                result_writes=(),
                summary_bytes=100,
                alarms=AlarmCount(),
                value_columns=len(values.columns),
                value_max_series=values.max_series,
            )
            estimate = monthly.estimate_job(made, Durations(3.0, 100.0, 700.0), prices)
            assert cost.value_usd == pytest.approx(estimate.value_metrics_usd, abs=2e-6)


def test_value_metrics_cost_is_none_without_value_metrics() -> None:
    _, jobs = load_repo_jobs(REPO_ROOT)
    job = jobs[0]
    assert value_metrics_cost.value_metrics_cost(replace(job, config=replace(job.config, value_metrics=None))) is None


def test_the_works_durations_are_make_costs_defaults() -> None:
    from tools.cost import usage

    assert value_metrics_cost.WORK_WINNER_S == usage.DEFAULT_WINNER_DURATION_S
    assert value_metrics_cost.WORK_LOSER_MS == usage.DEFAULT_LOSER_DURATION_MS


def test_source_columns_are_validated_by_the_job_loader(tmp_path: Path) -> None:
    """``source.columns`` is a key of stacks.jobs' Glue source: a bad name or type is a configuration problem."""
    from athena_refresh.checks import ConfigError
    from stacks.jobs import GlueSource, load_job
    from stacks.stack_settings import StackSettings

    folder = tmp_path / "jobs" / "own"
    folder.mkdir(parents=True)
    (folder / "query.sql").write_text("SELECT carrier FROM orders WHERE t >= :window_start AND t < :window_end\n")
    good = (
        'source = { database = "sales", table = "orders", location = "s3://bucket/orders/",'
        ' columns = { carrier = "string", t = "timestamp", amount = "decimal(10,2)" } }\n'
        'schedule_expression = "cron(0 * * * ? *)"\n'
    )
    (folder / "job.toml").write_text(good)
    source = load_job(folder, StackSettings()).source
    assert isinstance(source, GlueSource)
    assert dict(source.columns) == {"carrier": "string", "t": "timestamp", "amount": "decimal(10,2)"}
    (folder / "job.toml").write_text(good.replace('"decimal(10,2)"', '"money"').replace("carrier =", "Carrier ="))
    with pytest.raises(ConfigError) as caught:
        load_job(folder, StackSettings())
    text = "\n".join(caught.value.problems)
    assert "source.columns.Carrier" in text and "source.columns.amount" in text and "'money'" in text


def test_check_settings_and_run_share_the_one_job_spec() -> None:
    # GIVEN the sample jobs as check and settings load them (stacks.jobs.load_jobs: one JobSpec each)
    for job in load_fixture_jobs():
        # WHEN run builds the runtime's settings (through a job catalog, as the cold start does)
        settings = run.job_settings(job)
        # THEN they hold the same JobSpec, the stack-wide alarm email aside, and its values
        assert settings.spec == replace(job.config, alarms=replace(job.config.alarms, email=None))
        assert (settings.window_s, settings.data_year) == (job.config.window_s, job.config.data_year)
        assert settings.lease_duration_s == job.config.lease_duration_s


def test_run_evaluates_the_jobs_assertions_as_the_function_would(jobs_dir: Path, data_dir: Path) -> None:
    """Issue 34: result tests, evaluated by ``run`` on the local rows."""
    write_job(jobs_dir, "dash", extra='[assertions]\nrows_at_least = 1\naccepted_values = { origin = ["JFK"] }\n')
    status, out, err = invoke("run", "--job", "dash", "--jobs-dir", str(jobs_dir), "--format", "json")
    assert status == 1, err
    document = json.loads(out)
    (failure,) = document["assertions_failed"]
    assert failure["assertion"] == "accepted_values origin" and failure["failing"] >= 1
    assert "jobs/dash/job.toml: assertion accepted_values origin: " in err
    assert "the slot would be FAILED (assertion): 1 assertion(s) broken" in err
    write_job(jobs_dir, "dash", extra='[assertions]\nrows_at_least = 1\nnot_null = ["origin"]\n')
    status, out, err = invoke("run", "--job", "dash", "--jobs-dir", str(jobs_dir), "--format", "json")
    assert (status, json.loads(out)["assertions_failed"]) == (0, []), err
