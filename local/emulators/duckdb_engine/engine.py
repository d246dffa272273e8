"""``DuckDBQueryEngine``: the ``QueryEngine`` protocol on DuckDB, with Athena's observable behaviour.

``DuckDBQueryEngine`` implements the protocol of ``athena_refresh.engine`` (see ``docs/engine-interface.md``)
with Athena's observable behaviour, so the job cannot tell it from ``AthenaQueryEngine``. SQL preparation is
in :mod:`.sql`, the rendering of values and types as Athena text in :mod:`.values`, the DuckDB connection (views,
execution, the error shape of a failure) in :mod:`.session`.

- **Tables** are the directories of ``data_dir`` exposed as DuckDB views over their visible Parquet files
  (``flights`` -> ``data_dir/flights/**/*.parquet``, Hive partitions ``dt=2013-11-21/`` as VARCHAR columns,
  names starting with ``_`` or ``.`` ignored: :func:`.layout.list_table`). The session time zone is UTC.
  DuckDB may read files under ``data_dir`` only (``allowed_directories`` + ``enable_external_access=false``).
- **DataScannedInBytes** is what Athena would bill: the column chunks of the referenced columns in the row
  groups left by partition and min/max pruning (:mod:`.scan`, Parquet metadata cached per file); the
  breakdown is stored with the query (``scan``).
- **Idempotency across processes**: ``client_request_token`` maps to one query execution id through a
  token file created exclusively (``os.link`` of a complete temporary file: like ``O_CREAT|O_EXCL`` but
  never visible half-written). The same token with the same SQL and parameters returns the same id; with
  different ones it raises ``QueryEngineError`` (Athena: ``InvalidRequestException``).
- **Server-side execution that outlives the caller**: ``start_query`` runs the query synchronously and
  stores its outcome, typed results and statistics in ``state_dir`` before publishing the token, so any
  process that learns the id (from a token or from the lock table) can adopt it with ``get_query`` /
  ``get_results``. ``get_query`` reports QUEUED during the first tenth of ``simulated_duration_ms`` and
  RUNNING until ``submitted_at_ms + simulated_duration_ms`` by ``clock_ms``, then SUCCEEDED or FAILED.
  The duration (``duration_ms_for(sql, parameters)`` if given) is stored with the execution: every engine
  instance sees the same timeline.
- **Quotas** (opt-in, ``quota=EngineQuota(...)``): Athena's active-query quota (TooManyRequestsException)
  and StartQueryExecution rate (ThrottlingException), checked before the query runs, across processes
  (:mod:`.quota`; its state in ``state_dir/quota/``).

State layout (all JSON, written to a temporary file, then renamed or linked: never seen half-written)::

    state_dir/queries/<query execution id>.json   request, outcome, statistics, error
    state_dir/results/<query execution id>.json   columns and rows as Athena text (None for NULL)
    state_dir/tokens/<sha256 of the token>.json   token -> query execution id + request hash
    state_dir/quota/                               with a quota only: see :mod:`.quota`
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import re
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final, Self

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

from .files import link_json_exclusive, read_json
from .quota import EngineQuota, QuotaGate
from .session import DuckDBSession

__all__ = ["DuckDBQueryEngine"]

logger = logging.getLogger(__name__)

#: StartQueryExecution ``QueryString`` maximum length (characters), from the API reference.
MAX_QUERY_CHARS: Final = 262_144
#: Share of ``simulated_duration_ms`` reported as QUEUED (the rest is RUNNING).
QUEUED_SHARE: Final = 0.1

_QUERY_ID_RE: Final = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_STATE_VERSION: Final = 1


def _wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class DuckDBQueryEngine:
    """``QueryEngine`` on DuckDB over the Parquet tables of `data_dir`, with state shared through `state_dir`.

    Parameters
    ----------
    data_dir : Path
        One subdirectory per table holding ``*.parquet`` files, directly or in Hive partition directories
        (``data_dir/flights/dt=2013-11-21/data.parquet``).
    state_dir : Path
        Query executions, results and tokens; share it between processes to share queries.
    simulated_duration_ms : int, optional
        How long every query started by this instance appears QUEUED/RUNNING, by `clock_ms`
        (0: terminal at once). Stored with the execution, so other instances see the same timeline.
    clock_ms : callable, optional
        Epoch milliseconds; real time by default. Inject a fake clock in tests.
    duration_ms_for : callable, optional
        ``(sql, parameters) -> simulated duration (ms, int >= 0)`` of each query, instead of
        `simulated_duration_ms` (e.g. a query longer than a lock lease). Stored with the execution, as above.
    quota : EngineQuota, optional
        Enforce Athena's active-query quota and StartQueryExecution rate (:mod:`.quota`), across the processes
        sharing `state_dir`; none by default. :func:`.quota.quota_report` reads what it saw.

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
        duration_ms_for: Callable[[str, Sequence[str]], int] | None = None,
        quota: EngineQuota | None = None,
    ) -> None:
        if simulated_duration_ms < 0:
            raise ValueError(f"simulated_duration_ms must be >= 0, got {simulated_duration_ms}")
        self.data_dir = Path(data_dir).resolve()
        self.state_dir = Path(state_dir)
        self.simulated_duration_ms = int(simulated_duration_ms)
        self._clock_ms = clock_ms or _wall_clock_ms
        self._duration_ms_for = duration_ms_for
        self._quota = QuotaGate(self.state_dir, quota) if quota is not None else None
        self._queries_dir = self.state_dir / "queries"
        self._results_dir = self.state_dir / "results"
        self._tokens_dir = self.state_dir / "tokens"
        self._session = DuckDBSession(self.data_dir)
        self._records: dict[str, dict[str, Any]] = {}  # published records never change: cache them

    # ---- lifecycle -------------------------------------------------------------------------------
    def close(self) -> None:
        """Close the DuckDB connection (a later query opens a new one)."""
        self._session.close()

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
        duration_ms = self._duration_ms(sql, params)
        try:
            submitted_at_ms = int(self._clock_ms())
            query_execution_id = str(uuid.uuid4())
            registered = False  # by this call, as a new active query of the quota
            if self._quota is None:
                existing = self._read_token(client_request_token)
                if existing is not None:
                    return self._same_request(existing, request_sha256)
            else:  # before running it: refused, or registered as active (or the token's query already is)
                admission = self._quota.admit(
                    now_ms=submitted_at_ms,
                    client_request_token=client_request_token,
                    request_sha256=request_sha256,
                    query_execution_id=query_execution_id,
                    duration_ms=duration_ms,
                    published=lambda: self._read_token(client_request_token),
                )
                registered = admission.kind == "new"
                if not registered:
                    query_execution_id = self._same_request(admission.mapping(), request_sha256)
                    if admission.kind == "published":
                        return query_execution_id
                    submitted_at_ms, duration_ms = admission.submitted_at_ms, admission.duration_ms
            record, results = self._session.execute(sql, params)
            record.update(
                version=_STATE_VERSION,
                query_execution_id=query_execution_id,
                client_request_token=client_request_token,
                request_sha256=request_sha256,
                sql=sql,
                parameters=params,
                submitted_at_ms=submitted_at_ms,
                simulated_duration_ms=duration_ms,
            )
            # Created exclusively: a caller that adopted an in-flight query (.quota.Admission) keeps the first copy.
            if results is not None:
                link_json_exclusive(self._results_dir / f"{query_execution_id}.json", results)
            link_json_exclusive(self._queries_dir / f"{query_execution_id}.json", record)
            winner = self._publish_token(client_request_token, query_execution_id, request_sha256)
        except (OSError, ValueError) as exc:  # ValueError: an unreadable (corrupt JSON) state file
            raise QueryEngineError(operation, f"state directory {self.state_dir}: {exc}") from exc
        if winner is not None and winner["query_execution_id"] != query_execution_id:
            # another caller published the same token first: this run never existed
            for directory in (self._queries_dir, self._results_dir):
                path = directory / f"{query_execution_id}.json"
                with contextlib.suppress(OSError):
                    path.unlink(missing_ok=True)
            if self._quota is not None and registered:  # only its registrant withdraws it (once)
                try:
                    self._quota.withdraw(query_execution_id)
                except (OSError, ValueError):
                    logger.exception("could not withdraw a lost query from the quota state")
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
            stored = read_json(self._results_dir / f"{query_execution_id}.json")
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

    def column_types(self, query_execution_id: str) -> tuple[str, ...]:
        """Each result column's whole Trino type (``decimal(23,1)``, ``timestamp(3) with time zone``,
        ``array(varchar)``), beyond ``ColumnInfo.Type``. Not part of ``QueryEngine``: the local tools show it.

        :raises QueryEngineError: as :meth:`get_results`."""
        self.get_results(query_execution_id)  # the same checks (known, SUCCEEDED)
        stored = read_json(self._results_dir / f"{query_execution_id}.json")
        return tuple(str(c.get("trino_type", c["type"])) for c in stored["columns"])

    def _duration_ms(self, sql: str, params: list[str]) -> int:
        """The query's simulated duration: `duration_ms_for`'s answer, else `simulated_duration_ms`."""
        if self._duration_ms_for is None:
            return self.simulated_duration_ms
        duration_ms = self._duration_ms_for(sql, tuple(params))
        if not isinstance(duration_ms, int) or isinstance(duration_ms, bool) or duration_ms < 0:
            raise ValueError(f"duration_ms_for returned {duration_ms!r}: a simulated duration is an int >= 0 (ms)")
        return duration_ms

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
            record = read_json(self._queries_dir / f"{query_execution_id}.json")
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
            return read_json(self._token_path(token))
        except FileNotFoundError:
            return None

    def _publish_token(self, token: str, query_execution_id: str, request_sha256: str) -> dict[str, Any] | None:
        """Create the token file exclusively. Returns None if ours was created, else the existing mapping."""
        payload = {"client_request_token": token, "query_execution_id": query_execution_id}
        return link_json_exclusive(self._token_path(token), payload | {"request_sha256": request_sha256})

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
def _convert(text: str | None, col: Column) -> Any:
    try:
        return convert_value(text, col.type)
    except ResultTypeError as exc:
        reason = str(exc.__cause__) if exc.__cause__ else str(exc)
        raise ResultTypeError(col.name, col.type, text or "", reason) from exc
