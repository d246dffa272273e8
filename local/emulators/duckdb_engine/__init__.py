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

- :mod:`.trino_semantics` (with :mod:`.trino_functions`, :mod:`.trino_collections`, :mod:`.trino_json`,
  :mod:`.trino_types`, :mod:`.trino_tree`): the bound Trino
  tree typed as Trino types it (the tables' schema from DuckDB) and rewritten so that DuckDB answers as Trino:
  integer division truncates, decimals are exact with Trino's result types, casts fail and round as Trino's, a
  timestamp with time zone keeps its zone, string, regexp, date, array, map and json functions follow Trino's
  tests (json through Python functions on the connection, in Trino's canonical text). Before
  anything runs, a function Athena does not have is ``FUNCTION_NOT_FOUND`` and a construct the engine cannot
  reproduce is refused in one line: ``NOT_SUPPORTED: runs on Athena only: shuffle (a random permutation); the check
  validated it``.

Known differences from Athena (not hidden): approximate aggregates (``approx_percentile`` differs slightly; its
weighted form loses the weight); a varchar's length is reported only where the query casts to varchar(n) or
names a literal; a column's values as DuckDB reads the Parquet file.
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
