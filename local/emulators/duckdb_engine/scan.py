"""The bytes Athena would bill for a query (``DataScannedInBytes``), from the Parquet files' metadata.

Athena bills what it reads from S3. On Parquet, its reader fetches, in each file that partition pruning
keeps, the column chunks of the columns the query needs, in the row groups that predicate pushdown does not
exclude by their min/max statistics. This module computes that number for the local engine::

    DataScannedInBytes = sum over the table scans of the query (a scan run twice counts twice)
                           of total_compressed_size of the column chunks
                              of the data columns the scan references
                              in the row groups that survive partition and min/max pruning

from DuckDB's ``parquet_metadata()`` (one row per column chunk per row group). It never reads data pages.

- **Tables**: their files, partitions and Parquet metadata come from :mod:`.layout` (``list_table``,
  ``MetadataCache``).
- **Scans** and **pruning** (which tables, columns and filters a query reads): :mod:`.scans`.

:func:`scanned_bytes` is the one-table helper (a benchmark's breakdown); :func:`account` is what the engine
calls for every table of a query.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import duckdb
from sqlglot import exp

from .layout import FileMetadata, MetadataCache, TableLayout, list_table
from .scans import RangeFilter, Scan, TableSchema, find_scans
from .sql import prepare_query

__all__ = ["Scan", "ScanReport", "TableSchema", "account", "find_scans", "scanned_bytes"]

#: Column types whose Parquet min/max statistics are compared (after a cast from their text form).
_PRUNABLE_TYPE_RE: Final = re.compile(
    r"(BOOLEAN|TINYINT|SMALLINT|INTEGER|BIGINT|HUGEINT|UTINYINT|USMALLINT|UINTEGER|UBIGINT|FLOAT|DOUBLE"
    r"|DECIMAL\(\d+,\d+\)|VARCHAR|DATE|TIMESTAMP(_S|_MS|_NS| WITH TIME ZONE)?)"
)
_FLOAT_TYPES: Final = frozenset({"FLOAT", "DOUBLE"})


# --------------------------------------------------------------------------------------------------
# Accounting
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ScanReport:
    """What a query reads of one table (summed over its scans; the counts are distinct files/row groups)."""

    table: str
    bytes: int  # DataScannedInBytes of this table
    files_total: int
    files_read: int  # files left after partition pruning (by at least one scan)
    row_groups_total: int
    row_groups_read: int  # row groups left after partition and min/max pruning (by at least one scan)
    columns: tuple[str, ...]  # data columns read (sorted); partition columns are free
    scans: int = 1  # table scans run (a self-join: 2; a CTE read twice: 2)

    def as_dict(self) -> dict[str, Any]:
        return {
            "bytes": self.bytes,
            "files_total": self.files_total,
            "files_read": self.files_read,
            "row_groups_total": self.row_groups_total,
            "row_groups_read": self.row_groups_read,
            "columns": list(self.columns),
            "scans": self.scans,
        }


def account(
    con: duckdb.DuckDBPyConnection,
    tree: exp.Expr,
    layouts: Mapping[str, TableLayout],
    cache: MetadataCache,
) -> dict[str, ScanReport]:
    """The :class:`ScanReport` of each table of `layouts` (name -> layout) read by the bound query `tree`.

    Uses `con` for ``parquet_metadata()``, the columns' types and the pruning predicates (it must be able to
    read the files). Raises ``duckdb.Error`` or ``OSError`` when a file cannot be read.
    """
    metadata = {name: cache.file_metadata(con, [f.path for f in layout.files]) for name, layout in layouts.items()}
    types = {
        name: cache.column_types(con, layout.files[0].path) if layout.files else {} for name, layout in layouts.items()
    }
    schemas = {
        name: TableSchema(frozenset(types[name]) - set(layout.partition_keys), frozenset(layout.partition_keys))
        for name, layout in layouts.items()
    }
    scans = find_scans(tree, schemas)
    return {
        name: _table_report(
            con, layout, metadata[name], types[name], schemas[name], [s for s in scans if s.table == name]
        )
        for name, layout in layouts.items()
    }


def scanned_bytes(
    con: duckdb.DuckDBPyConnection,
    table_dir: Path | TableLayout,
    tree: exp.Expr | str,
    *,
    parameters: Sequence[str] = (),
    cache: MetadataCache | None = None,
) -> ScanReport:
    """What a query reads of one table: a benchmark's breakdown of ``DataScannedInBytes``.

    `table_dir` is the table's directory (its name is the table's name) or a :class:`TableLayout`; `tree`
    the bound tree of a prepared query (``prepare_query(...).tree``) or Trino SQL with `parameters`.

    >>> report = scanned_bytes(duckdb.connect(), Path(".cache/data/flights"), "SELECT origin FROM flights")  # doctest: +SKIP
    >>> report.bytes, report.files_read, report.row_groups_read  # doctest: +SKIP
    """
    layout = table_dir if isinstance(table_dir, TableLayout) else list_table(Path(table_dir))
    bound = prepare_query(tree, parameters).tree if isinstance(tree, str) else tree
    if bound is None:
        raise ValueError("no bound tree: pass prepare_query(...).tree or the SQL text")
    return account(con, bound, {layout.name: layout}, cache or MetadataCache())[layout.name]


def _table_report(
    con: duckdb.DuckDBPyConnection,
    layout: TableLayout,
    metadata: list[FileMetadata],
    types: Mapping[str, str],
    schema: TableSchema,
    scans: list[Scan],
) -> ScanReport:
    files_read: set[int] = set()
    row_groups_read: set[tuple[int, int]] = set()
    columns_read: set[str] = set()
    total = runs = 0
    for scan in scans:
        if scan.count <= 0:
            continue
        files = _prune_partitions(con, layout, scan.partition_filters)
        row_groups = _prune_row_groups(con, metadata, types, files, scan.range_filters)
        columns = schema.data if scan.columns is None else scan.columns & schema.data
        scan_bytes = sum(
            chunk.compressed_bytes
            for file, row_group in row_groups
            for chunk in metadata[file][row_group]
            if chunk.column in columns
        )
        total += scan_bytes * scan.count
        runs += scan.count
        files_read.update(files)
        row_groups_read.update(row_groups)
        columns_read |= columns
    return ScanReport(
        table=layout.name,
        bytes=total,
        files_total=len(layout.files),
        files_read=len(files_read),
        row_groups_total=sum(len(row_groups) for row_groups in metadata),
        row_groups_read=len(row_groups_read),
        columns=tuple(sorted(columns_read)),
        scans=runs,
    )


def _prune_partitions(con: duckdb.DuckDBPyConnection, layout: TableLayout, filters: Sequence[exp.Expr]) -> list[int]:
    """Indices of the files whose partition values make every filter true (DuckDB evaluates them)."""
    kept = list(range(len(layout.files)))
    if not filters or not layout.partition_keys:
        return kept
    keys = layout.partition_keys
    partitions = [dict(f.partition) for f in layout.files]
    columns = ", ".join(f'unnest(?::VARCHAR[]) AS "{key.replace(chr(34), chr(34) * 2)}"' for key in keys)
    for condition in filters:
        sql = (
            f"SELECT __i FROM (SELECT unnest(?::BIGINT[]) AS __i, {columns})"
            f" WHERE coalesce(({condition.sql(dialect='duckdb')}), false)"
        )
        values = [[partitions[i].get(key) for i in kept] for key in keys]
        try:
            true_for = {row[0] for row in con.execute(sql, [kept, *values]).fetchall()}
        except duckdb.Error:
            continue  # cannot evaluate it here: no pruning by this conjunct
        kept = [i for i in kept if i in true_for]
    return kept


def _prune_row_groups(
    con: duckdb.DuckDBPyConnection,
    metadata: list[FileMetadata],
    types: Mapping[str, str],
    files: Sequence[int],
    filters: Sequence[RangeFilter],
) -> list[tuple[int, int]]:
    """(file, row group) pairs of `files` that no range filter proves empty by the statistics."""
    kept = [(file, row_group) for file in files for row_group in range(len(metadata[file]))]
    for range_filter in filters:
        column_type = types.get(range_filter.column, "")
        if not _PRUNABLE_TYPE_RE.fullmatch(column_type):
            continue
        indices, lows, highs = [], [], []
        for position, (file, row_group) in enumerate(kept):
            chunk = next((c for c in metadata[file][row_group] if c.column == range_filter.column and c.leaf), None)
            if chunk is None or chunk.min_value is None or chunk.max_value is None:
                continue
            if column_type in _FLOAT_TYPES and chunk.nan_count != 0:
                continue  # NaN compares greater than any number in DuckDB: only NaN-free statistics prune
            indices.append(position)
            lows.append(chunk.min_value)
            highs.append(chunk.max_value)
        if not indices:
            continue
        sql = (
            f"SELECT __i FROM (SELECT __i, TRY_CAST(__low AS {column_type}) AS __min,"
            f" TRY_CAST(__high AS {column_type}) AS __max FROM (SELECT unnest(?::BIGINT[]) AS __i,"
            f" unnest(?::VARCHAR[]) AS __low, unnest(?::VARCHAR[]) AS __high))"
            f" WHERE NOT coalesce(({range_filter.keep.sql(dialect='duckdb')}), true)"
        )
        try:
            dropped = {row[0] for row in con.execute(sql, [indices, lows, highs]).fetchall()}
        except duckdb.Error:
            continue
        kept = [pair for position, pair in enumerate(kept) if position not in dropped]
    return kept
