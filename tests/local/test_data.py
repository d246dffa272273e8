"""sample_data.flights: the flights Parquet file (row count, schema as the Glue table declares it, derived column)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from sample_data import flights as data
from sample_data.flights import FLIGHTS_COLUMNS, FLIGHTS_GLUE_COLUMNS, FLIGHTS_ROW_COUNT, ensure_flights_parquet


@pytest.fixture(scope="session")
def flights_parquet() -> Path:
    """The repository's cached file, built once (skipped when already valid)."""
    return ensure_flights_parquet()


@pytest.fixture()
def con() -> Iterator[duckdb.DuckDBPyConnection]:
    with duckdb.connect() as connection:
        connection.execute("SET TimeZone = 'UTC'")
        yield connection


def test_file_has_every_row_and_the_declared_columns(flights_parquet: Path, con: duckdb.DuckDBPyConnection) -> None:
    described = con.execute("DESCRIBE SELECT * FROM read_parquet(?)", [str(flights_parquet)]).fetchall()
    rows = con.execute("SELECT count(*) FROM read_parquet(?)", [str(flights_parquet)]).fetchone()[0]

    assert flights_parquet == data.DEFAULT_CACHE_DIR / "flights" / "flights.parquet"
    assert rows == FLIGHTS_ROW_COUNT == 336_776
    assert [(name, type_) for name, type_, *_ in described] == list(FLIGHTS_COLUMNS)
    assert len(FLIGHTS_COLUMNS) == 20
    assert dict(FLIGHTS_COLUMNS)["sched_dep_utc"] == "TIMESTAMP"


def test_parquet_physical_types_are_readable_by_athena(flights_parquet: Path, con: duckdb.DuckDBPyConnection) -> None:
    schema = {
        name: (physical, logical or "", converted or "")
        for name, physical, logical, converted in con.execute(
            "SELECT name, type, logical_type, converted_type FROM parquet_schema(?) WHERE name <> 'duckdb_schema'",
            [str(flights_parquet)],
        ).fetchall()
    }
    compressions = con.execute(
        "SELECT DISTINCT compression FROM parquet_metadata(?)", [str(flights_parquet)]
    ).fetchall()

    for name, duckdb_type in FLIGHTS_COLUMNS:
        physical, logical, _ = schema[name]
        if duckdb_type == "TIMESTAMP":  # INT64 microseconds, no time zone (never INT96, never nanoseconds)
            assert physical == "INT64"
            assert "MICROS=MicroSeconds()" in logical and "isAdjustedToUTC=0" in logical
        else:
            assert physical == {"INTEGER": "INT32", "DOUBLE": "DOUBLE", "VARCHAR": "BYTE_ARRAY"}[duckdb_type]
    assert compressions == [("SNAPPY",)]


def test_glue_columns_mirror_the_file() -> None:
    assert [name for name, _ in FLIGHTS_GLUE_COLUMNS] == [name for name, _ in FLIGHTS_COLUMNS]
    assert {glue for _, glue in FLIGHTS_GLUE_COLUMNS} == {"int", "double", "string", "timestamp"}


def test_first_row_and_its_exact_scheduled_departure(flights_parquet: Path, con: duckdb.DuckDBPyConnection) -> None:
    # GIVEN the first CSV row: 2013-01-01, sched_dep_time 515 (05:15 New York), time_hour 2013-01-01T10:00:00Z
    first = con.execute(
        "SELECT year, month, day, sched_dep_time, dep_delay, carrier, flight, tailnum, origin, dest,"
        " time_hour, sched_dep_utc FROM read_parquet(?) LIMIT 1",
        [str(flights_parquet)],
    ).fetchone()

    # THEN the derived column is the scheduled minute in UTC
    assert first == (
        2013, 1, 1, 515, 2.0, "UA", 1545, "N14228", "EWR", "IAH",
        dt.datetime(2013, 1, 1, 10, 0), dt.datetime(2013, 1, 1, 10, 15),
    )  # fmt: skip


def test_sched_dep_utc_is_time_hour_plus_scheduled_minutes(
    flights_parquet: Path, con: duckdb.DuckDBPyConnection
) -> None:
    mismatches, first, last = con.execute(
        "SELECT count(*) FILTER (WHERE sched_dep_utc <> time_hour + to_minutes(CAST(sched_dep_time % 100 AS BIGINT))"
        "   OR minute(sched_dep_utc) <> minute OR sched_dep_utc IS NULL),"
        " min(sched_dep_utc), max(sched_dep_utc) FROM read_parquet(?)",
        [str(flights_parquet)],
    ).fetchone()

    assert mismatches == 0
    # 2013 in New York local time = 2013-01-01 05:00 EST .. 2013-12-31 23:59 EST, in UTC:
    assert dt.datetime(2013, 1, 1, 10, 0) <= first and last < dt.datetime(2014, 1, 1, 5, 0)


def test_na_becomes_null(flights_parquet: Path, con: duckdb.DuckDBPyConnection) -> None:
    nulls = con.execute(
        "SELECT count(*) - count(dep_time), count(*) - count(arr_delay), count(*) - count(tailnum),"
        " count(*) - count(time_hour) FROM read_parquet(?)",
        [str(flights_parquet)],
    ).fetchone()

    # cancelled flights have no dep_time; diverted/cancelled have no arr_delay; some planes have no tail number
    assert nulls == (8255, 9430, 2512, 0)


def test_second_call_keeps_the_valid_file(flights_parquet: Path) -> None:
    before = flights_parquet.stat()

    again = ensure_flights_parquet()

    after = again.stat()
    assert again == flights_parquet
    assert (after.st_ino, after.st_mtime_ns, after.st_size) == (before.st_ino, before.st_mtime_ns, before.st_size)


def test_invalid_file_is_rebuilt_atomically(tmp_path: Path) -> None:
    # GIVEN a truncated file where the Parquet should be
    target = tmp_path / "flights" / "flights.parquet"
    target.parent.mkdir()
    target.write_bytes(b"PAR1 not really")
    assert not data.is_valid_flights_parquet(target)

    # WHEN ensured
    built = ensure_flights_parquet(tmp_path)

    # THEN it is rebuilt, valid, and no temporary file or directory is left behind
    assert built == target
    assert data.is_valid_flights_parquet(target)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["flights"]
    assert sorted(p.name for p in target.parent.iterdir()) == ["flights.parquet"]


def test_main_prints_path_rows_and_size(flights_parquet: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert data.main([]) == 0

    out = capsys.readouterr().out
    assert str(flights_parquet) in out
    assert "rows=336776" in out
    assert f"size={flights_parquet.stat().st_size} bytes" in out
