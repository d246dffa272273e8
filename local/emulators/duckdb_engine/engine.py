"""A local stand-in for Athena: the job's Trino SQL, run by DuckDB on Parquet files, behind ``QueryEngine``.

``DuckDBQueryEngine`` implements the protocol of ``athena_refresh.engine`` (see ``docs/engine-interface.md``)
with Athena's observable behaviour, so the job cannot tell it from ``AthenaQueryEngine``:

- **SQL**: Trino (Athena engine v3) is parsed with sqlglot and generated as DuckDB SQL. Tables are the
  directories of ``data_dir`` (``flights`` -> ``data_dir/flights/*.parquet``) exposed as DuckDB views;
  catalog and database qualifiers are dropped (Athena's ``QueryExecutionContext`` plays that role). The
  session time zone is UTC. Only one SELECT (or other query) statement per execution, as in Athena.
  DuckDB may read files under ``data_dir`` only (``allowed_directories`` + ``enable_external_access=false``).
- **ExecutionParameters** (Athena semantics: SQL literal text, strings with their quotes) are never
  formatted into the SQL string. The query is parsed; every ``?`` placeholder is replaced, in source
  order, by the parsed literal; then DuckDB SQL is generated from the tree. A value that is not a literal
  (a literal, ``NULL``, ``true``/``false``, a negative number, ``TIMESTAMP '...'``/``DATE '...'``/``CAST``
  of a literal, ``INTERVAL '1' DAY``, ``X'AB'``), or a placeholder count that differs from the parameter
  count, makes the query FAILED (user error), as Athena does.
- **Idempotency across processes**: ``client_request_token`` maps to one query execution id through a
  token file created exclusively (``os.link`` of a complete temporary file: like ``O_CREAT|O_EXCL`` but
  never visible half-written). The same token with the same SQL and parameters returns the same id; with
  different ones it raises ``QueryEngineError`` (Athena: ``InvalidRequestException``).
- **Server-side execution that outlives the caller**: ``start_query`` runs the query synchronously and
  stores its outcome, typed results and statistics in ``state_dir`` before publishing the token, so any
  process that learns the id (from a token or from the lock table) can adopt it with ``get_query`` /
  ``get_results``. ``get_query`` reports QUEUED during the first tenth of ``simulated_duration_ms`` and
  RUNNING until ``submitted_at_ms + simulated_duration_ms`` by ``clock_ms``, then SUCCEEDED or FAILED.
  The duration is stored with the execution: every engine instance sees the same timeline.
- **Values**: DuckDB values are rendered as the text Athena would put in ``VarCharValue`` (timestamps
  ``2013-01-01 05:00:00.000``, decimals exact, ``true``/``false``) and converted by
  ``athena_refresh.engine.convert_value``: both engines share one conversion. Column types are Trino names
  (``bigint``, ``double``, ``varchar``, ``timestamp``, ``decimal``, ...). DuckDB's HUGEINT (``count_if``,
  ``sum`` of integers) is reported as ``bigint``; a value outside bigint fails the query, as Trino does.

State layout (all JSON, written to a temporary file and renamed)::

    state_dir/queries/<query execution id>.json   request, outcome, statistics, error
    state_dir/results/<query execution id>.json   columns and rows as Athena text (None for NULL)
    state_dir/tokens/<sha256 of the token>.json   token -> query execution id + request hash

Known differences from Athena (inherent to DuckDB/sqlglot, not hidden): integer division (Trino
``10/3 = 3``, DuckDB ``3.33``), approximate aggregates (``approx_percentile`` differs slightly; its weighted
form loses the weight), ``x/0`` (DuckDB: NULL/inf, Trino: error), and functions sqlglot does not
translate (``url_extract_*``, ``map_agg``, ``format_datetime``, ...) fail.
"""

from __future__ import annotations

import contextlib
import decimal
import hashlib
import json
import logging
import math
import os
import re
import struct
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from datetime import time as dt_time
from pathlib import Path
from typing import Any, ClassVar, Final, Self

import duckdb
import sqlglot
from sqlglot import exp
from sqlglot.dialects.trino import Trino
from sqlglot.errors import ErrorLevel, SqlglotError
from sqlglot.optimizer.normalize_identifiers import normalize_identifiers
from sqlglot.tokens import TokenType

from athena_refresh.engine import (
    Column,
    QueryError,
    QueryExecution,
    QueryResult,
    QueryStatistics,
    check_start_request,
    convert_value,
)
from athena_refresh.errors import QueryEngineError, ResultTypeError

__all__ = ["DuckDBQueryEngine", "PreparedQuery", "QueryRejected", "prepare_query"]

logger = logging.getLogger(__name__)

#: Athena ``AthenaError.ErrorCategory`` values (https://docs.aws.amazon.com/athena/latest/ug/error-reference.html).
ERROR_CATEGORY_SYSTEM: Final = 1
ERROR_CATEGORY_USER: Final = 2
#: Athena ``ErrorType`` values from the same catalog: 1000 "User error", 100 "Internal service error".
ERROR_TYPE_USER: Final = 1000
ERROR_TYPE_INTERNAL: Final = 100
#: StartQueryExecution ``QueryString`` maximum length (characters), from the API reference.
MAX_QUERY_CHARS: Final = 262_144
#: Share of ``simulated_duration_ms`` reported as QUEUED (the rest is RUNNING).
QUEUED_SHARE: Final = 0.1

_QUERY_ID_RE: Final = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_TABLE_NAME_RE: Final = re.compile(r"[a-z_][a-z0-9_]*")
_INT64_MIN: Final = -(2**63)
_INT64_MAX: Final = 2**63 - 1
_STATE_VERSION: Final = 1
_ANSI_RE: Final = re.compile(r"\x1b\[[0-9;]*m")


def _wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


# --------------------------------------------------------------------------------------------------
# SQL preparation: Trino text + ExecutionParameters -> DuckDB SQL (no string formatting of values)
# --------------------------------------------------------------------------------------------------
class QueryRejected(Exception):
    """The query cannot run (user error): it ends FAILED with ``error_code: message`` as its reason."""

    def __init__(self, error_code: str, message: str) -> None:
        super().__init__(f"{error_code}: {message}")
        self.error_code = error_code


class _PositionalTrinoParser(Trino.Parser):  # type: ignore[misc, name-defined]
    """Trino's parser, except that each ``?`` placeholder keeps its source position (``meta["start"]``).

    The tree's own order is not the text's order (``WITH`` is visited after the main query), and
    ExecutionParameters bind in text order.
    """

    PLACEHOLDER_PARSERS: ClassVar[dict[Any, Any]] = {
        **Trino.Parser.PLACEHOLDER_PARSERS,
        TokenType.PLACEHOLDER: lambda self: self.expression(exp.Placeholder(), token=self._prev),
    }


@dataclass(frozen=True)
class PreparedQuery:
    """DuckDB SQL generated from the bound tree, and the data tables it reads (lowercase, CTEs excluded)."""

    duckdb_sql: str
    tables: tuple[str, ...]


def prepare_query(sql: str, parameters: Sequence[str]) -> PreparedQuery:
    """Parse Trino `sql`, bind `parameters` to its ``?`` placeholders in source order, generate DuckDB SQL.

    Raises
    ------
    QueryRejected
        Syntax error, not exactly one query statement, a named placeholder, a parameter count that differs
        from the placeholder count, a parameter that is not a literal, or SQL sqlglot cannot translate.
    """
    dialect = Trino()
    try:
        parsed = _PositionalTrinoParser(dialect=dialect).parse(dialect.tokenize(sql), sql)
        statements = [statement for statement in parsed if statement is not None]
    except SqlglotError as exc:
        raise QueryRejected("SYNTAX_ERROR", _sqlglot_message(exc)) from exc
    if len(statements) != 1:
        raise QueryRejected("SYNTAX_ERROR", f"expected exactly one SQL statement, found {len(statements)}")
    tree = statements[0]
    if not isinstance(tree, exp.Query):
        raise QueryRejected(
            "NOT_SUPPORTED", f"the local DuckDB engine runs queries (SELECT) only, not {type(tree).__name__}"
        )

    placeholders = list(tree.find_all(exp.Placeholder))
    if any(p.this is not None or "start" not in p.meta for p in placeholders):
        raise QueryRejected("INVALID_PARAMETER_USAGE", "only positional '?' parameters are supported")
    placeholders.sort(key=lambda p: p.meta["start"])
    if len(placeholders) != len(parameters):
        raise QueryRejected(
            "INVALID_PARAMETER_USAGE",
            f"Incorrect number of parameters: expected {len(placeholders)} but found {len(parameters)}",
        )
    for position, (placeholder, text) in enumerate(zip(placeholders, parameters, strict=True), start=1):
        placeholder.replace(_parse_parameter(position, text))

    tree = normalize_identifiers(tree, dialect="trino")  # unquoted names are lowercase (Athena's column names)
    _name_unnamed_columns(tree)
    cte_names = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
    tables: list[str] = []
    for table in tree.find_all(exp.Table):
        if not isinstance(table.this, exp.Identifier):
            continue  # table functions, UNNEST, ...: DuckDB decides (and cannot read outside data_dir)
        table.set("catalog", None)  # Athena resolves them from QueryExecutionContext
        table.set("db", None)
        name = table.name.lower()
        if name not in cte_names and name not in tables:
            tables.append(name)

    try:
        duckdb_sql = tree.sql(dialect="duckdb", unsupported_level=ErrorLevel.RAISE)
    except SqlglotError as exc:
        raise QueryRejected("NOT_SUPPORTED", f"cannot translate to DuckDB: {_sqlglot_message(exc)}") from exc
    return PreparedQuery(duckdb_sql=duckdb_sql, tables=tuple(tables))


def _parse_parameter(position: int, text: str) -> exp.Expr:
    """One ExecutionParameter as a literal expression; anything else is rejected."""
    try:
        node = sqlglot.parse_one(text, read="trino")
    except SqlglotError as exc:
        raise QueryRejected(
            "INVALID_PARAMETER_USAGE",
            f"execution parameter {position} ({text!r}) is not a SQL literal: {_sqlglot_message(exc)}",
        ) from exc
    if not _is_literal(node):
        raise QueryRejected(
            "INVALID_PARAMETER_USAGE",
            f"execution parameter {position} ({text!r}) is not a SQL literal (got {type(node).__name__});"
            " pass literal text such as '2013-01-01 00:00:00' (with quotes), 42, -1.5, TIMESTAMP '...', NULL",
        )
    for sub in node.walk():
        sub.comments = None
    return node


def _name_unnamed_columns(tree: exp.Query) -> None:
    """Trino names an unaliased output expression ``_col<position>`` (DuckDB would use its text)."""
    if not isinstance(tree, exp.Select) or any(isinstance(e, exp.Star) or e.is_star for e in tree.expressions):
        return
    for position, projection in enumerate(tree.expressions):
        if not isinstance(projection, (exp.Alias, exp.Column)):
            projection.replace(exp.alias_(projection.copy(), f"_col{position}"))


def _sqlglot_message(exc: SqlglotError) -> str:
    """sqlglot's error text without its ANSI underline codes, on one line (``line 1:8: ...`` as Trino)."""
    errors = getattr(exc, "errors", None)
    if errors:
        first = errors[0]
        text = f"line {first.get('line')}:{first.get('col')}: {first.get('description')}"
    else:
        text = str(exc)
    return " ".join(_ANSI_RE.sub("", text).split())


def _is_literal(node: exp.Expr | None) -> bool:
    if isinstance(node, (exp.Literal, exp.Null, exp.Boolean, exp.HexString)):
        return True
    if isinstance(node, exp.Neg):
        return isinstance(node.this, exp.Literal) and not node.this.is_string
    if isinstance(node, exp.Cast):  # CAST(literal AS type), TIMESTAMP '...', DATE '...', DECIMAL '...'
        return isinstance(node.args.get("to"), exp.DataType) and _is_literal(node.this)
    if isinstance(node, exp.Interval):
        unit = node.args.get("unit")
        return isinstance(node.this, exp.Literal) and (unit is None or isinstance(unit, exp.Var))
    return False


# --------------------------------------------------------------------------------------------------
# DuckDB values -> Athena VarCharValue text, DuckDB types -> Trino type names
# --------------------------------------------------------------------------------------------------
_TRINO_TYPE_OF: Final = {
    "boolean": "boolean",
    "tinyint": "tinyint",
    "smallint": "smallint",
    "integer": "integer",
    "bigint": "bigint",
    "utinyint": "smallint",
    "usmallint": "integer",
    "uinteger": "bigint",
    "ubigint": "bigint",  # checked to fit
    "hugeint": "bigint",  # checked to fit: count_if / sum of integers are HUGEINT in DuckDB, bigint in Trino
    "uhugeint": "bigint",  # checked to fit
    "float": "real",
    "double": "double",
    "decimal": "decimal",
    "varchar": "varchar",
    "enum": "varchar",
    "blob": "varbinary",
    "uuid": "uuid",
    "date": "date",
    "time": "time",
    "time with time zone": "time with time zone",
    "timestamp": "timestamp",
    "timestamp_s": "timestamp",
    "timestamp_ms": "timestamp",
    "timestamp_ns": "timestamp",
    "timestamp with time zone": "timestamp with time zone",
    "interval": "interval day to second",
    "list": "array",
    "array": "array",
    "map": "map",
    "struct": "row",
    "null": "unknown",
}
_CHECKED_BIGINT_IDS: Final = frozenset({"ubigint", "hugeint", "uhugeint"})


def _trino_type(duck_type: Any) -> str:
    if str(duck_type).upper() == "JSON":  # DuckDB's JSON is a VARCHAR alias
        return "json"
    return _TRINO_TYPE_OF.get(duck_type.id, str(duck_type).lower())


def _millis_text(value: datetime | dt_time) -> str:
    """Athena prints timestamp(3)/time(3): whole seconds plus exactly three fraction digits (rounded)."""
    micros = value.microsecond
    millis = (micros + 500) // 1000
    if isinstance(value, datetime):
        base = value.replace(microsecond=0) + timedelta(milliseconds=millis)
        return f"{base:%Y-%m-%d %H:%M:%S}.{base.microsecond // 1000:03d}"
    if millis == 1000:  # time: round down instead of wrapping past midnight
        millis = 999
    return f"{value:%H:%M:%S}.{millis:03d}"


def _double_text(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return repr(value)


def _real_text(value: float) -> str:
    """Shortest text that reads back as the same float32 (Trino prints reals that way, not as doubles)."""
    if not math.isfinite(value):
        return _double_text(value)
    packed = struct.pack("<f", value)
    for digits in range(1, 10):
        text = f"{value:.{digits}g}"
        if struct.pack("<f", float(text)) == packed:
            return repr(float(text))
    return repr(value)


def _athena_text(value: Any, type_id: str = "") -> str | None:
    """One DuckDB value as Athena's ``VarCharValue`` text (None for SQL NULL)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _real_text(value) if type_id == "float" else _double_text(value)
    if isinstance(value, decimal.Decimal):
        return format(value, "f")
    if isinstance(value, str):
        return value
    if isinstance(value, datetime):
        if value.tzinfo is not None:
            return _millis_text(value.astimezone(UTC).replace(tzinfo=None)) + " UTC"
        return _millis_text(value)
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, dt_time):
        return _millis_text(value)
    if isinstance(value, timedelta):  # interval day to second: "1 02:03:04.000"
        total_ms = round(value.total_seconds() * 1000)
        sign = "-" if total_ms < 0 else ""
        days, rest_ms = divmod(abs(total_ms), 86_400_000)
        hours, rest_ms = divmod(rest_ms, 3_600_000)
        minutes, rest_ms = divmod(rest_ms, 60_000)
        seconds, millis = divmod(rest_ms, 1000)
        return f"{sign}{days} {hours:02d}:{minutes:02d}:{seconds:02d}.{millis:03d}"
    if isinstance(value, (bytes, bytearray, memoryview)):
        return " ".join(f"{b:02x}" for b in bytes(value))
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_nested_text(v) for v in value) + "]"
    if isinstance(value, dict):  # row and map both print as {k=v, ...}
        return "{" + ", ".join(f"{_nested_text(k)}={_nested_text(v)}" for k, v in value.items()) + "}"
    return str(value)  # uuid.UUID and anything else


def _nested_text(value: Any) -> str:
    text = _athena_text(value)
    return "null" if text is None else text


# --------------------------------------------------------------------------------------------------
# Engine
# --------------------------------------------------------------------------------------------------
class DuckDBQueryEngine:
    """``QueryEngine`` on DuckDB over the Parquet tables of `data_dir`, with state shared through `state_dir`.

    Parameters
    ----------
    data_dir : Path
        One subdirectory per table holding ``*.parquet`` files (``data_dir/flights/flights.parquet``).
    state_dir : Path
        Query executions, results and tokens; share it between processes to share queries.
    simulated_duration_ms : int, optional
        How long every query started by this instance appears QUEUED/RUNNING, by `clock_ms`
        (0: terminal at once). Stored with the execution, so other instances see the same timeline.
    clock_ms : callable, optional
        Epoch milliseconds; real time by default. Inject a fake clock in tests.

    Examples
    --------
    >>> engine = DuckDBQueryEngine(data_dir=Path(".cache/data"), state_dir=Path(".demo/engine"))  # doctest: +SKIP
    >>> qid = engine.start_query(sql=sql, parameters=["'2013-11-21 00:30:00'", "'2013-11-22 00:30:00'"],
    ...                          client_request_token="x" * 32)  # doctest: +SKIP
    """

    def __init__(
        self,
        *,
        data_dir: Path,
        state_dir: Path,
        simulated_duration_ms: int = 0,
        clock_ms: Callable[[], int] | None = None,
    ) -> None:
        if simulated_duration_ms < 0:
            raise ValueError(f"simulated_duration_ms must be >= 0, got {simulated_duration_ms}")
        self.data_dir = Path(data_dir).resolve()
        self.state_dir = Path(state_dir)
        self.simulated_duration_ms = int(simulated_duration_ms)
        self._clock_ms = clock_ms or _wall_clock_ms
        self._queries_dir = self.state_dir / "queries"
        self._results_dir = self.state_dir / "results"
        self._tokens_dir = self.state_dir / "tokens"
        self._con: duckdb.DuckDBPyConnection | None = None
        self._con_lock = threading.Lock()
        self._views: set[str] = set()  # tables with a view on the current connection
        self._records: dict[str, dict[str, Any]] = {}  # published records never change: cache them

    # ---- lifecycle -------------------------------------------------------------------------------
    def close(self) -> None:
        """Close the DuckDB connection (a later query opens a new one)."""
        with self._con_lock:
            if self._con is not None:
                self._con.close()
                self._con = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ---- QueryEngine -------------------------------------------------------------------------------
    def start_query(self, *, sql: str, parameters: Sequence[str], client_request_token: str) -> str:
        """Run `sql` once per `client_request_token` (see the module docstring) and return its id.

        Raises
        ------
        ValueError, TypeError
            The token is not 32..128 characters; `parameters` is a single str (as ``AthenaQueryEngine``).
        QueryEngineError
            The token was used with another SQL or parameters (Athena: InvalidRequestException), the request
            is invalid (empty SQL or parameter, SQL too long), or the state directory cannot be written.
        """
        operation = "StartQueryExecution"
        check_start_request(client_request_token, parameters)
        params = list(parameters)
        if not isinstance(sql, str) or not 1 <= len(sql) <= MAX_QUERY_CHARS:
            raise QueryEngineError(
                operation,
                f"InvalidRequestException: QueryString must be 1..{MAX_QUERY_CHARS} characters",
                retryable=False,
                error_code="InvalidRequestException",
            )
        if any(not isinstance(p, str) or not p for p in params):
            raise QueryEngineError(
                operation,
                "InvalidRequestException: every ExecutionParameter must be a non-empty string",
                retryable=False,
                error_code="InvalidRequestException",
            )

        request_sha256 = hashlib.sha256(json.dumps([sql, params]).encode("utf-8")).hexdigest()
        try:
            existing = self._read_token(client_request_token)
            if existing is not None:
                return self._same_request(existing, request_sha256)

            submitted_at_ms = int(self._clock_ms())
            query_execution_id = str(uuid.uuid4())
            record, results = self._execute(sql, params)
            record.update(
                version=_STATE_VERSION,
                query_execution_id=query_execution_id,
                client_request_token=client_request_token,
                request_sha256=request_sha256,
                sql=sql,
                parameters=params,
                submitted_at_ms=submitted_at_ms,
                simulated_duration_ms=self.simulated_duration_ms,
            )
            if results is not None:
                _write_json_atomic(self._results_dir / f"{query_execution_id}.json", results)
            _write_json_atomic(self._queries_dir / f"{query_execution_id}.json", record)
            winner = self._publish_token(client_request_token, query_execution_id, request_sha256)
        except (OSError, ValueError) as exc:  # ValueError: an unreadable (corrupt JSON) state file
            raise QueryEngineError(operation, f"state directory {self.state_dir}: {exc}") from exc
        if winner is not None:  # another caller published the same token first: this run never existed
            for directory in (self._queries_dir, self._results_dir):
                path = directory / f"{query_execution_id}.json"
                with contextlib.suppress(OSError):
                    path.unlink(missing_ok=True)
            return self._same_request(winner, request_sha256)
        logger.info(
            "duckdb query started",
            extra={"query_execution_id": query_execution_id, "outcome": record["outcome"]},
        )
        return query_execution_id

    def get_query(self, query_execution_id: str) -> QueryExecution:
        """State, statistics and error of one query as of `clock_ms` (see the module docstring).

        Raises
        ------
        QueryEngineError
            Unknown query execution id (Athena: InvalidRequestException).
        """
        record = self._load(query_execution_id, "GetQueryExecution")
        return self._execution(record)

    def get_results(self, query_execution_id: str, *, on_page: Callable[[int], object] | None = None) -> QueryResult:
        """All rows of a SUCCEEDED query, values by ``athena_refresh.engine.convert_value``.

        The rows are one stored page: ``on_page(row count)`` is called once, after reading it.

        Raises
        ------
        QueryEngineError
            Unknown id, or the query is not SUCCEEDED (yet): Athena answers InvalidRequestException.
        ResultTypeError
            Two columns share a name (rows are keyed by name: alias them), or a value does not convert.
        """
        operation = "GetQueryResults"
        record = self._load(query_execution_id, operation)
        execution = self._execution(record)
        if execution.state != "SUCCEEDED":
            detail = f": {execution.error.error_message}" if execution.error else ""
            raise QueryEngineError(
                operation,
                f"InvalidRequestException: query is {execution.state}, results exist only for SUCCEEDED{detail}",
                query_execution_id=query_execution_id,
            )
        try:
            stored = _read_json(self._results_dir / f"{query_execution_id}.json")
        except (OSError, ValueError) as exc:
            raise QueryEngineError(
                operation, f"results of {query_execution_id} unreadable: {exc}", query_execution_id=query_execution_id
            ) from exc
        columns = tuple(Column(name=c["name"], type=c["type"]) for c in stored["columns"])
        seen: set[str] = set()
        for col in columns:
            if col.name in seen:
                raise ResultTypeError(
                    col.name, col.type, col.name, "duplicate column name; alias the columns in the SQL"
                )
            seen.add(col.name)
        rows = [
            {col.name: _convert(text, col) for col, text in zip(columns, row, strict=True)} for row in stored["rows"]
        ]
        if on_page is not None:
            on_page(len(rows))
        return QueryResult(columns=columns, rows=rows)

    # ---- execution -----------------------------------------------------------------------------------
    def _execute(self, sql: str, params: list[str]) -> tuple[dict[str, Any], dict[str, Any] | None]:
        """Run the query now. Returns (outcome fields of the record, results or None when FAILED)."""
        started = time.perf_counter()
        duckdb_sql: str | None = None
        try:
            prepared = prepare_query(sql, params)
            duckdb_sql = prepared.duckdb_sql
            scanned_bytes = self._check_tables(prepared.tables)
            with self._con_lock:
                con = self._connection()
                self._register_views(con, prepared.tables)
                relation = con.sql(prepared.duckdb_sql)
                names = list(relation.columns)
                duck_types = list(relation.types)
                raw_rows = relation.fetchall()
            columns, rows = _render(names, duck_types, raw_rows)
        except QueryRejected as exc:
            return self._failed(started, duckdb_sql, ERROR_CATEGORY_USER, ERROR_TYPE_USER, str(exc)), None
        except duckdb.Error as exc:
            if isinstance(exc, duckdb.FatalException):
                self._reset_connection()
            message = f"{_duckdb_error_code(exc)}: {exc} [DuckDB {type(exc).__name__}]"
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
            "data_scanned_bytes": scanned_bytes,
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
            "row_count": 0,
            "error": {
                "error_category": category,
                "error_type": error_type,
                "retryable": False,
                "error_message": message,
                "state_change_reason": message,
            },
        }

    def _table_files(self, table: str) -> list[Path]:
        if not _TABLE_NAME_RE.fullmatch(table):
            return []
        return sorted((self.data_dir / table).glob("*.parquet"))

    def _check_tables(self, tables: Sequence[str]) -> int:
        """Bytes of the Parquet files the query reads (Athena: DataScannedInBytes); missing table -> rejected."""
        total = 0
        for table in tables:
            files = self._table_files(table)
            if not files:
                raise QueryRejected(
                    "TABLE_NOT_FOUND", f"Table '{table}' does not exist (no *.parquet in {self.data_dir / table})"
                )
            total += sum(f.stat().st_size for f in files)
        return total

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
            self._views = set()
        return self._con

    def _reset_connection(self) -> None:
        with contextlib.suppress(Exception):
            if self._con is not None:
                self._con.close()
        self._con = None

    def _register_views(self, con: duckdb.DuckDBPyConnection, tables: Sequence[str]) -> None:
        for table in tables:
            if table in self._views:
                continue
            glob = str(self.data_dir / table / "*.parquet").replace("'", "''")
            con.execute(f"CREATE OR REPLACE VIEW \"{table}\" AS SELECT * FROM read_parquet('{glob}')")
            self._views.add(table)

    # ---- state ---------------------------------------------------------------------------------------
    def _execution(self, record: dict[str, Any]) -> QueryExecution:
        query_execution_id = record["query_execution_id"]
        duration_ms = int(record["simulated_duration_ms"])
        queue_ms = int(duration_ms * QUEUED_SHARE)
        elapsed_ms = max(0, int(self._clock_ms()) - int(record["submitted_at_ms"]))
        if elapsed_ms < duration_ms:
            if elapsed_ms < queue_ms:
                stats = QueryStatistics(query_queue_time_ms=elapsed_ms, total_execution_time_ms=elapsed_ms)
                return QueryExecution(query_execution_id, "QUEUED", stats)
            stats = QueryStatistics(
                engine_execution_time_ms=elapsed_ms - queue_ms,
                query_queue_time_ms=queue_ms,
                total_execution_time_ms=elapsed_ms,
            )
            return QueryExecution(query_execution_id, "RUNNING", stats)
        engine_ms = max(int(record["measured_ms"]), duration_ms - queue_ms)
        stats = QueryStatistics(
            data_scanned_bytes=int(record["data_scanned_bytes"]),
            engine_execution_time_ms=engine_ms,
            query_queue_time_ms=queue_ms,
            total_execution_time_ms=queue_ms + engine_ms,
        )
        error = QueryError(**record["error"]) if record["error"] else None
        return QueryExecution(query_execution_id, record["outcome"], stats, error)

    def _load(self, query_execution_id: str, operation: str) -> dict[str, Any]:
        record = self._records.get(query_execution_id)
        if record is not None:
            return record
        not_found = QueryEngineError(
            operation,
            f"InvalidRequestException: QueryExecution {query_execution_id!r} was not found",
            query_execution_id=query_execution_id,
            retryable=False,
            error_code="InvalidRequestException",
        )
        if not isinstance(query_execution_id, str) or not _QUERY_ID_RE.fullmatch(query_execution_id):
            raise not_found
        try:
            record = _read_json(self._queries_dir / f"{query_execution_id}.json")
        except FileNotFoundError:
            raise not_found from None
        except (OSError, ValueError) as exc:
            raise QueryEngineError(
                operation, f"state of {query_execution_id} unreadable: {exc}", query_execution_id=query_execution_id
            ) from exc
        self._records[query_execution_id] = record
        return record

    def _token_path(self, token: str) -> Path:
        return self._tokens_dir / f"{hashlib.sha256(token.encode('utf-8')).hexdigest()}.json"

    def _read_token(self, token: str) -> dict[str, Any] | None:
        try:
            return _read_json(self._token_path(token))
        except FileNotFoundError:
            return None

    def _publish_token(self, token: str, query_execution_id: str, request_sha256: str) -> dict[str, Any] | None:
        """Create the token file exclusively. Returns None if ours was created, else the existing mapping."""
        path = self._token_path(token)
        payload = {
            "client_request_token": token,
            "query_execution_id": query_execution_id,
            "request_sha256": request_sha256,
        }
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".token-", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(payload, f)
            try:
                os.link(tmp, path)  # atomic and exclusive (EEXIST), and the file is complete when it appears
            except FileExistsError:
                return _read_json(path)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        return None

    @staticmethod
    def _same_request(mapping: dict[str, Any], request_sha256: str) -> str:
        if mapping["request_sha256"] != request_sha256:
            raise QueryEngineError(
                "StartQueryExecution",
                "InvalidRequestException: Idempotent parameters do not match: this ClientRequestToken was used"
                " with a different query string or execution parameters",
                query_execution_id=mapping["query_execution_id"],
                retryable=False,
                error_code="InvalidRequestException",
            )
        return str(mapping["query_execution_id"])


# --------------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------------
def _render(
    names: list[str], duck_types: list[Any], raw_rows: list[tuple[Any, ...]]
) -> tuple[list[dict[str, str]], list[list[str | None]]]:
    """Columns (Trino types) and rows as Athena text; bigint overflow of HUGEINT-like columns -> rejected."""
    columns = [{"name": name, "type": _trino_type(t)} for name, t in zip(names, duck_types, strict=True)]
    type_ids = [t.id for t in duck_types]
    checked = [i for i, type_id in enumerate(type_ids) if type_id in _CHECKED_BIGINT_IDS]
    for row in raw_rows:
        for i in checked:
            value = row[i]
            if value is not None and not _INT64_MIN <= value <= _INT64_MAX:
                raise QueryRejected(
                    "NUMERIC_VALUE_OUT_OF_RANGE", f"column {names[i]!r}: {value} does not fit in bigint"
                )
    rows = [[_athena_text(v, type_id) for v, type_id in zip(row, type_ids, strict=True)] for row in raw_rows]
    return columns, rows


def _convert(text: str | None, col: Column) -> Any:
    try:
        return convert_value(text, col.type)
    except ResultTypeError as exc:
        reason = str(exc.__cause__) if exc.__cause__ else str(exc)
        raise ResultTypeError(col.name, col.type, text or "", reason) from exc


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


def _elapsed_ms(started: float) -> int:
    return max(0, round((time.perf_counter() - started) * 1000))


def _read_json(path: Path) -> dict[str, Any]:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def _write_json_atomic(path: Path, payload: Any) -> None:
    """Write to a temporary file in the same directory, then rename: readers never see a partial file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(payload, f, separators=(",", ":"))
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
