"""One DuckDB session of :class:`.engine.DuckDBQueryEngine`: the connection, the tables' views, running a query and
accounting its bytes, and Athena's error shape for what fails.

- **Tables** are the directories of ``data_dir`` exposed as DuckDB views over their visible Parquet files (re-created
  when the files change; partition columns are VARCHAR). The session time zone is UTC, one thread (deterministic
  approximate aggregates); DuckDB may read files under ``data_dir`` only.
- **A query** is prepared (:mod:`.sql`), run, its values rendered as Athena text (:mod:`.values`) and its
  ``DataScannedInBytes`` accounted (:mod:`.scan`; an accounting failure bills every byte of the tables' files,
  never fails the query).
- **Failures** become the record of a FAILED execution: a rejected query or a DuckDB error is a user error
  (``ErrorCategory`` 2, ``ErrorType`` 1000, a Trino-style code first), anything else an internal one (1, 100).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

import duckdb

from . import python_functions
from .analysis import check_statement
from .layout import MetadataCache, TableLayout, list_table
from .scan import account
from .sql import BoundQuery, PreparedQuery, QueryRejected, bind_query, translate_query
from .trino_types import trino_type_text
from .values import _render

__all__ = ["DuckDBSession"]

logger = logging.getLogger("local.emulators.duckdb_engine.engine")

#: Athena ``AthenaError.ErrorCategory`` values (https://docs.aws.amazon.com/athena/latest/ug/error-reference.html).
ERROR_CATEGORY_SYSTEM: Final = 1
ERROR_CATEGORY_USER: Final = 2
#: Athena ``ErrorType`` values from the same catalog: 1000 "User error", 100 "Internal service error".
ERROR_TYPE_USER: Final = 1000
ERROR_TYPE_INTERNAL: Final = 100

_TABLE_NAME_RE: Final = re.compile(r"[a-z_][a-z0-9_]*")
#: Shared by the engines of a process (tests and tools create many): entries are keyed by path, mtime and size.
_METADATA: Final = MetadataCache()


class DuckDBSession:
    """The DuckDB connection of one engine over the tables of `data_dir` (opened on first use, thread-safe)."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self._con: duckdb.DuckDBPyConnection | None = None
        self._con_lock = threading.Lock()
        self._views: dict[str, tuple[str, ...]] = {}  # table -> the files of its view on the current connection
        self._schemas: dict[str, dict[str, str]] = {}  # table -> column -> Trino type, of the current views
        self._functions = False  # .python_functions registered on the current connection
        self._metadata = _METADATA  # Parquet metadata per file (path, mtime, size), for the bytes scanned

    def close(self) -> None:
        """Close the DuckDB connection (a later query opens a new one)."""
        with self._con_lock:
            if self._con is not None:
                self._con.close()
                self._con = None

    def execute(self, sql: str, params: list[str]) -> tuple[dict[str, Any], dict[str, Any] | None]:
        """Run the query now. Returns (outcome fields of the record, results or None when FAILED)."""
        started = time.perf_counter()
        duckdb_sql: str | None = None
        try:
            bound = _bound(sql, params)
            layouts = self._check_tables(bound.tables)
            with self._con_lock:
                con = self._connection()
                self._register_views(con, layouts)
                schema = {table: self._schemas[table] for table in layouts}
                checked = check_statement(sql, params, schema)
                if checked.refusal is not None:
                    raise QueryRejected(checked.refusal.error_code, checked.refusal.message)
                prepared = translate_query(bound, schema)
                duckdb_sql = prepared.duckdb_sql
                if not self._functions and python_functions.called(duckdb_sql):  # registered when first used
                    python_functions.register(con)
                    self._functions = True
                relation = con.sql(prepared.duckdb_sql)
                names = list(relation.columns)
                duck_types = list(relation.types)
                raw_rows = relation.fetchall()
                scan = self._account(con, prepared, layouts)
            columns, rows = _render(
                names, duck_types, raw_rows, prepared.output_zones, prepared.output_types, checked.result.output_types
            )
        except QueryRejected as exc:
            return self._failed(started, duckdb_sql, ERROR_CATEGORY_USER, ERROR_TYPE_USER, str(exc)), None
        except duckdb.Error as exc:
            if isinstance(exc, duckdb.FatalException):
                self._reset_connection()
            message = _user_message(exc)
            return self._failed(started, duckdb_sql, ERROR_CATEGORY_USER, ERROR_TYPE_USER, message), None
        except Exception as exc:  # a bug here, not in the query: Athena's "internal service error"
            logger.exception("local engine failure")
            message = f"INTERNAL_ERROR: {type(exc).__name__}: {exc}"
            return self._failed(started, duckdb_sql, ERROR_CATEGORY_SYSTEM, ERROR_TYPE_INTERNAL, message), None
        measured_ms = _elapsed_ms(started)
        record = {
            "outcome": "SUCCEEDED",
            "duckdb_sql": duckdb_sql,
            "measured_ms": measured_ms,
            "data_scanned_bytes": sum(int(report["bytes"]) for report in scan.values()),
            "scan": scan,
            "row_count": len(rows),
            "error": None,
        }
        return record, {"columns": columns, "rows": rows}

    @staticmethod
    def _failed(started: float, duckdb_sql: str | None, category: int, error_type: int, message: str) -> dict[str, Any]:
        return {
            "outcome": "FAILED",
            "duckdb_sql": duckdb_sql,
            "measured_ms": _elapsed_ms(started),
            "data_scanned_bytes": 0,
            "scan": {},
            "row_count": 0,
            "error": {
                "error_category": category,
                "error_type": error_type,
                "retryable": False,
                "error_message": message,
                "state_change_reason": message,
            },
        }

    def _check_tables(self, tables: Sequence[str]) -> dict[str, TableLayout]:
        """The files of each table the query reads; a table without a visible Parquet file -> rejected."""
        layouts = {}
        for table in tables:
            layout = list_table(self.data_dir / table, table) if _TABLE_NAME_RE.fullmatch(table) else None
            if layout is None or not layout.files:
                raise QueryRejected(
                    "TABLE_NOT_FOUND", f"Table '{table}' does not exist (no *.parquet in {self.data_dir / table})"
                )
            layouts[table] = layout
        return layouts

    def _account(
        self, con: duckdb.DuckDBPyConnection, prepared: PreparedQuery, layouts: dict[str, TableLayout]
    ) -> dict[str, dict[str, Any]]:
        """Per table, what the query reads (:class:`.scan.ScanReport` as a dict); never fails the query."""
        try:
            if prepared.tree is None:
                raise ValueError("the prepared query carries no tree")
            reports = account(con, prepared.tree, layouts, self._metadata)
            return {name: report.as_dict() for name, report in reports.items()}
        except Exception as exc:  # an accounting bug must not fail the query: bill every byte of every file
            logger.exception("scan accounting failed; reporting the tables' file sizes")
            return {
                name: {"bytes": _size(layout), "error": f"{type(exc).__name__}: {exc}"}
                for name, layout in layouts.items()
            }

    def _connection(self) -> duckdb.DuckDBPyConnection:
        if self._con is None:
            con = duckdb.connect(":memory:")
            try:
                con.execute("SET TimeZone = 'UTC'")
                # One thread: approx_quantile (approx_percentile) is then deterministic, so re-running a query
                # gives the same numbers (with several threads they vary run to run); still ~0.1 s per query.
                con.execute("SET threads = 1")
                # Only data_dir is readable; set before disabling external access (it cannot change after).
                con.execute("SET allowed_directories = ?", [[str(self.data_dir) + os.sep]])
                con.execute("SET enable_external_access = false")
            except BaseException:
                con.close()
                raise
            self._con = con
            self._views = {}
            self._schemas = {}
            self._functions = False
        return self._con

    def _reset_connection(self) -> None:
        with contextlib.suppress(Exception):
            if self._con is not None:
                self._con.close()
        self._con = None

    def _register_views(self, con: duckdb.DuckDBPyConnection, layouts: dict[str, TableLayout]) -> None:
        """One view per table over its files (re-created when they change); partition columns are VARCHAR."""
        for table, layout in layouts.items():
            paths = tuple(str(f.path) for f in layout.files)
            if self._views.get(table) == paths:
                continue
            listing = ", ".join("'" + path.replace("'", "''") + "'" for path in paths)
            hive = "true" if layout.partition_keys else "false"
            con.execute(
                f'CREATE OR REPLACE VIEW "{table}" AS SELECT * FROM read_parquet([{listing}],'
                f" hive_partitioning = {hive}, hive_types_autocast = false)"
            )
            self._views[table] = paths
            described = con.execute(f'DESCRIBE "{table}"').fetchall()
            self._schemas[table] = {str(row[0]).lower(): trino_type_text(row[1]) for row in described}


def _bound(sql: str, params: list[str]) -> BoundQuery:
    """The bound query; a statement that does not parse is refused in the SQL check's words when the check refuses it
    too (:mod:`.analysis`; the parameters are not read: they may be what failed), else in the binder's."""
    try:
        return bind_query(sql, params)
    except QueryRejected as exc:
        refusal = check_statement(sql, [], {}).refusal if exc.error_code == "SYNTAX_ERROR" else None
        if refusal is not None:
            raise QueryRejected(refusal.error_code, refusal.message) from exc
        raise


_RAISED = re.compile(
    r"^Invalid Input Error: (?:Python exception occurred while executing the UDF: \w+: )?(?P<code>[A-Z_]+): (?P<message>.*)$",
    re.DOTALL,
)
_NOT_CONVERTED = re.compile(r"Could not convert string '(?P<value>.*)' to (?P<type>\w+)")
_MISSING_FUNCTION = re.compile(r"(?:Scalar|Aggregate|Table) Function with name (?P<name>\w+) does not exist")
_OVERFLOW = re.compile(
    r"Overflow in (?P<operation>addition|subtraction|multiplication) of (?P<type>INT\d+) \((?P<operands>[^)]*)\)"
)
_UNKNOWN_COLUMN = re.compile(r'Referenced column "(?P<name>[^"]+)" not found')
_CANDIDATES = re.compile(r"Candidate bindings: (?P<names>[^\n]+)")
_NO_MATCH = re.compile(r"No function matches the given name and argument types '(?P<name>[^(']+)\((?P<types>[^)]*)\)'")
_BAD_TEMPORAL = re.compile(r'invalid (?P<type>date|timestamp) field format: "(?P<value>[^"]*)"')
_UNPARSED = re.compile(r'Could not parse string "(?P<value>[^"]*)" according to format')
_MAP_FAILURES = {
    "Map keys must be unique": "Duplicate map keys are not allowed",
    "Map keys can not be NULL": "map key cannot be null",
    "map key list does not align with the map value list": "Key and value arrays must be the same length",
}
_INTEGER_NAMES = {"INT8": "tinyint", "INT16": "smallint", "INT32": "integer", "INT64": "bigint"}
_TRINO_INTEGERS = {"INT8": "TINYINT", "INT16": "SMALLINT", "INT32": "INT", "INT64": "BIGINT"}


def _user_message(exc: duckdb.Error) -> str:
    """``CODE: message`` for a failed query: Trino's words where the failure is one Trino reports (a failed cast,
    a division by zero, a call the local engine cannot run), else DuckDB's text marked as the local engine's."""
    text = str(exc).strip()
    raised = _RAISED.match(text)
    if raised:  # raised by a rewrite of .trino_semantics with Trino's code and message
        return f"{raised['code']}: {raised['message'].splitlines()[0]}"
    if isinstance(exc, duckdb.InvalidInputException) and "Division by zero" in text:
        return "DIVISION_BY_ZERO: Division by zero"
    converted = _NOT_CONVERTED.search(text)
    if isinstance(exc, duckdb.ConversionException) and converted:
        target = _TRINO_INTEGERS.get(converted["type"], converted["type"].upper())
        return f"INVALID_CAST_ARGUMENT: Cannot cast '{converted['value']}' to {target}"
    missing = _MISSING_FUNCTION.search(text)
    if isinstance(exc, duckdb.CatalogException) and missing:
        return f"NOT_SUPPORTED: runs on Athena only: {missing['name'].lower()}; the local engine has no translation"
    map_failure = next((trino for duck_words, trino in _MAP_FAILURES.items() if duck_words in text), None)
    if isinstance(exc, duckdb.InvalidInputException) and map_failure:  # MapConstructor's words (map.md)
        return f"INVALID_FUNCTION_ARGUMENT: {map_failure}"
    if isinstance(exc, duckdb.InvalidInputException) and "Insufficient padding" in text:  # lpad/rpad with ''
        return "INVALID_FUNCTION_ARGUMENT: Padding string must not be empty"
    overflow = _OVERFLOW.search(text)
    if isinstance(exc, duckdb.OutOfRangeException) and overflow and overflow["type"] in _INTEGER_NAMES:
        kind = _INTEGER_NAMES[overflow["type"]]  # Trino: "integer addition overflow: 2147483647 + 1"
        return f"NUMERIC_VALUE_OUT_OF_RANGE: {kind} {overflow['operation']} overflow: {overflow['operands']}"
    if isinstance(exc, duckdb.OutOfRangeException) and "INT128" in text:  # .trino_semantics' exact decimal division
        return "NOT_SUPPORTED: runs on Athena only: decimal division of values beyond 38 digits; the check validated it"
    if isinstance(exc, duckdb.OutOfRangeException):
        return f"NUMERIC_VALUE_OUT_OF_RANGE: {_first_line(text)}"
    column = _UNKNOWN_COLUMN.search(text)
    if isinstance(exc, duckdb.BinderException) and column:  # Trino: "Column 'x' cannot be resolved"
        candidates = _CANDIDATES.search(text)
        hint = f"; candidates: {candidates['names'].strip()}" if candidates else ""
        return f"COLUMN_NOT_FOUND: Column '{column['name']}' cannot be resolved{hint}"
    mismatch = _NO_MATCH.search(text)
    if isinstance(exc, duckdb.BinderException) and mismatch:
        types = [_trino_words(t) for t in mismatch["types"].split(", ")]
        if not mismatch["name"].isidentifier() and len(types) == 2:
            return f"TYPE_MISMATCH: Cannot apply operator: {types[0]} {mismatch['name']} {types[1]}"
        return f"TYPE_MISMATCH: Unexpected parameters ({', '.join(types)}) for function {mismatch['name'].lower()}"
    bad_value = _BAD_TEMPORAL.search(text)
    if isinstance(exc, duckdb.ConversionException) and bad_value:
        return f"INVALID_CAST_ARGUMENT: Value cannot be cast to {bad_value['type']}: {bad_value['value']}"
    unparsed = _UNPARSED.search(text)
    if isinstance(exc, duckdb.InvalidInputException) and unparsed:
        return f'INVALID_FUNCTION_ARGUMENT: Invalid format: "{unparsed["value"]}"'
    return f"{_duckdb_error_code(exc)}: {_first_line(text)} (local engine)"


def _first_line(text: str) -> str:
    """DuckDB's message without its class prefix ("Binder Error: "), on one line."""
    return re.sub(r"^[A-Z][A-Za-z ]* Error: ", "", text.strip()).splitlines()[0].strip()


def _trino_words(duck_type: str) -> str:
    """A DuckDB type of an error message in Trino's words (INTEGER_LITERAL -> integer)."""
    return trino_type_text(duck_type.removesuffix("_LITERAL").replace("STRING", "VARCHAR"))


def _duckdb_error_code(exc: duckdb.Error) -> str:
    """A Trino-style error code for a DuckDB exception (Athena prefixes its messages with one)."""
    if isinstance(exc, duckdb.ParserException):
        return "SYNTAX_ERROR"
    if isinstance(exc, duckdb.ConversionException):
        return "INVALID_CAST_ARGUMENT"
    if isinstance(exc, duckdb.OutOfRangeException):
        return "NUMERIC_VALUE_OUT_OF_RANGE"
    message = str(exc)
    if isinstance(exc, duckdb.CatalogException) and "Table with name" in message:
        return "TABLE_NOT_FOUND"
    if isinstance(exc, duckdb.CatalogException) and "Function with name" in message:
        return "FUNCTION_NOT_FOUND"
    if isinstance(exc, duckdb.BinderException) and "Referenced column" in message:
        return "COLUMN_NOT_FOUND"
    return "GENERIC_USER_ERROR"


def _size(layout: TableLayout) -> int:
    total = 0
    for file in layout.files:
        with contextlib.suppress(OSError):
            total += file.path.stat().st_size
    return total


def _elapsed_ms(started: float) -> int:
    return max(0, round((time.perf_counter() - started) * 1000))
