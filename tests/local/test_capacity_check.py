"""The capacity checker (``local.chaos.capacity_check``) on synthetic histories: a clean run passes, and each
violation (over the budget, a start without a permit, a permit reclaimed under a running query, a second query for
one slot attempt, a query nobody can account for) is caught."""

from __future__ import annotations

from local.chaos.capacity_check import (
    CHECKS,
    PermitEvent,
    SlotAttempt,
    check_capacity,
    holdings,
    max_overlap,
)
from local.emulators.duckdb_engine import QuotaInterval

BUDGET = 2


def owner(job: str) -> str:
    return f"{job}#2026-11-24T20:30:00Z#g1"


def query(qid: str, job: str, start_ms: int, end_ms: int, attempt: int = 1) -> QuotaInterval:
    return QuotaInterval(qid, f"token-{job}-{attempt}", start_ms, end_ms)


def tokens(*jobs: str, attempts: int = 2) -> dict[str, SlotAttempt]:
    return {f"token-{job}-{a}": SlotAttempt(owner(job), a) for job in jobs for a in range(1, attempts + 1)}


def take(t_ms: int, key: str, job: str, token: int = 1, op: str = "take") -> PermitEvent:
    return PermitEvent(t_ms, op, f"permit#s#{key}", owner(job), token)


def release(t_ms: int, key: str, job: str, token: int = 1) -> PermitEvent:
    return PermitEvent(t_ms, "release", f"permit#s#{key}", owner(job), token)


def clean_history() -> tuple[list[QuotaInterval], list[PermitEvent]]:
    """Three slots on two permits: a and b run at once; c waits for a's permit and runs after a's query ended.
    b's holder is killed and its retry inherits the permit (a higher token) while b's query runs on."""
    intervals = [query("qa", "a", 100, 1_100), query("qb", "b", 150, 3_000), query("qc", "c", 1_300, 2_000)]
    events = [
        take(90, "0", "a"),
        take(140, "1", "b"),
        take(2_500, "1", "b", token=2, op="inherit"),  # the retry of b's killed holder
        release(1_200, "0", "a"),
        take(1_250, "0", "c"),
        release(2_100, "0", "c"),
        release(3_100, "1", "b", token=2),
    ]
    return intervals, events


def violations_of(result: object) -> dict[str, int]:
    return result.as_dict()["violations_by_check"]  # type: ignore[attr-defined]


def test_a_clean_history_passes_with_its_figures() -> None:
    # GIVEN a run where at most two permitted queries overlap, on a budget of two
    intervals, events = clean_history()
    # WHEN it is checked
    result = check_capacity(intervals, tokens("a", "b", "c"), events, budget=BUDGET)
    # THEN nothing is reported, and the figures say so
    assert result.violations == []
    assert (result.queries, result.permitted_queries, result.max_permitted_active) == (3, 3, 2)
    assert result.max_queries_per_slot == 1
    assert set(result.as_dict()["checks"]) == set(CHECKS)


def test_more_permitted_queries_than_the_budget_at_one_instant_is_caught() -> None:
    # GIVEN a third slot that took a permit of its own (a broken semaphore: three permits on a budget of two)
    intervals, events = clean_history()
    intervals.append(query("qd", "d", 500, 900))
    events += [take(450, "2", "d"), release(950, "2", "d")]
    # WHEN it is checked
    result = check_capacity(intervals, tokens("a", "b", "c", "d"), events, budget=BUDGET)
    # THEN the instant with three active permitted queries is named, with the queries
    assert violations_of(result) == {"capacity_exceeded": 1}
    (violation,) = result.violations
    assert "3 permitted queries active at 500" in violation["detail"]
    assert all(qid in violation["detail"] for qid in ("qa", "qb", "qd"))
    assert result.max_permitted_active == 3


def test_intervals_that_only_touch_do_not_overlap() -> None:
    # GIVEN a query that starts the very millisecond another ends (half-open intervals)
    intervals = [query("q1", "a", 0, 1_000), query("q2", "b", 1_000, 2_000)]
    # THEN they never count together
    assert max_overlap(intervals)[0] == 1
    events = [take(0, "0", "a"), release(1_000, "0", "a"), take(1_000, "0", "b")]
    assert check_capacity(intervals, tokens("a", "b"), events, budget=1).violations == []


def test_a_query_started_without_a_permit_is_caught() -> None:
    # GIVEN a slot whose query starts after its permit was released (or that never took one)
    intervals = [query("qa", "a", 100, 500), query("qe", "e", 200, 400)]
    events = [take(50, "0", "a"), release(600, "0", "a")]
    # WHEN it is checked with a budget
    result = check_capacity(intervals, tokens("a", "e"), events, budget=BUDGET)
    # THEN the unpermitted start is named; without a budget (the negative control) it is not a violation
    assert violations_of(result) == {"unpermitted_start": 1}
    assert result.violations[0]["owner"] == owner("e")
    assert check_capacity(intervals, tokens("a", "e"), events, budget=None).violations == []


def test_a_permit_reclaimed_while_its_query_runs_is_caught() -> None:
    # GIVEN a holder whose permit names no query yet (killed between StartQueryExecution and its record), and a
    # waiter that reclaims the expired permit while that query still runs
    intervals = [query("qa", "a", 100, 5_000), query("qf", "f", 2_500, 3_000)]
    events = [take(90, "0", "a"), take(2_400, "0", "f"), release(3_100, "0", "f")]
    # WHEN it is checked
    result = check_capacity(intervals, tokens("a", "f"), events, budget=BUDGET)
    # THEN two active queries on one permit are reported even though the budget was not exceeded
    assert violations_of(result) == {"permit_reclaimed_while_active": 1}
    assert "taken by " + owner("f") in result.violations[0]["detail"]
    # and the holdings say who held permit 0 when
    assert [(h.owner, h.start_ms, h.end_ms, h.ended_by) for h in holdings(events)] == [
        (owner("a"), 90, 2_400, owner("f")),
        (owner("f"), 2_400, 3_100, "release"),
    ]


def test_a_second_query_for_one_slot_is_caught() -> None:
    # GIVEN a takeover that inherited the permit but started a new attempt while the first query still ran
    intervals = [query("qb1", "b", 100, 3_000), query("qb2", "b", 2_000, 2_500, attempt=2)]
    events = [take(90, "1", "b"), take(1_900, "1", "b", token=2, op="inherit"), release(3_100, "1", "b", token=2)]
    # WHEN it is checked
    result = check_capacity(intervals, tokens("b"), events, budget=BUDGET)
    # THEN the overlapping second query is reported, and the slot is counted with two queries
    assert violations_of(result) == {"second_query": 1}
    assert "qb2" in result.violations[0]["detail"] and result.max_queries_per_slot == 2


def test_two_queries_for_one_attempt_and_unknown_tokens_are_caught() -> None:
    # GIVEN the same attempt's token mapped to two queries (the engine's idempotency broken), and a stray query
    intervals = [
        query("q1", "a", 100, 200),
        QuotaInterval("q2", "token-a-1", 300, 400),
        QuotaInterval("q3", "token-nobody", 300, 400),
    ]
    events = [take(50, "0", "a"), release(500, "0", "a")]
    # WHEN it is checked
    result = check_capacity(intervals, tokens("a"), events, budget=BUDGET)
    # THEN both are named
    assert violations_of(result) == {"second_query": 1, "unknown_query": 1}


def test_an_inheritance_by_the_same_slot_continues_its_holding() -> None:
    # GIVEN a killed holder's retry (same slot, higher token) inheriting the permit mid-query
    events = [take(0, "0", "a"), take(1_000, "0", "a", token=2, op="inherit"), release(2_000, "0", "a", token=2)]
    # THEN it is one holding from the take to the release
    assert [(h.start_ms, h.end_ms, h.ended_by) for h in holdings(events)] == [(0, 2_000, "release")]
