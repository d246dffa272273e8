"""``run --format json`` answers as Athena answers (value and Trino type), or fails in one line: issue 33's examples
on the sample table, through the job loop (query.sql, its parameters bound as the deployed function binds them)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sample_data.flights import ensure_flights_table
from tests.integration.tools.test_tools_jobs import SLOT, invoke, write_job

WINDOW = (
    "FROM flights WHERE sched_dep_utc >= CAST(:window_start AS timestamp)"
    " AND sched_dep_utc < CAST(:window_end AS timestamp) AND dt BETWEEN :window_first_date AND :window_last_date"
)


@pytest.fixture(scope="module")
def data_dir() -> Path:
    """The sample's data directory (.cache/data), built once if missing (as `make data` does)."""
    return ensure_flights_table().parent


@pytest.fixture
def jobs_dir(tmp_path: Path) -> Path:
    return tmp_path / "jobs"


def run_json(jobs_dir: Path, select: str) -> tuple[int, dict[str, object] | None, str]:
    write_job(jobs_dir, "probe", f"SELECT {select}\n{WINDOW}\nLIMIT 1\n")
    status, out, err = invoke("run", "--job", "probe", "--slot", SLOT, "--format", "json", "--jobs-dir", str(jobs_dir))
    return status, (json.loads(out) if status == 0 else None), err


@pytest.mark.parametrize(
    ("select", "value", "trino_type"),
    [
        ("17 / 37 AS v", 0, "integer"),
        ("(7 / 2) * 1000 + 1 AS v", 3001, "integer"),
        ("CAST('banana' AS varchar(3)) AS v", "ban", "varchar(3)"),
        ("substr('hello', 0) AS v", "", "varchar(5)"),
        ("regexp_replace('abc', '(b)', '$1$1') AS v", "abbc", "varchar(27)"),
        ("hour(sched_dep_utc AT TIME ZONE 'Europe/Berlin') - hour(sched_dep_utc) AS v", 1, "bigint"),
        ("100.0 * count(*) / count(*) AS v", "100.0", "decimal(23,1)"),
        ("sched_dep_utc AS v", None, "timestamp(3)"),
        ("ARRAY[origin] AS v", None, "array(varchar)"),
    ],
)
def test_run_shows_the_value_and_trino_type(
    jobs_dir: Path, data_dir: Path, select: str, value: object, trino_type: str
) -> None:
    """functions/math.md, string.md, datetime.md and decimal.md at trinodb/trino
    6f7aadf5a9115ec244aac372e07df5a481a4907f (the values); a table's timestamp is timestamp(3) in Athena; substr and
    regexp_replace's bounded results as StringFunctions.java (00e6f8b957a4352553a70648bb3ff9daf5d12d5c) and
    JoniRegexpFunctions.java (03d8e5abc686c5c4a9f96ca14db07e2aed880174) declare them. In November, Berlin is UTC+1."""
    status, document, err = run_json(jobs_dir, select)
    assert (status, err) == (0, "")
    assert document is not None
    assert document["columns"] == [{"name": "v", "type": trino_type}]
    if value is not None:
        assert document["rows"] == [{"v": value}]


@pytest.mark.parametrize(
    ("select", "message"),
    [
        ("shuffle(ARRAY[origin]) AS v", "runs on Athena only: shuffle (a random permutation); the check validated it"),
        ("format_datetime(sched_dep_utc, 'Q') AS v", "runs on Athena only: format_datetime"),
        ("strftime(sched_dep_utc, '%Y') AS v", "Function 'strftime' not registered"),
        ("CAST(origin AS integer) AS v", "Cannot cast 'EWR' to INT"),
    ],
)
def test_run_refuses_in_one_line_without_duckdbs_words(
    jobs_dir: Path, data_dir: Path, select: str, message: str
) -> None:
    status, _, err = run_json(jobs_dir, select)
    assert status == 1
    assert err.count("\n") == 1 and message in err and "DuckDB" not in err and "Catalog Error" not in err
    assert err.startswith("jobs/probe/query.sql:")
