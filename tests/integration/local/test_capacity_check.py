"""The capacity checker (``local.scenario.checker.capacity``) on synthetic histories: a clean run passes, and each
violation (over the budget, a start without a permit, a permit reclaimed under a running query, a second query for
one slot attempt, a query nobody can account for) is caught; so are the two faults of issue 31 as they showed
before the fix (two deployments sharing one budget with colliding job names; a start whose answer was lost, its
permit reclaimed by expiry while the query ran), and their fixed behaviour passes."""

from __future__ import annotations

import pytest

from athena_refresh.engine import client_request_token
from athena_refresh.stored import result_sort_key
from local.emulators.duckdb_engine import QuotaInterval
from local.scenario.checker.capacity import (
    CHECKS,
    PermitEvent,
    SlotAttempt,
    check_capacity,
    holdings,
    max_overlap,
    token_index,
)

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


# ---- two deployments on one budget (issue 31, finding 1) -------------------------------------------------------------
PROD, STAGING = "capacity-prod-locks", "capacity-staging-locks"
SLOT = "2026-11-24T20:30:00Z"


def owner_in(deployment: str, job: str = "cap-003") -> str:
    """The permit owner of ``job``'s live slot in ``deployment`` (what the fixed Athena function writes)."""
    return f"{job}#{SLOT}#g1#d{deployment}"


def deployment_tokens(*deployments: str, job: str = "cap-003") -> dict[str, SlotAttempt]:
    """The real ClientRequestTokens of ``job``'s slot in each deployment (the lock table is the token's
    deployment_id), mapped to owners naming their deployment."""
    return token_index([owner_in(d, job) for d in deployments], max_attempts=2)


def token_of(deployment: str, job: str = "cap-003", attempt: int = 1) -> str:
    return client_request_token(job, result_sort_key(SLOT, 1), attempt, deployment_id=deployment)


def written(t_ms: int, op: str, owner_id: str, deployment: str, token: int, key: str = "0") -> PermitEvent:
    """A permit write of ``deployment``'s function (the writer's deployment recorded with it)."""
    return PermitEvent(t_ms, op, f"permit#s#{key}", owner_id, token, deployment=deployment)


def test_the_token_index_maps_each_deployments_tokens_to_its_own_owner() -> None:
    # GIVEN the same job and slot in two deployments (staging and production in one account)
    index = deployment_tokens(PROD, STAGING)
    # THEN their tokens differ and stand for two owners, one per deployment, attempt by attempt
    assert index[token_of(PROD)] == SlotAttempt(owner_in(PROD), 1)
    assert index[token_of(STAGING)] == SlotAttempt(owner_in(STAGING), 1)
    assert index[token_of(STAGING, attempt=2)] == SlotAttempt(owner_in(STAGING), 2)
    assert len(index) == 4
    # and an owner id that names no deployment cannot be indexed: its tokens are unknown
    with pytest.raises(ValueError, match="naming its deployment"):
        token_index([owner("a")], max_attempts=1)


@pytest.mark.parametrize("staging_token", [7, 9], ids=["same-token-held", "higher-token-inherited"])
def test_two_deployments_with_colliding_job_names_over_the_budget_are_caught(staging_token: int) -> None:
    # GIVEN a budget of 1 shared by two deployments whose semaphores write owner ids without the deployment (before
    # the fix): production's cap-003 takes permit 0 with its lock table's token 7; staging's cap-003, the same owner
    # id with a token of ITS lock table, finds "its" permit: the same token is "held" (no write), a higher one
    # inherits it. Both queries run at once under one permit.
    legacy = f"cap-003#{SLOT}#g1"
    intervals = [
        QuotaInterval("q-prod", token_of(PROD), 100, 3_000),
        QuotaInterval("q-staging", token_of(STAGING), 200, 2_500),
    ]
    events = [written(90, "take", legacy, PROD, 7)]
    if staging_token > 7:
        events.append(written(190, "inherit", legacy, STAGING, staging_token))
        events.append(written(2_600, "release", legacy, STAGING, staging_token))
    else:
        events.append(written(3_100, "release", legacy, PROD, 7))
    # WHEN both deployments' queries and permit writes are checked against the one budget
    result = check_capacity(intervals, deployment_tokens(PROD, STAGING), events, budget=1)
    # THEN two queries active at once on a budget of one is reported, with how the second one got there
    found = violations_of(result)
    (exceeded,) = [v for v in result.violations if v["check"] == "capacity_exceeded"]
    assert exceeded["detail"].startswith("2 ") and "active at 200 (budget 1)" in exceeded["detail"]
    assert "q-prod" in exceeded["detail"] and "q-staging" in exceeded["detail"]
    if staging_token > 7:  # staging's inheritance took production's permit while production's query ran
        assert found == {"capacity_exceeded": 1, "permit_reclaimed_while_active": 1}
        (reclaimed,) = [v for v in result.violations if v["check"] == "permit_reclaimed_while_active"]
        assert reclaimed["owner"] == owner_in(PROD) and owner_in(STAGING) in reclaimed["detail"]
    else:  # staging never wrote the permit: its query started without one of its own
        assert found == {"capacity_exceeded": 1, "unpermitted_start": 1}
        (unpermitted,) = [v for v in result.violations if v["check"] == "unpermitted_start"]
        assert unpermitted["owner"] == owner_in(STAGING)
    # and never as one slot's second query: the two deployments' namesakes are two owners
    assert result.max_queries_per_slot == 1


def test_two_deployments_with_colliding_job_names_each_waiting_for_a_permit_pass() -> None:
    # GIVEN the fixed semaphores: owner ids name the deployment, so staging's cap-003 waits for production's
    # cap-003 to release the only permit, then takes it (a token of its own lock table, lower than production's)
    intervals = [
        QuotaInterval("q-prod", token_of(PROD), 100, 1_000),
        QuotaInterval("q-staging", token_of(STAGING), 1_200, 2_000),
    ]
    events = [
        written(90, "take", owner_in(PROD), PROD, 7),
        written(95, "record", owner_in(PROD), PROD, 7),
        written(1_100, "release", owner_in(PROD), PROD, 7),
        written(1_150, "take", owner_in(STAGING), STAGING, 3),
        written(2_100, "release", owner_in(STAGING), STAGING, 3),
    ]
    # WHEN checked against the one budget
    result = check_capacity(intervals, deployment_tokens(PROD, STAGING), events, budget=1)
    # THEN nothing is reported: two owners, one query each, never two at once
    assert result.violations == []
    assert (result.permitted_queries, result.max_known_active, result.max_queries_per_slot) == (2, 1, 1)
    assert [h.owner for h in holdings(events)] == [owner_in(PROD), owner_in(STAGING)]


def test_an_owner_id_naming_its_deployment_is_never_requalified_by_its_writer() -> None:
    # an id that names a deployment is judged as written; one that names none takes its writer's
    assert written(0, "take", owner_in(PROD), STAGING, 1).holder == owner_in(PROD)
    assert written(0, "take", f"cap-003#{SLOT}#g1", STAGING, 1).holder == owner_in(STAGING)
    assert PermitEvent(0, "take", "permit#s#0", f"cap-003#{SLOT}#g1").holder == f"cap-003#{SLOT}#g1"


# ---- a start whose answer was lost (issue 31, finding 2) --------------------------------------------------------------
def lost_answer_history(*, reclaimed: bool) -> tuple[list[QuotaInterval], list[PermitEvent]]:
    """cap-003 takes permit 0 (token 1) and starts its query at 100 (it runs until 20 000), but the answer is lost:
    nothing is recorded on the permit, the invocation fails, and Lambda's retry (token 2) comes at 13 000, after
    the permit's expiry (at 10 090). ``reclaimed``: cap-007, a waiter, reclaims the expired permit at 12 000 (no
    start window) and starts its query; the retry then takes permit 1 and gets the same query back (no new
    interval). Else: the permit stays counted, the retry inherits it and records the query; cap-007 waits for
    the release."""
    me, waiter = owner_in(PROD), owner_in(PROD, "cap-007")
    intervals = [QuotaInterval("q-lost", token_of(PROD), 100, 20_000)]
    events = [written(90, "take", me, PROD, 1)]
    if reclaimed:
        intervals.append(QuotaInterval("q-waiter", token_of(PROD, "cap-007"), 12_100, 14_000))
        events += [
            written(12_000, "take", waiter, PROD, 1),
            written(13_000, "take", me, PROD, 2, key="1"),
            written(13_010, "record", me, PROD, 2, key="1"),
            written(14_100, "release", waiter, PROD, 1),
            written(20_100, "release", me, PROD, 2, key="1"),
        ]
    else:
        intervals.append(QuotaInterval("q-waiter", token_of(PROD, "cap-007"), 20_300, 22_000))
        events += [
            written(13_000, "inherit", me, PROD, 2),
            written(13_010, "record", me, PROD, 2),
            written(20_100, "release", me, PROD, 2),
            written(20_200, "take", waiter, PROD, 1),
            written(22_100, "release", waiter, PROD, 1),
        ]
    return intervals, events


def lost_answer_tokens() -> dict[str, SlotAttempt]:
    return token_index([owner_in(PROD), owner_in(PROD, "cap-007")], max_attempts=2)


def test_a_lost_answer_start_whose_permit_is_reclaimed_while_the_query_runs_is_caught() -> None:
    # GIVEN a query whose start answer was lost, and its permit reclaimed by expiry while it still runs
    intervals, events = lost_answer_history(reclaimed=True)
    # WHEN it is checked (budget 1)
    result = check_capacity(intervals, lost_answer_tokens(), events, budget=1)
    # THEN the lost-answer query counts as permitted under the permit its owner held when it was submitted, and
    # that permit passing on while it ran is reported, as is the second query at once on a budget of one
    assert violations_of(result) == {"capacity_exceeded": 1, "permit_reclaimed_while_active": 1}
    (reclaimed,) = [v for v in result.violations if v["check"] == "permit_reclaimed_while_active"]
    assert reclaimed["owner"] == owner_in(PROD) and "q-lost" in reclaimed["detail"]
    assert "taken by " + owner_in(PROD, "cap-007") in reclaimed["detail"]
    assert result.permitted_queries == 2 and result.max_queries_per_slot == 1


def test_a_lost_answer_start_kept_counted_until_its_retry_inherits_the_permit_passes() -> None:
    # GIVEN the fixed behaviour: the permit taken for the lost-answer start stays counted past its expiry, Lambda's
    # retry inherits it (one holding from the take to the release) and the waiter takes it after the release
    intervals, events = lost_answer_history(reclaimed=False)
    # WHEN it is checked (budget 1)
    result = check_capacity(intervals, lost_answer_tokens(), events, budget=1)
    # THEN nothing is reported
    assert result.violations == []
    assert [(h.owner, h.start_ms, h.end_ms, h.ended_by) for h in holdings(events)] == [
        (owner_in(PROD), 90, 20_100, "release"),
        (owner_in(PROD, "cap-007"), 20_200, 22_100, "release"),
    ]
