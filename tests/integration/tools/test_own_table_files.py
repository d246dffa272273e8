"""A job on a team's own Glue table, locally: ``run``, ``demo`` and ``cost`` use its sample files under
``.cache/data/<table>/`` (or ``--data DIR``) when present, and otherwise each says in one line what it cannot do
(tools/jobs/common.py, tools/cost, local/demo/plan.py; docs/local.md "Your own table's sample files")."""

from __future__ import annotations

import datetime as dt
import io
import json
import shutil
from pathlib import Path

import pytest

from local.demo import cli as demo_cli
from local.demo.plan import NoLocalDataError, runnable_jobs
from sample_data.flights import ensure_flights_table
from stacks.jobs import JobDefinition
from tests.sample_jobs import TOP_ROUTES, stage_jobs
from tools.cost import inputs
from tools.cost.cli import main as cost_main
from tools.cost.inputs import Synthesis
from tools.jobs import common

#: A table name no checkout holds under .cache/data/ (the default directory is the repository's).
TABLE = "orders_of_a_team_test_only"
OWN_SQL = "SELECT carrier, count(*) AS n FROM {table} WHERE dt BETWEEN :window_first_date AND :window_last_date GROUP BY carrier\n"
DAYS = ("2013-11-23", "2013-11-24")


@pytest.fixture(scope="module")
def sample_dir() -> Path:
    return ensure_flights_table().parent


def write_own_job(jobs_dir: Path, name: str = "own", table: str = TABLE) -> None:
    folder = jobs_dir / name
    folder.mkdir(parents=True)
    (folder / "job.toml").write_text(
        f'source = {{ database = "sales", table = "{table}", location = "s3://acme-data/orders/" }}\n'
        'schedule_expression = "cron(0 * * * ? *)"\n',
        encoding="utf-8",
    )
    (folder / "query.sql").write_text(OWN_SQL.format(table=table), encoding="utf-8")


def own_files(data_dir: Path, sample_dir: Path, table: str = TABLE) -> Path:
    """Two day partitions of the team's table (copies of the sample's files), plus a directory naming no day."""
    for day in DAYS:
        (data_dir / table / f"dt={day}").mkdir(parents=True)
        (data_dir / table / f"dt={day}" / "part-0.parquet").write_bytes(
            (sample_dir / "flights" / f"dt={day}" / "data.parquet").read_bytes()
        )
    (data_dir / table / "dt=2013-02-30").mkdir()  # not a day: ignored
    (data_dir / table / "_tmp").mkdir()
    return data_dir / table


def loaded(jobs_dir: Path) -> tuple[JobDefinition, ...]:
    return common.load(jobs_dir).jobs


# --- where the files are -----------------------------------------------------------------------------------------
def test_own_table_dir_and_its_newest_day(tmp_path: Path, sample_dir: Path) -> None:
    write_own_job(tmp_path / "jobs")
    (job,) = loaded(tmp_path / "jobs")
    assert common.own_table_dir(job, tmp_path / "data") is None
    table_dir = own_files(tmp_path / "data", sample_dir)
    assert common.own_table_dir(job, tmp_path / "data") == table_dir
    assert common.newest_day(table_dir) == dt.date(2013, 11, 24)
    assert common.no_own_files(job) == (
        f"no Parquet files for table {TABLE} under .cache/data/{TABLE}/ (docs/local.md#your-own-tables-sample-files)"
    )


# --- cost ----------------------------------------------------------------------------------------------------------
def cost(argv: list[str], sample_dir: Path) -> tuple[int, dict[str, object], str]:
    def synthesize(jobs_dir: Path) -> Synthesis:  # the alarms do not matter here: no synth
        names = [job.job_name for job in inputs.load_definitions(jobs_dir)]
        return Synthesis({"Shared": {}}, "Shared", {name: ("Shared", frozenset()) for name in names}, 256)

    out, err = io.StringIO(), io.StringIO()
    status = cost_main(
        [*argv, "--format", "json"], stdout=out, stderr=err, env={}, synthesize=synthesize, data_dir=lambda: sample_dir
    )
    return status, (json.loads(out.getvalue()) if status == 0 else {}), err.getvalue()


def test_cost_measures_a_own_table_job_on_its_files(tmp_path: Path, sample_dir: Path) -> None:
    # GIVEN a job on its own table with two day partitions of sample files
    write_own_job(tmp_path / "jobs")
    own_files(tmp_path / "data", sample_dir)
    # WHEN make cost runs with --data
    status, report, err = cost(["--jobs-dir", str(tmp_path / "jobs"), "--data", str(tmp_path / "data")], sample_dir)
    assert status == 0, err
    (job,) = report["jobs"]  # type: ignore[misc]
    # THEN the scan is measured on them, at the last hourly slot before the newest day ends
    assert job["scan"]["origin"] == "measured" and 0 < job["scan"]["bytes"] < 10 * 2**20
    assert job["scan"]["detail"] == f"your files under {tmp_path / 'data' / TABLE}/ on DuckDB, slot 2013-11-24T23:00Z"
    assert job["sample"]["slot"] == "2013-11-24T23:00:00Z" and job["sample"]["rows"] > 0


def test_cost_without_files_assumes_the_minimum_and_says_why_in_one_line(tmp_path: Path, sample_dir: Path) -> None:
    write_own_job(tmp_path / "jobs")
    status, report, err = cost(["--jobs-dir", str(tmp_path / "jobs")], sample_dir)
    assert status == 0, err
    (job,) = report["jobs"]  # type: ignore[misc]
    assert job["scan"]["origin"] == "assumed" and job["scan"]["bytes"] == 10 * 2**20
    assert job["scan"]["detail"] == (
        f"Athena's minimum: no Parquet files for table {TABLE} under .cache/data/{TABLE}/"
        " (docs/local.md#your-own-tables-sample-files); give --scan-bytes JOB=BYTES"
    )


def test_cost_slot_without_day_partitions_is_the_representative_one(tmp_path: Path, sample_dir: Path) -> None:
    write_own_job(tmp_path / "jobs")
    (job,) = loaded(tmp_path / "jobs")
    flat = tmp_path / "data" / TABLE
    flat.mkdir(parents=True)
    (flat / "part-0.parquet").write_bytes((sample_dir / "flights" / "dt=2013-11-24" / "data.parquet").read_bytes())
    assert inputs.own_data_slot(job, flat) == inputs.representative_slot(job)


# --- demo ----------------------------------------------------------------------------------------------------------
def test_demo_runs_own_table_jobs_with_files_and_leaves_the_others_out_with_a_line(
    tmp_path: Path, sample_dir: Path
) -> None:
    jobs_dir = stage_jobs(tmp_path, (TOP_ROUTES,))
    write_own_job(jobs_dir, "with-files")
    write_own_job(jobs_dir, "without-files", table=f"{TABLE}_missing")
    own_files(tmp_path / "data", sample_dir)
    runnable, left_out = runnable_jobs(list(loaded(jobs_dir)), tmp_path / "data")
    assert [job.job_name for job in runnable] == [TOP_ROUTES, "with-files"]
    assert left_out == {"without-files": common.no_own_files(loaded(jobs_dir)[-1], tmp_path / "data")}
    assert left_out["without-files"].startswith(f"no Parquet files for table {TABLE}_missing under ")
    with pytest.raises(NoLocalDataError, match="without-files: no Parquet files"):
        runnable_jobs([job for job in loaded(jobs_dir) if job.job_name == "without-files"], tmp_path / "data")


def test_demo_with_no_job_it_can_run_is_one_line_and_status_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_own_job(tmp_path / "jobs")
    status = demo_cli.main(["--jobs-dir", str(tmp_path / "jobs"), "--workdir", str(tmp_path / "demo")])
    captured = capsys.readouterr()
    assert status == 2 and captured.out == ""
    assert captured.err == (
        f"the demo could not run: own: no Parquet files for table {TABLE} under .cache/data/{TABLE}/"
        " (docs/local.md#your-own-tables-sample-files)\n"
    )


@pytest.mark.slow
def test_demo_runs_a_own_table_job_on_its_files(
    tmp_path: Path, sample_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A real (small) demo: the engine reads .cache/data/, so the files go there, under a table name of this test's."""
    table = f"{TABLE}_demo_{tmp_path.name[-12:]}".replace("-", "_")
    write_own_job(tmp_path / "jobs", table=table)
    today = dt.datetime.now(dt.UTC).date()
    try:
        for day in (today - dt.timedelta(days=1), today):  # the demo's slots are the latest firings before now
            (common.DATA_DIR / table / f"dt={day}").mkdir(parents=True)
            (common.DATA_DIR / table / f"dt={day}" / "part-0.parquet").write_bytes(
                (sample_dir / "flights" / "dt=2013-11-24" / "data.parquet").read_bytes()
            )
        report = tmp_path / "report.json"
        argv = ["--jobs-dir", str(tmp_path / "jobs"), "--workdir", str(tmp_path / "demo"), "--report", str(report)]
        status = demo_cli.main([*argv, "--slots", "1", "--racers", "2", "--no-faults"])
    finally:
        shutil.rmtree(common.DATA_DIR / table, ignore_errors=True)
    out = capsys.readouterr().out
    assert status == 0, out
    assert f"own: its own table {table}, files under .cache/data/{table}/" in out
    document = json.loads(report.read_text(encoding="utf-8"))
    assert document["ok"] and document["slots_completed"] == 1 and document["config"]["jobs_not_run"] == {}
