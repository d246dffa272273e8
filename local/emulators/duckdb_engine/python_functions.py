"""The one registry of the Python functions the local engine's rewrites call, for what DuckDB has no faithful
equivalent of: every such function is named ``trino_*`` and belongs to one family module, which lists it and
creates it on a connection with its ``register(con)``:

- :mod:`.trino_udfs`: strings, regexp (Java's syntax read by Python's ``re``), ``format``, ``format_number``,
  ``parse_data_size``, ``luhn_check``, ...;
- :mod:`.trino_json_values`: Trino's canonical json text, the json functions and the casts from json;
- :mod:`.trino_collections`: ``split_to_map``, ``split_to_multimap``;
- :mod:`.trino_time_functions`: ``from_iso8601_date``, ``parse_duration``, ``human_readable_seconds``.

Registering them all costs about 50-60 ms (measured on the 2-core CI machine), so a session registers them on a
connection the first time a statement calls one (:func:`called`), never for a statement that calls none.
"""

from __future__ import annotations

from typing import Final

import duckdb

from . import trino_collections, trino_json_values, trino_time_functions, trino_udfs

__all__ = ["PREFIX", "called", "register"]

#: The prefix of every Python function's name on the connection.
PREFIX: Final = "trino_"
_FAMILIES: Final = (trino_udfs, trino_json_values, trino_collections, trino_time_functions)


def called(duckdb_sql: str) -> bool:
    """Whether the translated statement `duckdb_sql` may call one of the Python functions (it names the prefix)."""
    return PREFIX in duckdb_sql.lower()


def register(con: duckdb.DuckDBPyConnection) -> None:
    """Create every family's Python functions on `con` (once per connection)."""
    for family in _FAMILIES:
        family.register(con)
