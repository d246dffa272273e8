"""``athena-once check``'s plan before deploy (issue 34, :mod:`tools.jobs.plan`): warnings that never block, and
``--strict`` that makes them problems. Each warning is provoked by the job shape a new user wrote."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.tools.test_tools_jobs import OWN_SQL, SAMPLE_SQL, invoke, own_source, write_job
from tools.jobs import common

HOURLY_AT_00 = 'schedule_expression = "cron(0 * * * ? *)"'


@pytest.fixture
def jobs_dir(tmp_path: Path) -> Path:
    return tmp_path / "jobs"


def warnings_of(out: str) -> list[str]:
    return [line.removeprefix("warning: ") for line in out.splitlines() if line.startswith("warning: ")]


def test_the_sample_shaped_job_has_no_warning(jobs_dir: Path) -> None:
    write_job(jobs_dir, "dash")
    assert invoke("check", "--jobs-dir", str(jobs_dir)) == (0, "1 job checked\n", "")


def test_more_jobs_on_one_minute_than_permits_is_one_warning_with_the_wait(jobs_dir: Path) -> None:
    permits = common.stack_settings().capacity.permits
    assert permits > 0  # the repository's cdk.json runs the budget
    count = permits + 3
    for index in range(count):
        folder = write_job(jobs_dir, f"team-{index:02d}")
        toml = folder / "job.toml"
        toml.write_text(toml.read_text().replace('schedule_expression = "cron(0/30 * * * ? *)"', HOURLY_AT_00))
    status, out, err = invoke("check", "--jobs-dir", str(jobs_dir))
    assert (status, err) == (0, "")
    (warning,) = warnings_of(out)
    assert warning.startswith(f"cdk.json: context.stack.capacity.permits = {permits}: {count} jobs fire on minute :00")
    assert f": 3 wait for a permit, the last about {-(-count // permits) - 1} query duration(s)" in warning


def test_no_partition_filter_a_long_window_select_star_and_an_unused_parameter(jobs_dir: Path) -> None:
    unfiltered = SAMPLE_SQL.replace("  AND dt BETWEEN :window_first_date AND :window_last_date\n", "")
    write_job(jobs_dir, "scan-all", unfiltered)
    star = "SELECT *\nFROM flights\nWHERE dt BETWEEN :window_first_date AND :window_last_date\n"
    write_job(jobs_dir, "star", star, extra="[parameters]\ncarrier = \"'UA'\"\n")
    folder = write_job(jobs_dir, "year")
    toml = folder / "job.toml"
    toml.write_text(toml.read_text().replace("window_s = 86400", "window_s = 31536000"))
    status, out, _ = invoke("check", "--jobs-dir", str(jobs_dir))
    assert status == 0, out
    warnings = warnings_of(out)
    assert any(
        w.startswith("jobs/scan-all/query.sql: no filter on the partition column dt of flights") for w in warnings
    )
    assert any(w.startswith("jobs/star/query.sql:1: SELECT * of flights, a source of") for w in warnings)
    assert "jobs/star/job.toml: [parameters] carrier is never used in query.sql (:carrier)" in warnings
    assert any(w.startswith("jobs/year/job.toml: window_s = 31536000 (365 days) is 17,520 periods") for w in warnings)
    assert len(warnings) == 4, warnings
    # --strict: the same lines are problems, exit 1
    status, out, _ = invoke("check", "--strict", "--jobs-dir", str(jobs_dir))
    assert status == 1 and out.splitlines()[-1] == "3 jobs checked: 4 problems"


def test_value_metrics_on_a_text_column(jobs_dir: Path) -> None:
    columns = '{ carrier = "string", dep_delay = "double", dt = "string" }'
    write_job(jobs_dir, "own", OWN_SQL, source=own_source(columns), extra='[value_metrics]\ncolumns = ["carrier"]\n')
    status, out, _ = invoke("check", "--jobs-dir", str(jobs_dir))
    assert status in (0, 1), out
    assert any(
        w.startswith("jobs/own/job.toml: value_metrics column carrier is string in orders, not a number")
        for w in warnings_of(out)
    ), out


def test_folders_that_look_like_jobs_but_are_not(jobs_dir: Path) -> None:
    write_job(jobs_dir, "dash")
    (jobs_dir / "typo").mkdir()
    (jobs_dir / "typo" / "Job.toml").write_text('source = "sample:flights"\n')
    (jobs_dir / "typo" / "query.sql").write_text("SELECT 1\n")
    (jobs_dir / "sql-only").mkdir()
    (jobs_dir / "sql-only" / "query.sql").write_text("SELECT 1\n")
    (jobs_dir / "notes").mkdir()  # a folder of something else: no word
    (jobs_dir / "notes" / "README.md").write_text("x\n")
    _, out, _ = invoke("check", "--jobs-dir", str(jobs_dir))
    assert warnings_of(out) == [
        (
            "jobs/sql-only/: not a job (it has query.sql, no job.toml): every tool skips it; a job folder holds job.toml"
            " and query.sql, exactly so named"
        ),
        (
            "jobs/typo/: not a job (it has Job.toml, no job.toml): every tool skips it; a job folder holds job.toml and"
            " query.sql, exactly so named"
        ),
    ]
