"""A local table's files and Hive partitions (:func:`list_table`), and their Parquet metadata, read once per file
(:class:`MetadataCache`): what :mod:`.scan` prices a query's reads with.

- ``<table dir>/**/*.parquet``. Path parts (directories or files) starting with ``_`` or ``.`` are hidden, as in
  Trino's Hive connector (``HiveFileIterator``: "Hive ignores files starting with _ and .").
- ``key=value`` directories are Hive partitions (values percent-decoded, ``__HIVE_DEFAULT_PARTITION__`` is NULL,
  as DuckDB reads them); once a table has partitioned files, files outside a partition directory are not part
  of the table (Athena reads only partition locations).
- ``parquet_metadata()`` (one row per column chunk per row group) is read with one call for all new files and
  kept per (path, mtime, size).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final
from urllib.parse import unquote

import duckdb

__all__ = ["HIVE_DEFAULT_PARTITION", "Chunk", "FileMetadata", "MetadataCache", "TableFile", "TableLayout", "list_table"]

#: The directory name Hive (and DuckDB) use for a NULL partition value.
HIVE_DEFAULT_PARTITION: Final = "__HIVE_DEFAULT_PARTITION__"


# --------------------------------------------------------------------------------------------------
# Tables: files and partitions
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TableFile:
    """One Parquet file of a table and its Hive partition values (``(key, value)`` in path order)."""

    path: Path
    partition: tuple[tuple[str, str | None], ...] = ()


@dataclass(frozen=True)
class TableLayout:
    """A table directory: its visible Parquet files (sorted) and its partition keys (lowercase)."""

    name: str
    directory: Path
    files: tuple[TableFile, ...]
    partition_keys: tuple[str, ...] = ()


def list_table(directory: Path, name: str | None = None) -> TableLayout:
    """The visible ``*.parquet`` files under `directory` (recursively) and their Hive partitions.

    Hidden path parts (``_x``, ``.x``) are skipped. In a partitioned table (any file under ``key=value/``),
    the files outside partition directories are left out. A missing directory is a table without files.
    """
    directory = Path(directory)
    found: list[TableFile] = []
    for dirpath, dirnames, filenames in os.walk(directory):
        dirnames[:] = sorted(d for d in dirnames if not _hidden(d))
        relative = Path(dirpath).relative_to(directory).parts
        partition = tuple(_partition_part(part) for part in relative if "=" in part[1:])
        for filename in sorted(filenames):
            if filename.endswith(".parquet") and not _hidden(filename):
                found.append(TableFile(Path(dirpath) / filename, partition))
    partitioned = [f for f in found if f.partition]
    files = partitioned or found
    keys = tuple(key for key, _ in partitioned[0].partition) if partitioned else ()
    return TableLayout(name or directory.name, directory, tuple(sorted(files, key=lambda f: f.path)), keys)


def _hidden(name: str) -> bool:
    return name.startswith(("_", "."))


def _partition_part(part: str) -> tuple[str, str | None]:
    key, value = part.split("=", 1)
    return key.lower(), None if value == HIVE_DEFAULT_PARTITION else unquote(value)


# --------------------------------------------------------------------------------------------------
# Parquet metadata, cached per file
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Chunk:
    """One column chunk: its top-level column (lowercase), size and statistics (text, as DuckDB prints them)."""

    column: str
    leaf: bool  # the chunk is the whole column (not a field of a nested one): its statistics may prune
    compressed_bytes: int
    min_value: str | None
    max_value: str | None
    nan_count: int | None


#: A file's row groups, each a tuple of its column chunks (in row group order).
FileMetadata = tuple[tuple[Chunk, ...], ...]


class MetadataCache:
    """``parquet_metadata()`` and column types per file, reloaded when the file's mtime or size changes.

    Safe to share between threads (several engines): two may load the same file, the last one is kept.
    """

    def __init__(self) -> None:
        self._files: dict[str, tuple[tuple[int, int], FileMetadata]] = {}
        self._types: dict[str, tuple[tuple[int, int], dict[str, str]]] = {}
        self._lock = threading.Lock()

    def file_metadata(self, con: duckdb.DuckDBPyConnection, paths: Sequence[Path]) -> list[FileMetadata]:
        """The row groups of each file of `paths`, reading the metadata of new or changed files in one call."""
        keys = {str(p): _file_key(p) for p in paths}
        with self._lock:
            entries = {name: self._files.get(name) for name in keys}
        cached = {name: entry[1] for name, entry in entries.items() if entry is not None and entry[0] == keys[name]}
        missing = [name for name in keys if name not in cached]
        if missing:
            rows = con.execute(
                "SELECT file_name, row_group_id, path_in_schema, total_compressed_size, stats_min_value,"
                " stats_max_value, stats_nan_count FROM parquet_metadata(?) ORDER BY file_name, row_group_id",
                [missing],
            ).fetchall()
            grouped: dict[str, dict[int, list[Chunk]]] = {name: {} for name in missing}
            for file_name, row_group, path_in_schema, size, low, high, nans in rows:
                column = str(path_in_schema).split(", ")[0].lower()  # nested fields: "col, field, ..."
                chunk = Chunk(column, ", " not in path_in_schema, int(size or 0), low, high, nans)
                grouped.setdefault(file_name, {}).setdefault(int(row_group), []).append(chunk)
            for name in missing:
                cached[name] = tuple(tuple(grouped[name][i]) for i in sorted(grouped[name]))
            with self._lock:
                self._files.update((name, (keys[name], cached[name])) for name in missing)
        return [cached[str(p)] for p in paths]

    def column_types(self, con: duckdb.DuckDBPyConnection, path: Path) -> dict[str, str]:
        """Column name (lowercase) -> DuckDB type of one file, in file order."""
        key = _file_key(path)
        with self._lock:
            cached = self._types.get(str(path))
        if cached is None or cached[0] != key:
            rows = con.execute("DESCRIBE SELECT * FROM read_parquet(?)", [str(path)]).fetchall()
            cached = (key, {str(row[0]).lower(): str(row[1]) for row in rows})
            with self._lock:
                self._types[str(path)] = cached
        return cached[1]


def _file_key(path: Path) -> tuple[int, int]:
    stat = os.stat(path)
    return stat.st_mtime_ns, stat.st_size
