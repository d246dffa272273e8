"""The Athena stand-in: the job's Trino SQL on DuckDB behind the ``QueryEngine`` interface (see :mod:`.engine`)."""

from .engine import DuckDBQueryEngine, prepare_query

__all__ = ["DuckDBQueryEngine", "prepare_query"]
