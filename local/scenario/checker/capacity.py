"""The capacity checker: Athena's side of the capacity semaphore, judged from what was recorded, not what was said.

Pure functions over three records of one run (``make capacity``, :mod:`local.capacity`):

- the **engine's intervals**: every query the Athena stand-in registered, active (QUEUED or RUNNING) during
  ``[submitted_at_ms, ends_at_ms)`` (:func:`local.emulators.duckdb_engine.quota_report`), with its
  ClientRequestToken;
- the **token index** (:func:`token_index`): which slot attempt each token stands for (the runtime derives the
  token from deployment, job, slot, generation and attempt: ``athena_refresh.engine.client_request_token``), as
  :class:`SlotAttempt`; the slot's ``owner`` is the permit owner ``<job>#<slot>#g<generation>#d<deployment>``
  (:class:`slotlock.PermitOwner`; the deployment is the lock table's name, the token's ``deployment_id``), so the
  same-named jobs of two deployments sharing one budget are two owners;
- the **permit history**: every permit write DynamoDB accepted (:class:`PermitEvent`: ``take``, ``inherit``,
  ``record``, ``renew``, ``release``; the environments observe them on their boto3 clients), in wall-clock ms on
  the same host as the engine's clock, each with the deployment of the function that wrote it. An owner id that
  names no deployment (slotlock 1.0's format, or a semaphore that was not told its deployment) is judged as the
  writer's (:attr:`PermitEvent.holder`): a deployment that took or inherited another deployment's permit under a
  colliding name is then another owner taking it, not the same slot.

From these it rebuilds, for every owner, when it held which permit (a take or an inheritance starts a holding, its
release or another owner's take of the same permit ends it) and reports every violation of:

``capacity_exceeded``
    never more than ``budget`` queries of the budget's slots (every query of a known slot attempt, permitted or not)
    QUEUED or RUNNING at any instant; an unpermitted one is also an ``unpermitted_start``. A permitted query: one
    submitted while its owner held a permit (a query whose start answer was lost included: it is judged by when the
    engine registered it, not by whether its holder learnt its id);
``unpermitted_start``
    with a budget, every query is submitted while its owner holds a permit;
``permit_reclaimed_while_active``
    a permit passes to another owner only once the queries started under it are no longer active (a reclaim
    must wait for the query to be terminal; two active queries on one permit over-count the budget);
``second_query``
    each slot's query is started at most once per attempt: one query per (owner, attempt), and no query of an
    owner while an earlier one of that owner is still active (a takeover or a retry that inherited the permit
    adopts the running query, it never starts another);
``unknown_query``
    every query the engine registered belongs to a known slot attempt.

Violations are dicts ``{"check", "owner", "detail"}`` (the shape of :mod:`local.scenario.checker`'s, ``owner`` in
place of ``slot``). The unit tests feed synthetic histories, one of them over the budget, which must be caught.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from athena_refresh.engine import client_request_token
from athena_refresh.stored import result_sort_key
from slotlock import PermitOwner

CHECKS = ("capacity_exceeded", "unpermitted_start", "permit_reclaimed_while_active", "second_query", "unknown_query")
#: Permit writes that give an owner a permit (a take: free or reclaimed; an inheritance by a new holder).
GAINS = ("take", "inherit")


class QueryInterval(Protocol):
    """One registered query (``local.emulators.duckdb_engine.QuotaInterval`` has this shape)."""

    @property
    def query_execution_id(self) -> str: ...

    @property
    def client_request_token(self) -> str: ...

    @property
    def submitted_at_ms(self) -> int: ...

    @property
    def ends_at_ms(self) -> int: ...


@dataclass(frozen=True)
class SlotAttempt:
    """The slot attempt a ClientRequestToken stands for: the permit owner of the slot and the attempt (1, 2, ...)."""

    owner: str
    attempt: int


@dataclass(frozen=True)
class PermitEvent:
    """A permit write DynamoDB accepted, at ``t_ms`` (wall clock, ms; after its answer arrived); ``deployment``: the
    deployment (lock table) of the function that wrote it, when known."""

    t_ms: int
    op: str  # take, inherit, record, renew, release
    key: str  # permit#<semaphore>#<i>
    owner: str
    token: int | None = None
    query: str | None = None
    request_id: str | None = None
    deployment: str | None = None

    @property
    def holder(self) -> str:
        """The owner as judged: ``owner``, with the writer's deployment when the id names none."""
        if self.deployment is None:
            return self.owner
        parsed = PermitOwner.from_id(self.owner)
        if parsed is None or parsed.deployment is not None:
            return self.owner
        return replace(parsed, deployment=self.deployment).id


def token_index(owners: Iterable[str], max_attempts: int) -> dict[str, SlotAttempt]:
    """Every ClientRequestToken a query of these permit owners (``<job>#<slot>#g<n>#d<deployment>``) can carry,
    one per attempt, as the runtime derives it (the deployment is the token's ``deployment_id``: the lock table's
    name). Raises ``ValueError`` for an owner id that names no deployment or is not a slot's."""
    index = {}
    for owner_id in owners:
        owner = PermitOwner.from_id(owner_id)
        if owner is None or owner.deployment is None:
            raise ValueError(f"not a permit owner naming its deployment: {owner_id!r}")
        key = result_sort_key(owner.slot.iso, owner.generation)
        for attempt in range(1, max_attempts + 1):
            token = client_request_token(owner.job, key, attempt, deployment_id=owner.deployment)
            index[token] = SlotAttempt(owner_id, attempt)
    return index


@dataclass(frozen=True)
class Holding:
    """``owner`` held permit ``key`` during ``[start_ms, end_ms)`` (``end_ms`` None: to the end of the record)."""

    owner: str
    key: str
    start_ms: int
    end_ms: int | None
    ended_by: str | None = None  # release, or the owner that took the permit next

    def covers(self, t_ms: int) -> bool:
        return self.start_ms <= t_ms and (self.end_ms is None or t_ms < self.end_ms)


@dataclass
class CapacityCheck:
    """The verdict and the figures of one run (:func:`check_capacity`)."""

    violations: list[dict[str, Any]] = field(default_factory=list)
    queries: int = 0
    permitted_queries: int = 0
    max_permitted_active: int = 0
    max_known_active: int = 0
    max_active: int = 0
    max_queries_per_slot: int = 0
    holdings: int = 0

    def as_dict(self) -> dict[str, Any]:
        by_check: dict[str, int] = defaultdict(int)
        for violation in self.violations:
            by_check[violation["check"]] += 1
        return {
            "checks": list(CHECKS),
            "violations": self.violations,
            "violations_by_check": dict(sorted(by_check.items())),
            "queries": self.queries,
            "permitted_queries": self.permitted_queries,
            "max_permitted_active": self.max_permitted_active,
            "max_known_active": self.max_known_active,
            "max_active": self.max_active,
            "max_queries_per_slot": self.max_queries_per_slot,
            "permit_holdings": self.holdings,
        }


def _violation(check: str, owner: str | None, detail: str) -> dict[str, Any]:
    return {"check": check, "owner": owner, "detail": detail}


def holdings(events: Iterable[PermitEvent]) -> list[Holding]:
    """Who held which permit when: a take or inheritance starts a holding of its owner (an inheritance by the same
    owner continues it), a release by the owner or another owner's take of the same permit ends it. Owners as
    judged (:attr:`PermitEvent.holder`)."""
    current: dict[str, Holding] = {}  # permit key -> its open holding
    done: list[Holding] = []
    for event in sorted(events, key=lambda e: e.t_ms):
        open_ = current.get(event.key)
        holder = event.holder
        if event.op in GAINS:
            if open_ is not None and open_.owner == holder:
                continue  # inherited by a new holder of the same slot: one holding
            if open_ is not None:
                done.append(_ended(open_, event.t_ms, holder))
            current[event.key] = Holding(holder, event.key, event.t_ms, None)
        elif event.op == "release" and open_ is not None and open_.owner == holder:
            done.append(_ended(open_, event.t_ms, "release"))
            del current[event.key]
    return sorted([*done, *current.values()], key=lambda h: (h.start_ms, h.key))


def _ended(holding: Holding, t_ms: int, by: str) -> Holding:
    return Holding(holding.owner, holding.key, holding.start_ms, t_ms, by)


def max_overlap(intervals: Iterable[QueryInterval]) -> tuple[int, int | None, list[str]]:
    """The most half-open intervals active at one instant, the first such instant, and the queries active then."""
    chosen = [i for i in intervals if i.ends_at_ms > i.submitted_at_ms]
    events = sorted([(i.submitted_at_ms, 1) for i in chosen] + [(i.ends_at_ms, -1) for i in chosen])
    best, at, current = 0, None, 0
    for t_ms, delta in events:  # at equal times ends (-1) come first: [a, b) and [b, c) never overlap
        current += delta
        if current > best:
            best, at = current, t_ms
    active = [] if at is None else [i.query_execution_id for i in chosen if i.submitted_at_ms <= at < i.ends_at_ms]
    return best, at, active


def check_capacity(
    intervals: Sequence[QueryInterval],
    tokens: Mapping[str, SlotAttempt],
    permit_events: Iterable[PermitEvent],
    *,
    budget: int | None,
) -> CapacityCheck:
    """Every check of the module docstring; ``budget`` ``None``: the run had no budget, so only ``second_query`` and
    ``unknown_query`` apply and the overlap is reported, not judged (the negative control is judged against the
    budget it lacked: it must be caught)."""
    result = CapacityCheck(queries=len(intervals))
    held = holdings(permit_events)
    result.holdings = len(held)
    by_owner: dict[str, list[Holding]] = defaultdict(list)
    for holding in held:
        by_owner[holding.owner].append(holding)
    permitted: list[QueryInterval] = []
    known: list[QueryInterval] = []  # every query of a known slot attempt: what the budget bounds
    started_under: dict[str, Holding] = {}  # query id -> the holding it was submitted under
    per_owner: dict[str, list[tuple[QueryInterval, int]]] = defaultdict(list)
    for interval in intervals:
        attempt = tokens.get(interval.client_request_token)
        if attempt is None:
            result.violations.append(
                _violation("unknown_query", None, f"query {interval.query_execution_id}: token of no known slot")
            )
            continue
        per_owner[attempt.owner].append((interval, attempt.attempt))
        known.append(interval)
        holding = next((h for h in by_owner.get(attempt.owner, ()) if h.covers(interval.submitted_at_ms)), None)
        if holding is not None:
            permitted.append(interval)
            started_under[interval.query_execution_id] = holding
        elif budget is not None:
            result.violations.append(
                _violation(
                    "unpermitted_start",
                    attempt.owner,
                    f"query {interval.query_execution_id} (attempt {attempt.attempt}) submitted at"
                    f" {interval.submitted_at_ms} while its slot held no permit",
                )
            )
    result.permitted_queries = len(permitted)
    result.max_active = max_overlap(intervals)[0]
    result.max_permitted_active = max_overlap(permitted)[0]
    best, at, active = max_overlap(known)
    result.max_known_active = best
    if budget is not None and best > budget:
        with_permit = sum(1 for i in permitted if i.query_execution_id in active)
        what = (
            f"{best} permitted queries" if with_permit == best else f"{best} queries ({with_permit} of them permitted)"
        )
        result.violations.append(
            _violation(
                "capacity_exceeded", None, f"{what} active at {at} (budget {budget}): {', '.join(sorted(active))}"
            )
        )
    if budget is not None:
        result.violations += _reclaimed_while_active(permitted, started_under)
    result.violations += _second_queries(per_owner)
    result.max_queries_per_slot = max((len(queries) for queries in per_owner.values()), default=0)
    return result


def _reclaimed_while_active(
    permitted: Sequence[QueryInterval], started_under: Mapping[str, Holding]
) -> list[dict[str, Any]]:
    """A holding ended by another owner's take while a query started under it was still active."""
    found = []
    for interval in permitted:
        holding = started_under[interval.query_execution_id]
        if holding.end_ms is None or holding.ended_by in (None, "release"):
            continue
        if holding.end_ms < interval.ends_at_ms:
            found.append(
                _violation(
                    "permit_reclaimed_while_active",
                    holding.owner,
                    f"{holding.key} taken by {holding.ended_by} at {holding.end_ms} while query"
                    f" {interval.query_execution_id} ran until {interval.ends_at_ms}",
                )
            )
    return found


def _second_queries(per_owner: Mapping[str, list[tuple[QueryInterval, int]]]) -> list[dict[str, Any]]:
    found = []
    for owner, queries in sorted(per_owner.items()):
        by_attempt: dict[int, set[str]] = defaultdict(set)
        for interval, attempt in queries:
            by_attempt[attempt].add(interval.query_execution_id)
        for attempt, ids in sorted(by_attempt.items()):
            if len(ids) > 1:
                found.append(
                    _violation("second_query", owner, f"attempt {attempt} has {len(ids)} queries: {sorted(ids)}")
                )
        ordered = sorted(queries, key=lambda pair: pair[0].submitted_at_ms)
        for (first, _), (second, attempt) in itertools.pairwise(ordered):
            if second.submitted_at_ms < first.ends_at_ms and second.query_execution_id != first.query_execution_id:
                found.append(
                    _violation(
                        "second_query",
                        owner,
                        f"query {second.query_execution_id} (attempt {attempt}) started at {second.submitted_at_ms}"
                        f" while {first.query_execution_id} was active until {first.ends_at_ms}",
                    )
                )
    return found


__all__ = [
    "CHECKS",
    "CapacityCheck",
    "Holding",
    "PermitEvent",
    "SlotAttempt",
    "check_capacity",
    "holdings",
    "max_overlap",
    "token_index",
]
