"""sample_data.flights: the Hive partition layout (dt=YYYY-MM-DD/data.parquet) and the benchmark's shifted history.

One two-year history is built per module, partitioned and not (a few seconds in all).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from sample_data import flights as data
from sample_data.flights import FLIGHTS_COLUMNS, FLIGHTS_FIRST_DT, FLIGHTS_LAST_DT, FLIGHTS_ROW_COUNT

YEARS = 2


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return data.write_flights_history(tmp_path_factory.mktemp("history") / "flights", years=YEARS, partitioned=True)


@pytest.fixture(scope="module")
def flat_history(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return data.write_flights_history(tmp_path_factory.mktemp("flat") / "flights", years=YEARS, partitioned=False)


@pytest.fixture()
def con() -> Iterator[duckdb.DuckDBPyConnection]:
    with duckdb.connect() as connection:
        connection.execute("SET TimeZone = 'UTC'")
        yield connection


def data_files(table_dir: Path) -> str:
    return str(table_dir / "dt=*" / data.PARTITION_FILE_NAME)


def test_partitions_are_hive_directories_of_one_data_file(history: Path) -> None:
    names = sorted(p.name for p in history.iterdir())

    assert all(re.fullmatch(r"dt=\d{4}-\d{2}-\d{2}", name) for name in names)
    assert all(sorted(p.name for p in (history / name).iterdir()) == ["data.parquet"] for name in names)
    # copy 1 starts on 2012-01-01; copy 0 ends with New York's 31 December 2013 evening, 2014-01-01 in UTC;
    # 2012 is a leap year, but the source (2013) has no 29 February to shift onto it
    assert (names[0], names[-1]) == ("dt=2012-01-01", "dt=2014-01-01")
    assert "dt=2012-02-29" not in names
    assert len(names) == 366 + 366 - 1
    assert data.layout_problems(history, rows=YEARS * FLIGHTS_ROW_COUNT) == []


def test_the_partition_column_is_in_the_path_not_in_the_files(history: Path, con: duckdb.DuckDBPyConnection) -> None:
    described = con.execute("DESCRIBE SELECT * FROM read_parquet(?, hive_partitioning = false)", [data_files(history)])
    in_files = [(name, type_) for name, type_, *_ in described.fetchall()]
    partitioned = con.execute(
        "SELECT count(*), count(DISTINCT dt) FROM read_parquet(?, hive_partitioning = true)",
        [str(history / "**" / "*.parquet")],
    ).fetchone()

    assert in_files == list(FLIGHTS_COLUMNS)
    assert "dt" not in dict(in_files)
    assert partitioned == (YEARS * FLIGHTS_ROW_COUNT, 731)


def test_each_file_holds_its_days_rows_in_time_order(history: Path, con: duckdb.DuckDBPyConnection) -> None:
    scan = "read_parquet(?, hive_partitioning = false, filename = true, file_row_number = true)"
    off_day, out_of_order = con.execute(
        f"""SELECT count(*) FILTER (WHERE strftime(sched_dep_utc, '%Y-%m-%d') <> regexp_extract(filename, 'dt=([0-9-]+)', 1)),
                   count(*) FILTER (WHERE sched_dep_utc < previous)
            FROM (SELECT filename, sched_dep_utc,
                         lag(sched_dep_utc) OVER (PARTITION BY filename ORDER BY file_row_number) AS previous
                  FROM {scan})""",
        [data_files(history)],
    ).fetchone()

    assert (off_day, out_of_order) == (0, 0)


def test_copy_k_is_shifted_k_years_back_on_every_date_column(history: Path, con: duckdb.DuckDBPyConnection) -> None:
    per_year = con.execute(
        "SELECT year, count(*), min(sched_dep_utc), max(sched_dep_utc), count(*) FILTER (WHERE"
        "   year(time_hour) <> year AND NOT (month = 12 AND day = 31)"
        "   OR sched_dep_utc <> time_hour + to_minutes(CAST(sched_dep_time % 100 AS BIGINT)))"
        " FROM read_parquet(?) GROUP BY year ORDER BY year",
        [data_files(history)],
    ).fetchall()

    assert per_year == [
        (2012, FLIGHTS_ROW_COUNT, dt.datetime(2012, 1, 1, 10, 15), dt.datetime(2013, 1, 1, 4, 59), 0),
        (2013, FLIGHTS_ROW_COUNT, dt.datetime(2013, 1, 1, 10, 15), dt.datetime(2014, 1, 1, 4, 59), 0),
    ]


def test_unpartitioned_history_is_one_file_in_time_order(flat_history: Path, con: duckdb.DuckDBPyConnection) -> None:
    path = str(flat_history / "flights.parquet")
    rows, out_of_order, years = con.execute(
        "SELECT count(*), count(*) FILTER (WHERE sched_dep_utc < previous), list(DISTINCT year ORDER BY year) FROM"
        " (SELECT year, sched_dep_utc, lag(sched_dep_utc) OVER (ORDER BY file_row_number) AS previous"
        "  FROM read_parquet(?, file_row_number = true))",
        [path],
    ).fetchone()
    row_groups = con.execute("SELECT count(DISTINCT row_group_id) FROM parquet_metadata(?)", [path]).fetchone()[0]

    assert sorted(p.name for p in flat_history.iterdir()) == ["flights.parquet"]
    assert (rows, out_of_order, years) == (YEARS * FLIGHTS_ROW_COUNT, 0, [2012, 2013])
    assert row_groups == -(-YEARS * FLIGHTS_ROW_COUNT // 122_880)  # DuckDB's default row group size


def test_writing_again_replaces_the_target(tmp_path: Path) -> None:
    target = tmp_path / "flights"
    (target / "stale").mkdir(parents=True)

    data.write_flights_history(target, years=1, partitioned=False)

    assert sorted(p.name for p in target.iterdir()) == ["flights.parquet"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["flights"]  # no build or old directory left


def test_years_must_be_positive(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="at least 1"):
        data.write_flights_history(tmp_path / "t", years=0, partitioned=True)


def test_the_constants_name_the_real_tables_first_and_last_partition() -> None:
    table_dir = data.ensure_flights_table()
    names = sorted(p.name for p in table_dir.iterdir())

    assert (names[0], names[-1]) == (f"dt={FLIGHTS_FIRST_DT}", f"dt={FLIGHTS_LAST_DT}")
    assert data.partition_name(dt.date.fromisoformat(FLIGHTS_FIRST_DT)) == names[0]
    assert dt.datetime.strptime(FLIGHTS_LAST_DT, data.PARTITION_FORMAT).date() == dt.date(2014, 1, 1)
    assert data.PARTITION_GLUE_FORMAT == "yyyy-MM-dd"
