"""local.emulators.duckdb_engine.scan: DataScannedInBytes as Athena would bill it, checked by hand.

A small Hive-partitioned table ``events`` (3 days ``dt=2013-11-20..22``, each file 3 row groups of 2,048 rows,
``ts`` sorted: the row groups hold 00:00-08:00, 08:00-16:00 and 16:00-24:00 of their day) and an unpartitioned
table ``flat`` (2 files directly in its directory, 2 row groups each, ``k`` sorted 0..8191). Every expected
number is a sum of ``total_compressed_size`` read here from ``parquet_metadata()``, chunk by chunk.
"""

from __future__ import annotations

import json
import shutil
import uuid
from collections.abc import Iterable
from pathlib import Path

import duckdb
import pytest

from athena_refresh.engine import Column, QueryExecution
from local.emulators.duckdb_engine import DuckDBQueryEngine, prepare_query
from local.emulators.duckdb_engine.layout import MetadataCache, list_table
from local.emulators.duckdb_engine.scan import ScanReport, TableSchema, account, find_scans, scanned_bytes

DAYS = ("2013-11-20", "2013-11-21", "2013-11-22")
ROWS_PER_DAY = 3 * 2048
ROWS_FLAT = 4 * 2048
EVENT_COLUMNS = ("ts", "i", "d", "s")

# (day, row group, column) -> total_compressed_size; (file, row group, column) for flat
Chunks = dict[tuple[str, int, str], int]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("scan-data")
    with duckdb.connect() as con:
        con.execute("SET TimeZone = 'UTC'")
        con.execute(
            f"""CREATE TABLE src AS SELECT
                  TIMESTAMP '2013-11-20 00:00:00' + to_microseconds((i * 86400000000 // {ROWS_PER_DAY})::BIGINT) AS ts,
                  i, (i * 1.5)::DOUBLE AS d, 'c' || (i % 5) AS s,
                  strftime(TIMESTAMP '2013-11-20 00:00:00'
                           + to_microseconds((i * 86400000000 // {ROWS_PER_DAY})::BIGINT), '%Y-%m-%d') AS dt
                FROM range({3 * ROWS_PER_DAY}) AS r(i)"""
        )
        events = root / "events"
        con.execute(
            f"COPY (SELECT * FROM src ORDER BY ts) TO '{events}' (FORMAT parquet, PARTITION_BY (dt), ROW_GROUP_SIZE 2048)"
        )
        # Files Athena does not read: hidden names and directories, and a file outside the partitions.
        extra = "COPY (SELECT ts, i, d, s FROM src LIMIT 10) TO '{}' (FORMAT parquet)"
        for hidden in ("dt=2013-11-20/_tmp.parquet", "dt=2013-11-20/.part.parquet", "stray.parquet"):
            con.execute(extra.format(events / hidden))
        (events / "_staging" / "dt=2013-11-23").mkdir(parents=True)
        con.execute(extra.format(events / "_staging" / "dt=2013-11-23" / "data.parquet"))
        (events / "_SUCCESS").write_text("")

        flat = root / "flat"
        flat.mkdir()
        for name, first in (("a.parquet", 0), ("b.parquet", ROWS_FLAT // 2)):
            con.execute(
                f"COPY (SELECT i AS k, 'c' || (i % 3) AS s, i * 0.25 AS v FROM range({first}, {first + ROWS_FLAT // 2})"
                f" AS r(i) ORDER BY k) TO '{flat / name}' (FORMAT parquet, ROW_GROUP_SIZE 2048)"
            )
        (root / "nested").mkdir()
        con.execute(
            f"COPY (SELECT i AS id, {{'a': i, 'b': 'x' || i}} AS r FROM range(100) AS t(i))"
            f" TO '{root / 'nested' / 'n.parquet'}' (FORMAT parquet)"
        )
        ghost = root / "ghost"
        ghost.mkdir()
        con.execute(extra.format(ghost / "_only_hidden.parquet"))
    return root


def _chunks(files: dict[str, Path]) -> Chunks:
    with duckdb.connect() as con:
        rows = con.execute(
            "SELECT file_name, row_group_id, path_in_schema, total_compressed_size FROM parquet_metadata(?)",
            [[str(p) for p in files.values()]],
        ).fetchall()
    label = {str(path): key for key, path in files.items()}
    return {(label[f], int(rg), col): int(size) for f, rg, col, size in rows}


@pytest.fixture(scope="module")
def event_chunks(data_dir: Path) -> Chunks:
    return _chunks({day: data_dir / "events" / f"dt={day}" / "data_0.parquet" for day in DAYS})


@pytest.fixture(scope="module")
def flat_chunks(data_dir: Path) -> Chunks:
    return _chunks({name: data_dir / "flat" / f"{name}.parquet" for name in ("a", "b")})


def total(
    chunks: Chunks, *, columns: Iterable[str], parts: Iterable[str] | None = None, row_groups: Iterable[int] = (0, 1, 2)
) -> int:
    """Sum of the chunks of `columns` in `row_groups` of the files/days `parts` (all when None)."""
    wanted_parts = None if parts is None else set(parts)
    wanted_columns, wanted_groups = set(columns), set(row_groups)
    return sum(
        size
        for (part, rg, col), size in chunks.items()
        if (wanted_parts is None or part in wanted_parts) and rg in wanted_groups and col in wanted_columns
    )


def report(data_dir: Path, sql: str, parameters: list[str] | None = None, table: str = "events") -> ScanReport:
    with duckdb.connect() as con:
        con.execute("SET TimeZone = 'UTC'")
        return scanned_bytes(con, data_dir / table, sql, parameters=parameters or [])


# --------------------------------------------------------------------------------------------------
# The layout
# --------------------------------------------------------------------------------------------------
def test_the_fixture_has_the_intended_row_groups(event_chunks: Chunks, flat_chunks: Chunks) -> None:
    assert {(day, rg) for day, rg, _ in event_chunks} == {(day, rg) for day in DAYS for rg in range(3)}
    assert {col for _, _, col in event_chunks} == set(EVENT_COLUMNS)  # dt is only in the paths
    assert {(f, rg) for f, rg, _ in flat_chunks} == {(f, rg) for f in "ab" for rg in range(2)}


def test_list_table_skips_hidden_files_and_files_outside_the_partitions(data_dir: Path) -> None:
    layout = list_table(data_dir / "events")

    assert [f.path.relative_to(data_dir / "events").as_posix() for f in layout.files] == [
        f"dt={day}/data_0.parquet" for day in DAYS
    ]
    assert layout.partition_keys == ("dt",)
    assert [f.partition for f in layout.files] == [(("dt", day),) for day in DAYS]
    assert list_table(data_dir / "flat").partition_keys == ()
    assert list_table(data_dir / "ghost").files == ()


# --------------------------------------------------------------------------------------------------
# Columns and pruning, by hand
# --------------------------------------------------------------------------------------------------
def test_select_star_reads_every_chunk_of_every_file(data_dir: Path, event_chunks: Chunks) -> None:
    scan = report(data_dir, "SELECT * FROM events")

    assert scan.bytes == sum(event_chunks.values())
    assert (scan.files_total, scan.files_read, scan.row_groups_total, scan.row_groups_read) == (3, 3, 9, 9)
    assert scan.columns == tuple(sorted(EVENT_COLUMNS)) and scan.scans == 1


def test_one_referenced_column_reads_only_its_chunks(data_dir: Path, event_chunks: Chunks) -> None:
    scan = report(data_dir, "SELECT max(i) AS m FROM events")

    assert scan.bytes == total(event_chunks, columns=["i"])
    assert scan.columns == ("i",)


def test_a_partition_filter_keeps_one_partition(data_dir: Path, event_chunks: Chunks) -> None:
    scan = report(data_dir, "SELECT i FROM events WHERE dt = '2013-11-21'")

    assert scan.bytes == total(event_chunks, columns=["i"], parts=["2013-11-21"])
    assert (scan.files_read, scan.row_groups_read) == (1, 3)


def test_min_max_statistics_on_the_sorted_timestamp_keep_one_row_group(data_dir: Path, event_chunks: Chunks) -> None:
    scan = report(
        data_dir,
        "SELECT i FROM events WHERE ts >= TIMESTAMP '2013-11-21 08:00:00'"
        " AND ts < CAST('2013-11-21 16:00:00' AS timestamp)",
    )

    assert scan.bytes == total(event_chunks, columns=["i", "ts"], parts=["2013-11-21"], row_groups=[1])
    assert (scan.files_read, scan.row_groups_read) == (3, 1)  # every file's footer, one row group


def test_partition_and_statistics_pruning_combine_like_the_job_query(data_dir: Path, event_chunks: Chunks) -> None:
    sql = (
        "SELECT s, count(*) AS n FROM events WHERE ts >= CAST(? AS timestamp) AND ts < CAST(? AS timestamp)"
        " AND dt BETWEEN ? AND ? GROUP BY s ORDER BY s"
    )
    window = ["'2013-11-21 16:00:00'", "'2013-11-22 08:00:00'"]

    both_days = report(data_dir, sql, [*window, "'2013-11-21'", "'2013-11-22'"])
    second_day = report(data_dir, sql, [*window, "'2013-11-22'", "'2013-11-22'"])

    columns = ["s", "ts"]
    assert both_days.bytes == total(event_chunks, columns=columns, parts=["2013-11-21"], row_groups=[2]) + total(
        event_chunks, columns=columns, parts=["2013-11-22"], row_groups=[0]
    )
    assert (both_days.files_read, both_days.row_groups_read) == (2, 2)
    assert second_day.bytes == total(event_chunks, columns=columns, parts=["2013-11-22"], row_groups=[0])
    assert (second_day.files_read, second_day.row_groups_read) == (1, 1)


@pytest.mark.parametrize(
    ("where", "parts", "row_groups"),
    [
        ("i IN (1, 2, 3)", ["2013-11-20"], [0]),  # IN of constants
        ("100 > i", ["2013-11-20"], [0]),  # constant first
        ("i BETWEEN 2048 AND 2050", ["2013-11-20"], [1]),
        ("i = 2 * 3072 + 5", ["2013-11-21"], [0]),  # a constant expression, folded by DuckDB
        ("i >= 17000 AND dt <> '2013-11-20'", ["2013-11-22"], [2]),
        ("(i < 10) AND (1 = 1)", ["2013-11-20"], [0]),
    ],
)
def test_comparisons_with_constants_prune(
    data_dir: Path, event_chunks: Chunks, where: str, parts: list[str], row_groups: list[int]
) -> None:
    scan = report(data_dir, f"SELECT i FROM events WHERE {where}")

    assert scan.bytes == total(event_chunks, columns=["i"], parts=parts, row_groups=row_groups)


@pytest.mark.parametrize(
    "where",
    [
        "ts < TIMESTAMP '2013-11-20 01:00:00' OR dt = '2013-11-22'",  # OR: no pruning
        "NOT (ts < TIMESTAMP '2013-11-20 01:00:00')",
        "date(ts) = DATE '2013-11-20'",  # a function of the column
        "ts IS NOT NULL",
        "ts <> TIMESTAMP '2013-11-20 01:00:00'",
        "ts < (SELECT min(ts) FROM events)",  # a subquery is not a constant
    ],
)
def test_other_filters_do_not_prune(data_dir: Path, event_chunks: Chunks, where: str) -> None:
    scan = report(data_dir, f"SELECT i FROM events WHERE {where}")

    assert scan.row_groups_read == 9
    assert scan.bytes >= total(event_chunks, columns=["i", "ts"])


def test_a_filter_on_an_outer_join_nullable_side_does_not_prune(data_dir: Path, event_chunks: Chunks) -> None:
    scan = report(data_dir, "SELECT e.i FROM flat f LEFT JOIN events e ON f.k = e.i WHERE e.dt = '2013-11-20'")

    assert scan.bytes == total(event_chunks, columns=["i"])


@pytest.mark.parametrize(
    "sql",
    ["SELECT count(*) AS n FROM events", "SELECT dt, count(*) AS n FROM events WHERE dt > '2013-11-20' GROUP BY dt"],
)
def test_referencing_no_data_column_reads_no_bytes(data_dir: Path, sql: str) -> None:
    scan = report(data_dir, sql)

    assert scan.bytes == 0 and scan.columns == ()


# --------------------------------------------------------------------------------------------------
# Aliases, joins, CTEs, subqueries
# --------------------------------------------------------------------------------------------------
def test_aliases_and_qualified_columns(data_dir: Path, event_chunks: Chunks) -> None:
    scan = report(
        data_dir, 'SELECT e.i FROM "awsdatacatalog"."db".events AS e WHERE e.dt = \'2013-11-20\' AND e.d < 100'
    )

    assert scan.bytes == total(event_chunks, columns=["i", "d"], parts=["2013-11-20"], row_groups=[0])


def test_a_self_join_scans_the_table_twice(data_dir: Path, event_chunks: Chunks) -> None:
    scan = report(data_dir, "SELECT a.i, b.s FROM events a JOIN events b ON a.i = b.i WHERE a.dt = '2013-11-20'")

    assert scan.bytes == total(event_chunks, columns=["i"], parts=["2013-11-20"]) + total(
        event_chunks, columns=["i", "s"]
    )
    assert scan.scans == 2 and scan.columns == ("i", "s")


def test_a_cte_is_scanned_once_per_reference_and_an_unused_one_never(data_dir: Path, event_chunks: Chunks) -> None:
    twice = report(
        data_dir,
        "WITH w AS (SELECT i, s FROM events WHERE dt = '2013-11-22') SELECT x.i FROM w x JOIN w y ON x.s = y.s",
    )
    unused = report(data_dir, "WITH u AS (SELECT * FROM events) SELECT i FROM events WHERE dt = '2013-11-20'")

    assert twice.bytes == 2 * total(event_chunks, columns=["i", "s"], parts=["2013-11-22"])
    assert twice.scans == 2
    assert unused.bytes == total(event_chunks, columns=["i"], parts=["2013-11-20"]) and unused.scans == 1


def test_columns_in_group_order_having_windows_and_subqueries_count(data_dir: Path, event_chunks: Chunks) -> None:
    scan = report(
        data_dir,
        "SELECT s, rank() OVER (PARTITION BY s ORDER BY max(i)) AS r FROM events e"
        " WHERE i > (SELECT 1) AND EXISTS (SELECT 1 FROM flat WHERE flat.k = e.i AND e.ts IS NOT NULL)"
        " GROUP BY s HAVING count(*) > 0 ORDER BY r",
    )

    assert scan.columns == ("i", "s", "ts")
    assert scan.bytes == total(event_chunks, columns=["i", "s", "ts"])


def test_two_tables_and_an_ambiguous_column(data_dir: Path, event_chunks: Chunks, flat_chunks: Chunks) -> None:
    # `s` is in both tables: counted for both (an over-estimate); `v` only in flat; the IN subquery prunes events.
    tree = prepare_query(
        "SELECT v, s FROM events e JOIN flat f ON e.i = f.k WHERE f.k IN (SELECT i FROM events WHERE dt = '2013-11-22')",
        [],
    ).tree
    with duckdb.connect() as con:
        reports = account(
            con, tree, {name: list_table(data_dir / name) for name in ("events", "flat")}, MetadataCache()
        )

    assert reports["events"].bytes == total(event_chunks, columns=["i", "s"]) + total(
        event_chunks, columns=["i"], parts=["2013-11-22"]
    )
    assert reports["flat"].bytes == total(flat_chunks, columns=["k", "s", "v"], row_groups=[0, 1])
    assert reports["flat"].scans == 1 and reports["events"].scans == 2


def test_an_unpartitioned_table(data_dir: Path, flat_chunks: Chunks) -> None:
    everything = report(data_dir, "SELECT * FROM flat", table="flat")
    last_group = report(data_dir, "SELECT sum(v) AS v FROM flat WHERE k >= 6144", table="flat")

    assert everything.bytes == sum(flat_chunks.values())
    assert (everything.files_total, everything.row_groups_total) == (2, 4)
    assert last_group.bytes == total(flat_chunks, columns=["k", "v"], parts=["b"], row_groups=[1])
    assert last_group.row_groups_read == 1


@pytest.mark.parametrize(
    "sql", ["SELECT r.a FROM nested", "SELECT n.r.a FROM nested AS n", "SELECT id FROM nested WHERE r.a = 5"]
)
def test_a_field_of_a_row_column_reads_the_whole_column(data_dir: Path, sql: str) -> None:
    chunks = _chunks({"n": data_dir / "nested" / "n.parquet"})
    expected = sum(size for (_, _, col), size in chunks.items() if col.startswith("r, "))
    if "id" in sql:
        expected += sum(size for (_, _, col), size in chunks.items() if col == "id")

    scan = report(data_dir, sql, table="nested")

    assert scan.bytes == expected and "r" in scan.columns


def test_unanalysable_sql_counts_whole_tables() -> None:
    tree = prepare_query("SELECT i FROM events JOIN events ON true", []).tree  # the same alias twice
    scans = find_scans(tree, {"events": TableSchema(frozenset({"i", "s"}))})

    assert scans and all(s.columns is None and not s.range_filters for s in scans)


# --------------------------------------------------------------------------------------------------
# Through the engine
# --------------------------------------------------------------------------------------------------
def run(engine: DuckDBQueryEngine, sql: str, parameters: list[str] | None = None) -> tuple[str, QueryExecution]:
    query_execution_id = engine.start_query(
        sql=sql, parameters=parameters or [], client_request_token=f"scan-{uuid.uuid4().hex}"
    )
    return query_execution_id, engine.get_query(query_execution_id)


@pytest.fixture()
def engine(data_dir: Path, tmp_path: Path) -> DuckDBQueryEngine:
    with DuckDBQueryEngine(data_dir=data_dir, state_dir=tmp_path / "state") as instance:
        yield instance


def test_the_engine_reports_the_accounting(engine: DuckDBQueryEngine, data_dir: Path, tmp_path: Path) -> None:
    sql = (
        "SELECT s, count(*) AS n FROM events WHERE ts >= CAST(? AS timestamp) AND ts < CAST(? AS timestamp)"
        " AND dt BETWEEN ? AND ? GROUP BY s ORDER BY s"
    )
    parameters = ["'2013-11-21 16:00:00'", "'2013-11-22 08:00:00'", "'2013-11-21'", "'2013-11-22'"]

    query_execution_id, execution = run(engine, sql, parameters)

    expected = report(data_dir, sql, parameters)
    assert execution.state == "SUCCEEDED"
    assert execution.statistics.data_scanned_bytes == expected.bytes > 0
    record = json.loads((tmp_path / "state" / "queries" / f"{query_execution_id}.json").read_text())
    assert record["data_scanned_bytes"] == expected.bytes
    assert record["scan"] == {"events": expected.as_dict()}
    assert sum(row["n"] for row in engine.get_results(query_execution_id).rows) == 2 * 2048


def test_hive_partitions_are_varchar_columns_and_hidden_files_are_ignored(engine: DuckDBQueryEngine) -> None:
    query_execution_id, execution = run(engine, "SELECT dt, count(*) AS n FROM events GROUP BY dt ORDER BY dt")
    result = engine.get_results(query_execution_id)
    _, flat = run(engine, "SELECT count(*) AS n FROM flat")

    assert result.columns == (Column("dt", "varchar"), Column("n", "bigint"))
    assert result.rows == [{"dt": day, "n": ROWS_PER_DAY} for day in DAYS]  # no _tmp, .part, _staging, stray
    assert execution.statistics.data_scanned_bytes == 0
    assert flat.state == "SUCCEEDED"


def test_partition_values_compare_as_strings(engine: DuckDBQueryEngine) -> None:
    query_execution_id, _ = run(
        engine, "SELECT count(*) AS n FROM events WHERE dt BETWEEN ? AND ?", ["'2013-11-21'", "'2013-11-22'"]
    )

    assert engine.get_results(query_execution_id).rows == [{"n": 2 * ROWS_PER_DAY}]


def test_a_table_with_only_hidden_files_does_not_exist(engine: DuckDBQueryEngine) -> None:
    _, execution = run(engine, "SELECT count(*) AS n FROM ghost")

    assert execution.state == "FAILED"
    assert execution.error.error_message.startswith("TABLE_NOT_FOUND")


def test_a_new_partition_is_seen_by_the_next_query(data_dir: Path, tmp_path: Path) -> None:
    copy = tmp_path / "data"
    shutil.copytree(data_dir / "events", copy / "events")
    with DuckDBQueryEngine(data_dir=copy, state_dir=tmp_path / "state") as engine:
        first_id, first = run(engine, "SELECT count(i) AS n FROM events")
        new_day = copy / "events" / "dt=2013-11-23"
        new_day.mkdir()
        shutil.copy(copy / "events" / "dt=2013-11-22" / "data_0.parquet", new_day / "data_0.parquet")
        second_id, second = run(engine, "SELECT count(i) AS n FROM events")

        assert engine.get_results(first_id).rows == [{"n": 3 * ROWS_PER_DAY}]
        assert engine.get_results(second_id).rows == [{"n": 4 * ROWS_PER_DAY}]
    extra = (new_day / "data_0.parquet").stat().st_size
    assert second.statistics.data_scanned_bytes > first.statistics.data_scanned_bytes
    assert second.statistics.data_scanned_bytes - first.statistics.data_scanned_bytes < extra
