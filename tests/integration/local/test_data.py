"""sample_data.flights: the flights table (row count, schema as the Glue table declares it, derived column, layout).

The partition layout in detail (and the benchmark's history) is tested in
tests/integration/tools/test_sample_data_layout.py.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from sample_data import flights as data
from sample_data.flights import (
    FLIGHTS_COLUMNS,
    FLIGHTS_FIRST_DT,
    FLIGHTS_GLUE_COLUMNS,
    FLIGHTS_GLUE_PARTITION_KEYS,
    FLIGHTS_LAST_DT,
    FLIGHTS_ROW_COUNT,
    ensure_flights_table,
)


@pytest.fixture(scope="session")
def flights_table() -> Path:
    """The repository's cached table directory, built once (skipped when already valid)."""
    return ensure_flights_table()


@pytest.fixture(scope="session")
def files(flights_table: Path) -> str:
    """The glob of the table's data files (the partition column is not read from the paths)."""
    return str(flights_table / "dt=*" / data.PARTITION_FILE_NAME)


@pytest.fixture()
def con() -> Iterator[duckdb.DuckDBPyConnection]:
    with duckdb.connect() as connection:
        connection.execute("SET TimeZone = 'UTC'")
        yield connection


def test_table_has_every_row_and_the_declared_columns(
    flights_table: Path, files: str, con: duckdb.DuckDBPyConnection
) -> None:
    scan = "read_parquet(?, hive_partitioning = false)"
    described = con.execute(f"DESCRIBE SELECT * FROM {scan}", [files]).fetchall()
    rows = con.execute(f"SELECT count(*) FROM {scan}", [files]).fetchone()[0]

    assert flights_table == data.flights_table_dir() == data.DEFAULT_CACHE_DIR / "flights"
    assert rows == FLIGHTS_ROW_COUNT == 336_776
    assert [(name, type_) for name, type_, *_ in described] == list(FLIGHTS_COLUMNS)
    assert len(FLIGHTS_COLUMNS) == 20
    assert dict(FLIGHTS_COLUMNS)["sched_dep_utc"] == "TIMESTAMP"


def test_one_partition_per_utc_day_of_2013_in_new_york(flights_table: Path) -> None:
    names = sorted(p.name for p in flights_table.iterdir())

    assert len(names) == 366  # 2013-01-01 .. 2014-01-01: New York's evening of 31 December is 1 January in UTC
    assert (names[0], names[-1]) == (f"dt={FLIGHTS_FIRST_DT}", f"dt={FLIGHTS_LAST_DT}")
    assert (FLIGHTS_FIRST_DT, FLIGHTS_LAST_DT) == ("2013-01-01", "2014-01-01")
    assert data.is_valid_flights_table(flights_table)


def test_parquet_physical_types_are_readable_by_athena(files: str, con: duckdb.DuckDBPyConnection) -> None:
    schema = {
        (name, physical, logical or "", converted or "")
        for name, physical, logical, converted in con.execute(
            "SELECT name, type, logical_type, converted_type FROM parquet_schema(?) WHERE name <> 'duckdb_schema'",
            [files],
        ).fetchall()
    }
    by_name = {name: (physical, logical) for name, physical, logical, _ in schema}
    compressions = con.execute("SELECT DISTINCT compression FROM parquet_metadata(?)", [files]).fetchall()

    assert len(schema) == len(FLIGHTS_COLUMNS)  # every file the same schema
    for name, duckdb_type in FLIGHTS_COLUMNS:
        physical, logical = by_name[name]
        if duckdb_type == "TIMESTAMP":  # INT64 microseconds, no time zone (never INT96, never nanoseconds)
            assert physical == "INT64"
            assert "MICROS=MicroSeconds()" in logical and "isAdjustedToUTC=0" in logical
        else:
            assert physical == {"INTEGER": "INT32", "DOUBLE": "DOUBLE", "VARCHAR": "BYTE_ARRAY"}[duckdb_type]
    assert compressions == [("SNAPPY",)]


def test_glue_columns_mirror_the_files_and_the_partition_key_the_path() -> None:
    assert [name for name, _ in FLIGHTS_GLUE_COLUMNS] == [name for name, _ in FLIGHTS_COLUMNS]
    assert {glue for _, glue in FLIGHTS_GLUE_COLUMNS} == {"int", "double", "string", "timestamp"}
    assert FLIGHTS_GLUE_PARTITION_KEYS == (("dt", "string"),)
    assert data.PARTITION_COLUMN not in dict(FLIGHTS_GLUE_COLUMNS)


def test_first_row_and_its_exact_scheduled_departure(flights_table: Path, con: duckdb.DuckDBPyConnection) -> None:
    # GIVEN the first CSV row: 2013-01-01, sched_dep_time 515 (05:15 New York), time_hour 2013-01-01T10:00:00Z,
    # which is also the year's first scheduled departure (ties keep the CSV's order)
    first = con.execute(
        "SELECT year, month, day, sched_dep_time, dep_delay, carrier, flight, tailnum, origin, dest,"
        " time_hour, sched_dep_utc FROM read_parquet(?) LIMIT 1",
        [str(flights_table / f"dt={FLIGHTS_FIRST_DT}" / data.PARTITION_FILE_NAME)],
    ).fetchone()

    # THEN the derived column is the scheduled minute in UTC
    assert first == (
        2013, 1, 1, 515, 2.0, "UA", 1545, "N14228", "EWR", "IAH",
        dt.datetime(2013, 1, 1, 10, 0), dt.datetime(2013, 1, 1, 10, 15),
    )  # fmt: skip


def test_sched_dep_utc_is_time_hour_plus_scheduled_minutes(files: str, con: duckdb.DuckDBPyConnection) -> None:
    mismatches, first, last = con.execute(
        "SELECT count(*) FILTER (WHERE sched_dep_utc <> time_hour + to_minutes(CAST(sched_dep_time % 100 AS BIGINT))"
        "   OR minute(sched_dep_utc) <> minute OR sched_dep_utc IS NULL),"
        " min(sched_dep_utc), max(sched_dep_utc) FROM read_parquet(?)",
        [files],
    ).fetchone()

    assert mismatches == 0
    # 2013 in New York local time = 2013-01-01 05:00 EST .. 2013-12-31 23:59 EST, in UTC:
    assert dt.datetime(2013, 1, 1, 10, 0) <= first and last < dt.datetime(2014, 1, 1, 5, 0)


def test_na_becomes_null(files: str, con: duckdb.DuckDBPyConnection) -> None:
    nulls = con.execute(
        "SELECT count(*) - count(dep_time), count(*) - count(arr_delay), count(*) - count(tailnum),"
        " count(*) - count(time_hour) FROM read_parquet(?)",
        [files],
    ).fetchone()

    # cancelled flights have no dep_time; diverted/cancelled have no arr_delay; some planes have no tail number
    assert nulls == (8255, 9430, 2512, 0)


def test_second_call_keeps_the_valid_table(flights_table: Path) -> None:
    sample = flights_table / f"dt={FLIGHTS_LAST_DT}" / data.PARTITION_FILE_NAME
    before = (flights_table.stat().st_ino, sample.stat().st_ino, sample.stat().st_mtime_ns)

    again = ensure_flights_table()

    assert again == flights_table
    assert (again.stat().st_ino, sample.stat().st_ino, sample.stat().st_mtime_ns) == before


def test_an_old_single_file_layout_is_replaced_atomically(tmp_path: Path) -> None:
    # GIVEN the single flights.parquet of earlier versions where the table should be
    old = tmp_path / "flights" / "flights.parquet"
    old.parent.mkdir()
    old.write_bytes(b"PAR1 not really")
    assert not data.is_valid_flights_table(old.parent)

    # WHEN ensured
    built = ensure_flights_table(tmp_path)

    # THEN the partitioned table replaces it, valid, and no temporary or old directory is left behind
    assert built == tmp_path / "flights"
    assert data.is_valid_flights_table(built)
    assert not old.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["flights"]
    assert all(p.name.startswith("dt=") for p in built.iterdir())


def test_main_prints_partitions_rows_and_size(flights_table: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert data.main([]) == 0

    out = capsys.readouterr().out
    size = sum(p.stat().st_size for p in flights_table.rglob("*.parquet"))
    assert str(flights_table) in out
    assert "partitions=366 (2013-01-01..2014-01-01)" in out
    assert "rows=336776" in out
    assert f"size={size} bytes" in out
