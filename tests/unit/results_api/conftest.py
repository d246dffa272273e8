"""Fixtures and data of the read side's pure tests (``results_api``), shared with its integration tests.

The integration conftest (tests/integration/results_api/conftest.py) imports the history's job, slots, columns,
rows and statistics from here and seeds its ``world`` with them, so a pure test's :class:`StoredResult` and a
stored one describe the same result.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

import pytest

from athena_refresh.engine import Column, QueryStatistics
from athena_refresh.stored import StoredResult
from slotlock import Slot

#: The job with a full history (every status), half-hourly in UTC.
JOB = "flights-dashboard"
PERIOD_S = 1800

#: S0..S4: 2026-11-22T00:00Z, 00:30Z, 01:00Z, 01:30Z, 02:00Z.
BASE_EPOCH_S = int(dt.datetime(2026, 11, 22, 0, 0, tzinfo=dt.UTC).timestamp())
SLOTS = [Slot(BASE_EPOCH_S + PERIOD_S * index) for index in range(5)]

STATISTICS = QueryStatistics(
    data_scanned_bytes=7_340_032, engine_execution_time_ms=850, query_queue_time_ms=40, total_execution_time_ms=910
)
#: The latest result's columns and rows: markup, quotes, commas, newlines, unicode, NULL, booleans, nested values.
COLUMNS = (
    Column("origin", "varchar"),
    Column("flights", "bigint"),
    Column("avg_delay", "double"),
    Column("note", "varchar"),
    Column("on_time", "boolean"),
    Column("detail", "map(varchar,array(integer))"),
)
SCRIPT = "<script>alert(1)</script>"
ROWS: list[dict[str, Any]] = [
    {
        "origin": SCRIPT,
        "flights": 3,
        "avg_delay": 1.5,
        "note": 'say "hi", then\r\nleave',
        "on_time": True,
        "detail": {"a": [1, 2], "b": []},
    },
    {"origin": "Zürich ✈ 東京", "flights": 0, "avg_delay": None, "note": "a,b;c", "on_time": False, "detail": None},
    {"origin": "JFK", "flights": -2, "avg_delay": 0.1, "note": "' & <b>", "on_time": None, "detail": [1, "x"]},
]


@pytest.fixture
def stored_of() -> Callable[..., StoredResult]:
    """``stored_of(**fields)``: a :class:`StoredResult` for pure tests (defaults: S3 generation 1, token 3)."""

    def make(**fields: Any) -> StoredResult:
        params: dict[str, Any] = {
            "job_name": JOB,
            "slot_iso": SLOTS[3].iso,
            "generation": 1,
            "fencing_token": 3,
            "query_execution_id": "qe-s3",
            "committed_at_ms": SLOTS[3].epoch_ms + 6_000,
            "columns": [{"name": c.name, "type": c.type} for c in COLUMNS],
            "statistics": STATISTICS.as_dict(),
            "row_count": len(ROWS),
            "rows": ROWS,
        }
        params.update(fields)
        return StoredResult(**params)

    return make
