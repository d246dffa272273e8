"""A local stand-in for Athena: the job's Trino SQL, run by DuckDB on Parquet files, behind ``QueryEngine``.

``DuckDBQueryEngine`` implements the protocol of ``athena_refresh.engine`` (see ``docs/engine-interface.md``)
with Athena's observable behaviour, so the job cannot tell it from ``AthenaQueryEngine``.

Modules:

- :mod:`.sql`: Trino text + ExecutionParameters -> DuckDB SQL (``prepare_query``, ``PreparedQuery``,
  ``QueryRejected``): parsed with sqlglot, parameters bound as parsed literals, never formatted in.
- :mod:`.values`: DuckDB values -> Athena ``VarCharValue`` text, DuckDB types -> Trino type names.
- :mod:`.scan`: the tables' files (Hive partitions, hidden files) and ``DataScannedInBytes`` as Athena would
  bill it: the referenced columns' chunks in the row groups left by partition and min/max pruning
  (``scanned_bytes`` for a benchmark's breakdown); :mod:`.scans`: which tables, columns and filters a query
  reads (pure sqlglot).
- :mod:`.engine`: ``DuckDBQueryEngine``: ClientRequestToken idempotency across processes, and the execution
  state (outcome, results, statistics) shared through ``state_dir``; :mod:`.session`: the DuckDB connection
  that runs the queries (views over the tables, the bytes accounted, Athena's error shape).
- :mod:`.quota`: Athena's active-query quota and StartQueryExecution rate, opt-in (``EngineQuota``), enforced
  across processes; ``quota_report(state_dir)`` reads what it saw (starts, refusals, the active intervals).
- :mod:`.files`: the state files, complete when they appear (rename, or exclusive link).

Known differences from Athena (inherent to DuckDB/sqlglot, not hidden): integer division (Trino
``10/3 = 3``, DuckDB ``3.33``), approximate aggregates (``approx_percentile`` differs slightly; its weighted
form loses the weight), ``x/0`` (DuckDB: NULL/inf, Trino: error), and functions sqlglot does not
translate (``url_extract_*``, ``map_agg``, ``format_datetime``, ...) fail.
"""

from .engine import DuckDBQueryEngine
from .quota import EngineQuota, QuotaInterval, QuotaReport, quota_report
from .sql import PreparedQuery, QueryRejected, prepare_query

__all__ = [
    "DuckDBQueryEngine",
    "EngineQuota",
    "PreparedQuery",
    "QueryRejected",
    "QuotaInterval",
    "QuotaReport",
    "prepare_query",
    "quota_report",
]
