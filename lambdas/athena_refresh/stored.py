"""A committed result as stored in the results table, decoded: the value the read paths serve.

:mod:`athena_refresh.results` writes the items (the immutable result per slot and generation, and the LATEST
item carrying a copy of the newest); this module only names their sort keys and decodes them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .errors import CorruptResultsItemError

LATEST = "LATEST"
LIVE_GENERATION = 1


def result_sort_key(slot_iso: str, generation: int = LIVE_GENERATION) -> str:
    """The results table's sort key of one slot's result of ``generation`` (1: the slot's own ISO text)."""
    return slot_iso if generation == LIVE_GENERATION else f"{slot_iso}#g{generation}"


@dataclass(frozen=True)
class StoredResult:
    """One committed result as the read paths serve it (JSON-safe fields; times in epoch milliseconds).

    ``rows``: the row objects (column name -> value typed as :mod:`athena_refresh.engine.conversion` returns
    them: integers, floats, decimals as exact text, dates and timestamps as ISO text), or ``None`` when they are
    offloaded to ``rows_s3_uri`` (``rows_sha256``/``rows_bytes`` describe that object, a JSON array of rows).
    ``columns``: ``[{"name", "type"}]`` with Athena's type names, in result order.
    """

    job_name: str
    slot_iso: str
    generation: int
    fencing_token: int
    query_execution_id: str
    committed_at_ms: int
    columns: list[dict[str, str]]
    statistics: dict[str, Any]
    row_count: int
    window_start: str | None = None
    window_end: str | None = None
    rows: list[dict[str, Any]] | None = None
    rows_s3_uri: str | None = None
    rows_sha256: str | None = None
    rows_bytes: int | None = None
    cost: dict[str, Any] | None = None  # the slot's cost estimate (athena_refresh.cost), None before it existed
    #: The assertions these rows broke (the slot is FAILED ``assertion``; kept for inspection, never LATEST).
    assertions_failed: list[dict[str, Any]] | None = None

    @property
    def offloaded(self) -> bool:
        """Whether the rows live in S3 (``rows_s3_uri``) rather than on the item."""
        return self.rows is None

    @classmethod
    def from_item(cls, job_name: str, slot_iso: str, generation: int, plain: Mapping[str, Any]) -> StoredResult:
        """From a result item or a LATEST item (plain values, ``*_json`` decoded).

        :raises CorruptResultsItemError: a field is missing or not of its type (named).
        """
        where = f"{job_name}/{result_sort_key(slot_iso, generation)}"

        def field_of(name: str, kind: type | tuple[type, ...]) -> Any:
            value = plain.get(name)
            if not isinstance(value, kind) or isinstance(value, bool):
                raise CorruptResultsItemError(
                    where, name, f"must be a {getattr(kind, '__name__', kind)}, got {value!r:.80}"
                )
            return value

        rows = plain.get("rows")
        uri = plain.get("rows_s3_uri")
        if rows is None and not isinstance(uri, str):
            raise CorruptResultsItemError(where, "rows_json", "holds neither rows nor an S3 pointer (rows_s3_uri)")
        if rows is not None and not isinstance(rows, list):
            raise CorruptResultsItemError(where, "rows_json", "must be a JSON array of rows")
        columns = field_of("columns", list)
        statistics = plain.get("statistics", {})
        start, end = plain.get("window_start"), plain.get("window_end")
        sha, size = plain.get("rows_sha256"), plain.get("rows_bytes")
        return cls(
            job_name=job_name,
            slot_iso=slot_iso,
            generation=generation,
            fencing_token=field_of("fencing_token", int),
            query_execution_id=field_of("query_execution_id", str),
            committed_at_ms=field_of("committed_at_ms", int),
            columns=[{"name": str(c.get("name")), "type": str(c.get("type"))} for c in columns if isinstance(c, dict)],
            statistics=dict(statistics) if isinstance(statistics, dict) else {},
            row_count=field_of("row_count", int),
            window_start=start if isinstance(start, str) else None,
            window_end=end if isinstance(end, str) else None,
            rows=rows,
            rows_s3_uri=uri if rows is None else None,
            rows_sha256=sha if isinstance(sha, str) else None,
            rows_bytes=size if isinstance(size, int) else None,
            cost=_cost(plain.get("cost")),
            assertions_failed=failed if isinstance(failed := plain.get("assertions_failed"), list) else None,
        )


def _cost(value: Any) -> dict[str, Any] | None:
    """A stored cost estimate, or ``None`` when absent or not of its shape (it is informative, never fatal)."""
    if isinstance(value, dict) and isinstance(value.get("estimated_cost_usd"), (int, float)):
        return dict(value)
    return None


def plain_item(item: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """``item`` (DynamoDB JSON) as plain values, each ``<name>_json`` decoded as ``<name>``.

    :raises CorruptResultsItemError: a ``*_json`` attribute is not JSON (an edited item).
    """
    plain: dict[str, Any] = {}
    for name, value in item.items():
        ((kind, raw),) = value.items()
        if kind == "N":
            plain_value: Any = int(raw) if raw.lstrip("-").isdigit() else float(raw)
        else:
            plain_value = raw
        if name.endswith("_json") and isinstance(plain_value, str):
            try:
                plain[name[: -len("_json")]] = json.loads(plain_value)
            except ValueError as exc:
                key = f"{item.get('job', {}).get('S', '?')}/{item.get('slot', {}).get('S', '?')}"
                raise CorruptResultsItemError(key, name, f"is not JSON: {exc}") from exc
        else:
            plain[name] = plain_value
    return plain
