"""Athena's active-query quota and StartQueryExecution rate, for :class:`.engine.DuckDBQueryEngine` (opt-in).

What Athena enforces (https://docs.aws.amazon.com/athena/latest/ug/service-limits.html):

- **Active DML queries**: "The Active DML queries and Active DDL queries quotas include both running and queued
  queries"; at a quota of 25 (the default in most Regions; shared by all workgroups of the account), the 26th
  StartQueryExecution gets ``TooManyRequestsException``.
- **API rate**: StartQueryExecution 20 calls/s with a burst of 80 per account and Region (the archived
  awsdocs/amazon-athena-user-guide ``doc_source/service-limits.md``; live values are in Service Quotas); above
  it, ``ThrottlingException`` "Rate exceeded". A token bucket: ``start_burst`` tokens, refilled at
  ``start_rate_per_s``, one per call.

How the local engine enforces them, across every process sharing a ``state_dir``: each StartQueryExecution
call takes an exclusive ``fcntl.flock`` on ``state_dir/quota/lock`` and, holding it, (1) takes a token from the
bucket, or answers ThrottlingException; (2) drops the active queries that ended by the caller's ``clock_ms``
(``ends_at_ms <= now``, the interval is half-open); (3) answers the call with the existing query if its
ClientRequestToken is published, or registered and still active (see :class:`Admission`): no new active
query, so the quota never refuses it (Athena: "the same response is returned and another query is not
created", API_StartQueryExecution); (4) answers TooManyRequestsException when ``active_queries`` queries are
active; (5) otherwise registers the new query with its final interval ``[submitted_at_ms, submitted_at_ms +
duration_ms)``. Check and registration are one locked section: two processes never both take the last place.
The query runs after the lock is released. Every call, a retry with a reused token included, takes a token from
the bucket: the documented rate is per API call (our reading; AWS does not say whether a repeated token is exempt).

State layout (``state_dir/quota/``)::

    lock            the flock target (empty)
    state.json      bucket, active queries, counters, committed size of the history (written by rename)
    history.jsonl   append-only: one line per registered query {"event": "registered", query_execution_id,
                    client_request_token, submitted_at_ms, ends_at_ms}, one per withdrawn one
                    {"event": "withdrawn", query_execution_id}

``state.json`` is the commit point: a history line counts once ``history_bytes`` covers it, and the next
writer cuts off whatever a killed process appended past that size, so a process killed at any instant leaves
history and counters consistent. :func:`quota_report` reads both from another process, during or after a run.

Engines sharing a ``state_dir`` should share one :class:`EngineQuota`; starts by an engine without a quota are
not counted.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal

from athena_refresh.errors import QueryEngineError

from .files import read_json, write_json_atomic

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator

__all__ = ["Admission", "EngineQuota", "QuotaGate", "QuotaInterval", "QuotaReport", "max_overlap", "quota_report"]

OPERATION: Final = "StartQueryExecution"
#: Athena's message for TooManyRequestsException on StartQueryExecution.
TOO_MANY_REQUESTS_MESSAGE: Final = (
    "You have exceeded the limit for the number of queries you can run concurrently. Reduce the number of"
    " concurrent queries submitted by this account."
)
_STATE_VERSION: Final = 1
_COUNTERS: Final = ("starts", "too_many_requests", "throttled")
#: Refills add fractions of a token: 0.998 + 0.002 must make a whole one despite binary floating point.
_TOKEN_EPSILON: Final = 1e-9


@dataclass(frozen=True)
class EngineQuota:
    """Athena's limits on starting queries, as the local engine enforces them.

    Parameters
    ----------
    active_queries : int
        Queries QUEUED or RUNNING at once (Athena's "Active DML queries" quota, 25 by default in most Regions;
        https://docs.aws.amazon.com/athena/latest/ug/service-limits.html). One more -> TooManyRequestsException.
    start_rate_per_s : float
        StartQueryExecution calls refilled per second (Athena: 20/s per account and Region, archived
        awsdocs/amazon-athena-user-guide ``doc_source/service-limits.md``). Above it -> ThrottlingException.
    start_burst : int
        Size of the token bucket: calls allowed at once after a quiet period (Athena: 80).

    Examples
    --------
    >>> EngineQuota(active_queries=5)
    EngineQuota(active_queries=5, start_rate_per_s=20.0, start_burst=80)
    """

    active_queries: int = 25
    start_rate_per_s: float = 20.0
    start_burst: int = 80

    def __post_init__(self) -> None:
        problems = []
        if not _is_int(self.active_queries) or self.active_queries < 1:
            problems.append(f"active_queries must be an int >= 1, got {self.active_queries!r}")
        rate = self.start_rate_per_s
        if not isinstance(rate, int | float) or isinstance(rate, bool) or not math.isfinite(rate) or rate <= 0:
            problems.append(f"start_rate_per_s must be a finite number > 0, got {rate!r}")
        if not _is_int(self.start_burst) or self.start_burst < 1:
            problems.append(f"start_burst must be an int >= 1, got {self.start_burst!r}")
        if problems:
            raise ValueError("EngineQuota: " + "; ".join(problems))


@dataclass(frozen=True)
class Admission:
    """The quota's answer to one StartQueryExecution call that it did not refuse.

    ``kind``:

    - ``"new"``: a new active query, registered with ``query_execution_id`` (the caller's) and its interval.
    - ``"in_flight"``: the token belongs to a registered query that is still active but whose token is not
      published yet (its caller is running it, or died doing so: an Athena query outlives its caller). Run
      that query (``query_execution_id``, ``submitted_at_ms``, ``duration_ms`` are the registered ones).
    - ``"published"``: the token is published: return ``query_execution_id`` (``submitted_at_ms`` and
      ``duration_ms`` are 0, unknown here).

    For the last two, compare ``request_sha256`` with the call's: a different request is an
    InvalidRequestException.
    """

    kind: Literal["new", "in_flight", "published"]
    query_execution_id: str
    request_sha256: str
    submitted_at_ms: int
    duration_ms: int

    def mapping(self) -> dict[str, Any]:
        """``query_execution_id`` and ``request_sha256``, the shape of a published token."""
        return {"query_execution_id": self.query_execution_id, "request_sha256": self.request_sha256}


class QuotaGate:
    """The quota state of one ``state_dir`` (see the module docstring); safe across threads and processes."""

    def __init__(self, state_dir: Path, quota: EngineQuota) -> None:
        self.quota = quota
        self.directory = Path(state_dir) / "quota"
        self._lock_path = self.directory / "lock"
        self._state_path = self.directory / "state.json"
        self._history_path = self.directory / "history.jsonl"

    def admit(
        self,
        *,
        now_ms: int,
        client_request_token: str,
        request_sha256: str,
        query_execution_id: str,
        duration_ms: int,
        published: Callable[[], dict[str, Any] | None],
    ) -> Admission:
        """Take a token, then find the token's query or register a new one, under the lock.

        `published` reads the token's published mapping (``query_execution_id``, ``request_sha256``) or None;
        it is called under the lock.

        Raises
        ------
        QueryEngineError
            ``error_code`` ThrottlingException (the bucket is empty) or TooManyRequestsException
            (``active_queries`` queries are active); both ``retryable``.
        OSError, ValueError
            The quota state cannot be read or written.
        """
        with self._locked():
            state = self._load(now_ms)
            counters = state["counters"]
            if not self._take_token(state, now_ms):
                counters["throttled"] += 1
                self._save(state)
                raise QueryEngineError(
                    OPERATION, "ThrottlingException: Rate exceeded", retryable=True, error_code="ThrottlingException"
                )
            state["active"] = [entry for entry in state["active"] if entry["ends_at_ms"] > now_ms]
            existing = self._existing(state["active"], client_request_token, published)
            if existing is not None:
                self._save(state)  # the token taken
                return existing
            if len(state["active"]) >= self.quota.active_queries:
                counters["too_many_requests"] += 1
                self._save(state)
                raise QueryEngineError(
                    OPERATION,
                    f"TooManyRequestsException: {TOO_MANY_REQUESTS_MESSAGE} (local quota: {len(state['active'])}"
                    f" of {self.quota.active_queries} active queries)",
                    retryable=True,
                    error_code="TooManyRequestsException",
                )
            entry = {
                "query_execution_id": query_execution_id,
                "client_request_token": client_request_token,
                "request_sha256": request_sha256,
                "submitted_at_ms": now_ms,
                "ends_at_ms": now_ms + duration_ms,
            }
            state["active"].append(entry)
            counters["starts"] += 1
            line = {"event": "registered"} | {k: v for k, v in entry.items() if k != "request_sha256"}
            state["history_bytes"] = self._append_history(state["history_bytes"], line)
            self._save(state)
        return Admission("new", query_execution_id, request_sha256, now_ms, duration_ms)

    def withdraw(self, query_execution_id: str) -> None:
        """Undo the registration of a query that will never exist (it lost the race to publish its token)."""
        with self._locked():
            state = self._load(None)
            active = state["active"]
            state["active"] = [entry for entry in active if entry["query_execution_id"] != query_execution_id]
            state["counters"]["starts"] -= 1
            line = {"event": "withdrawn", "query_execution_id": query_execution_id}
            state["history_bytes"] = self._append_history(state["history_bytes"], line)
            self._save(state)

    # ---- internals ---------------------------------------------------------------------------------
    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """Exclusive across processes (``flock``) and threads (each call opens its own file description)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        with open(self._lock_path, "a", encoding="utf-8") as lock_file:
            fcntl.flock(lock_file.fileno(), fcntl.LOCK_EX)  # released when the file closes, or the process dies
            yield

    def _load(self, now_ms: int | None) -> dict[str, Any]:
        try:
            return read_json(self._state_path)
        except FileNotFoundError:
            return {
                "version": _STATE_VERSION,
                "tokens": float(self.quota.start_burst),
                "refilled_at_ms": now_ms,
                "active": [],
                "counters": dict.fromkeys(_COUNTERS, 0),
                "history_bytes": 0,
            }

    def _save(self, state: dict[str, Any]) -> None:
        write_json_atomic(self._state_path, state)

    def _take_token(self, state: dict[str, Any], now_ms: int) -> bool:
        """Refill the bucket for the time since its last refill (never backwards), then take one token."""
        refilled_at_ms = state["refilled_at_ms"] if state["refilled_at_ms"] is not None else now_ms
        elapsed_ms = max(0, now_ms - refilled_at_ms)
        tokens = min(float(self.quota.start_burst), state["tokens"] + elapsed_ms * self.quota.start_rate_per_s / 1000)
        state["refilled_at_ms"] = max(refilled_at_ms, now_ms)
        if tokens < 1.0 - _TOKEN_EPSILON:
            state["tokens"] = tokens
            return False
        state["tokens"] = max(0.0, tokens - 1.0)
        return True

    @staticmethod
    def _existing(
        active: list[dict[str, Any]], token: str, published: Callable[[], dict[str, Any] | None]
    ) -> Admission | None:
        mapping = published()
        if mapping is not None:
            return Admission("published", str(mapping["query_execution_id"]), str(mapping["request_sha256"]), 0, 0)
        for entry in active:
            if entry["client_request_token"] == token:
                submitted_at_ms = int(entry["submitted_at_ms"])
                return Admission(
                    "in_flight",
                    str(entry["query_execution_id"]),
                    str(entry["request_sha256"]),
                    submitted_at_ms,
                    int(entry["ends_at_ms"]) - submitted_at_ms,
                )
        return None

    def _append_history(self, committed_bytes: int, line: dict[str, Any]) -> int:
        """Write `line` at the committed end (cutting off what a killed writer left); returns the new end."""
        data = (json.dumps(line, separators=(",", ":")) + "\n").encode("utf-8")
        fd = os.open(self._history_path, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            os.ftruncate(fd, committed_bytes)
            written = os.pwrite(fd, data, committed_bytes)
            if written != len(data):
                raise OSError(f"short write to {self._history_path}: {written} of {len(data)} bytes")
        finally:
            os.close(fd)
        return committed_bytes + len(data)


# --------------------------------------------------------------------------------------------------
# measurements
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class QuotaInterval:
    """One registered query: active (QUEUED or RUNNING) during ``[submitted_at_ms, ends_at_ms)``."""

    query_execution_id: str
    client_request_token: str
    submitted_at_ms: int
    ends_at_ms: int


@dataclass(frozen=True)
class QuotaReport:
    """What the quota of one ``state_dir`` saw (:func:`quota_report`).

    ``starts``: queries registered (new active queries); ``too_many_requests`` / ``throttled``: calls refused
    with TooManyRequestsException / ThrottlingException; ``intervals``: the registered queries in history order;
    ``max_active_queries``: the most intervals overlapping at one instant (:func:`max_overlap`).
    """

    starts: int
    too_many_requests: int
    throttled: int
    max_active_queries: int
    intervals: tuple[QuotaInterval, ...]

    def active_at(self, t_ms: int) -> int:
        """How many queries were active at `t_ms` (``submitted_at_ms <= t_ms < ends_at_ms``)."""
        return sum(1 for i in self.intervals if i.submitted_at_ms <= t_ms < i.ends_at_ms)


def max_overlap(intervals: Iterable[QuotaInterval]) -> int:
    """The maximum number of half-open intervals ``[submitted, ends)`` overlapping at any instant.

    A sweep over the boundaries, ends before starts at equal times: ``[a, b)`` and ``[b, c)`` never overlap.
    Empty intervals (``ends <= submitted``) count nowhere.
    """
    events = []
    for interval in intervals:
        if interval.ends_at_ms > interval.submitted_at_ms:
            events.append((interval.submitted_at_ms, 1))
            events.append((interval.ends_at_ms, -1))
    events.sort()  # (t, -1) sorts before (t, +1)
    best = current = 0
    for _t, delta in events:
        current += delta
        best = max(best, current)
    return best


def quota_report(state_dir: Path) -> QuotaReport:
    """Counters and history of the quota under `state_dir`, from any process (no lock taken).

    Reads ``state.json`` (one atomic file), then the history up to its committed size: a consistent
    snapshot even while other processes start queries. A ``state_dir`` never used with a quota reports zeros.
    """
    directory = Path(state_dir) / "quota"
    try:
        state = read_json(directory / "state.json")
    except FileNotFoundError:
        return QuotaReport(starts=0, too_many_requests=0, throttled=0, max_active_queries=0, intervals=())
    committed = ""
    if state["history_bytes"]:  # no history yet if every call so far was refused or reused a token
        with open(directory / "history.jsonl", "rb") as f:
            committed = f.read(int(state["history_bytes"])).decode("utf-8")
    registered: dict[str, QuotaInterval] = {}
    for text in committed.splitlines():
        line = json.loads(text)
        if line["event"] == "withdrawn":
            registered.pop(line["query_execution_id"], None)
            continue
        registered[line["query_execution_id"]] = QuotaInterval(
            query_execution_id=line["query_execution_id"],
            client_request_token=line["client_request_token"],
            submitted_at_ms=int(line["submitted_at_ms"]),
            ends_at_ms=int(line["ends_at_ms"]),
        )
    intervals = tuple(registered.values())
    counters = state["counters"]
    return QuotaReport(
        starts=int(counters["starts"]),
        too_many_requests=int(counters["too_many_requests"]),
        throttled=int(counters["throttled"]),
        max_active_queries=max_overlap(intervals),
        intervals=intervals,
    )


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
