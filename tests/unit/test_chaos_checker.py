"""The chaos history checker on hand-made histories: each check passes a clean history and catches its violation
(the operator's actions and the manual generations included); and the seeded plan's coverage."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest

from local.chaos.plan import (
    FORCED_MISSED_RESEND,
    FORCED_RELEASE_CONFLICT,
    FORCED_WRITE_FAULTS,
    KILL_POINTS,
    MIN_STALE_COMMIT_SCENARIOS,
    OPERATOR_RELEASE,
    RERUN_WINDOW,
    RESUME_AFTER_NEXT_SLOT,
    RESUME_POLICIES,
    STALE_COMMIT_POINTS,
    ChaosOptions,
    make_plan,
)
from local.scenario.checker import (
    FinalState,
    accepted_commits,
    check_final_state,
    check_force_release,
    check_future_refused,
    check_generations,
    check_history,
    check_manual_isolation,
    check_paused_slots,
    check_slot_missed_logged,
    check_terminal_records,
    delivered_slots,
    live_history,
    logged_missed_slots,
    manual_requests,
    percentile,
    terminal_writes,
)

S1, S2, S3 = "2026-11-22T00:00:00Z", "2026-11-22T00:30:00Z", "2026-11-22T01:00:00Z"
MS = 1_000_000


def cp(t_ms: int, rid: str, slot: str, checkpoint: str, token: int) -> dict[str, Any]:
    return {
        "what": "checkpoint",
        "t_ns": t_ms * MS,
        "request_id": rid,
        "slot": slot,
        "checkpoint": checkpoint,
        "token": token,
    }


def result(t_ms: int, rid: str, slot: str, status: str, token: int | None, reason: str | None = None) -> dict[str, Any]:
    return {
        "what": "result",
        "t_ns": t_ms * MS,
        "request_id": rid,
        "slot": slot,
        "status": status,
        "token": token,
        "reason": reason,
    }


def clean_run(rid: str, slot: str, token: int, t0: int) -> list[dict[str, Any]]:
    return [
        cp(t0, rid, slot, "acquired", token),
        cp(t0 + 10, rid, slot, "before_commit", token),
        cp(t0 + 20, rid, slot, "committed", token),
        result(t0 + 21, rid, slot, "succeeded", token),
    ]


def checks(violations: list[dict[str, Any]]) -> list[str]:
    return sorted(v["check"] for v in violations)


def test_a_clean_history_has_no_violation() -> None:
    history = clean_run("a", S1, 1, 0) + clean_run("b", S2, 2, 100) + clean_run("c", S3, 3, 200)
    history += [result(5, "x", S1, "lost", None, "held"), result(150, "y", S1, "lost", None, "superseded")]
    assert check_history(history) == []


def test_a_stale_holder_rejected_after_a_takeover_is_clean() -> None:
    # a acquires 1 and stops before its commit; b takes over with 2 and commits; a resumes: stale_rejected
    history = [
        cp(0, "a", S1, "acquired", 1),
        cp(10, "a", S1, "before_commit", 1),
        cp(3000, "b", S1, "acquired", 2),
        cp(3010, "b", S1, "before_commit", 2),
        cp(3020, "b", S1, "committed", 2),
        {"what": "resumed", "t_ns": 3100 * MS, "request_id": "a", "slot": S1},
        result(3110, "a", S1, "stale_rejected", 1),
    ]
    assert check_history(history) == []


def test_two_accepted_commits_for_one_slot() -> None:
    history = clean_run("a", S1, 1, 0) + clean_run("b", S1, 2, 100)
    assert "one_commit_per_slot" in checks(check_history(history))


def test_a_retry_reporting_the_same_commit_twice_is_one_commit() -> None:
    history = clean_run("a", S1, 1, 0) + [result(50, "a", S1, "succeeded", 1)]
    assert check_history(history) == []
    assert len(accepted_commits(history)) == 1


def test_tokens_must_increase_in_slot_order() -> None:
    history = clean_run("a", S1, 5, 0) + clean_run("b", S2, 4, 100)
    assert "tokens_increase" in checks(check_history(history))


def test_a_commit_sent_after_a_newer_acquisition_is_a_stale_write() -> None:
    # a stops at before_commit; b acquires 2; a resumes and its commit (token 1) is ACCEPTED: fencing failed
    history = [
        cp(0, "a", S1, "acquired", 1),
        cp(10, "a", S1, "before_commit", 1),
        cp(3000, "b", S1, "acquired", 2),
        {"what": "resumed", "t_ns": 3100 * MS, "request_id": "a", "slot": S1},
        cp(3110, "a", S1, "committed", 1),
        result(3111, "a", S1, "succeeded", 1),
    ]
    violations = check_history(history)
    assert checks(violations) == ["stale_write_accepted"]
    assert "token 2" in violations[0]["detail"]


def test_the_send_time_without_a_resume_is_the_before_commit_checkpoint() -> None:
    # b's acquisition comes after a's commit was sent (a slow reply, not a stale write): no violation
    history = [
        cp(0, "a", S1, "acquired", 1),
        cp(10, "a", S1, "before_commit", 1),
        cp(20, "b", S2, "acquired", 2),
        cp(30, "a", S1, "committed", 1),
        cp(40, "b", S2, "before_commit", 2),
        cp(50, "b", S2, "committed", 2),
    ]
    assert check_history(history) == []


def test_an_older_slot_may_not_commit_after_a_newer_one() -> None:
    history = clean_run("b", S2, 2, 0) + [
        cp(100, "a", S1, "acquired", 3),
        cp(110, "a", S1, "before_commit", 3),
        cp(120, "a", S1, "committed", 3),
    ]
    assert "commit_after_newer_slot" in checks(check_history(history))


def test_a_killed_holder_after_its_commit_still_counts_as_a_commit() -> None:
    # the committed checkpoint arrived, then SIGKILL: no result line; a second commit must still be caught
    history = [cp(0, "a", S1, "acquired", 1), cp(10, "a", S1, "before_commit", 1), cp(20, "a", S1, "committed", 1)]
    history += clean_run("b", S1, 2, 100)
    assert "one_commit_per_slot" in checks(check_history(history))


# --- final state -----------------------------------------------------------------------------------
ROWS = [["EWR", 10], ["JFK", 12]]


def stored(s1_token: int = 1, s2_token: int = 2, rows: Any = ROWS) -> FinalState:
    return FinalState(
        slot_items={
            S1: {"status": "SUCCEEDED", "fencing_token": s1_token},
            S2: {"status": "SUCCEEDED", "fencing_token": s2_token},
            S3: {"status": "MISSED", "reason": "superseded"},
        },
        results={
            S1: {"fencing_token": s1_token, "rows": rows, "row_count": len(rows)},
            S2: {"fencing_token": s2_token, "rows": ROWS, "row_count": 2},
        },
        latest={"latest_slot": S2, "fencing_token": s2_token},
    )


def final(state: FinalState, *, planned: tuple[str, ...] = (S1, S2, S3), dlq: tuple[str, ...] = ()) -> list[str]:
    return checks(
        check_final_state(state, planned_slots=planned, dead_lettered=dlq, expected_rows={S1: ROWS, S2: ROWS})
    )


def test_a_clean_final_state_has_no_violation() -> None:
    assert final(stored()) == []


def test_a_slot_without_any_record_is_unaccounted_unless_dead_lettered() -> None:
    state = stored()
    del state.slot_items[S3]
    assert final(state) == ["slot_unaccounted"]
    assert final(state, dlq=(S3,)) == []


def test_a_missed_slot_needs_its_reason() -> None:
    state = stored()
    state.slot_items[S3] = {"status": "MISSED"}
    assert final(state) == ["slot_unaccounted"]


@pytest.mark.parametrize(
    "rows", [ROWS[:1], ROWS + ROWS[:1], list(reversed(ROWS))], ids=["lost", "duplicated", "reordered"]
)
def test_rows_lost_duplicated_or_reordered_are_caught(rows: Any) -> None:
    assert "results_mismatch" in final(stored(rows=rows))


def test_a_result_under_another_token_than_the_commit_is_caught() -> None:
    state = stored()
    state.results[S1]["fencing_token"] = 7
    assert "results_mismatch" in final(state)


def test_stored_tokens_must_increase_and_latest_must_name_the_newest() -> None:
    assert "tokens_increase" in final(stored(s1_token=3, s2_token=2))
    state = stored()
    state.latest = {"latest_slot": S1, "fencing_token": 1}
    assert final(state) == ["results_mismatch"]


def test_a_result_for_a_slot_that_did_not_succeed_is_caught() -> None:
    state = stored()
    state.results[S3] = {"fencing_token": 9, "rows": ROWS, "row_count": 2}
    state.latest = {"latest_slot": S3, "fencing_token": 9}
    assert "results_mismatch" in final(state)


def test_percentile_nearest_rank() -> None:
    assert percentile([], 50) is None
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0
    assert percentile([float(i) for i in range(1, 101)], 95) == 95.0


# --- the plan ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("slots", [12, 40, 200])
def test_every_plan_covers_each_kill_point_each_resume_policy_and_stale_commits(slots: int) -> None:
    plans, ancient = make_plan(ChaosOptions(slots=slots, seed=slots))
    faults = [p.fault for p in plans if p.fault]
    assert {f["checkpoint"] for f in faults if f["action"] == "kill"} == set(KILL_POINTS)
    assert {f["policy"] for f in faults if f["action"] == "pause"} == set(RESUME_POLICIES)
    stale = [
        p.fault
        for p in plans
        if p.fault
        and p.storm is None
        and p.fault["action"] == "pause"
        and p.fault["checkpoint"] in STALE_COMMIT_POINTS
        and p.fault["policy"] != "next_slot"
    ]
    assert len(stale) >= MIN_STALE_COMMIT_SCENARIOS
    assert len({p.iso for p in plans}) == slots and len(set(ancient)) == len(ancient)


def test_a_very_short_plan_still_has_the_stale_commit_scenarios_first() -> None:
    plans, _ = make_plan(ChaosOptions(slots=3, seed=1, fault_fraction=0.0))
    assert plans[0].fault is None  # the first slot has no predecessor
    assert [p.fault["action"] for p in plans[1:] if p.fault] == ["pause", "pause"]


def test_the_plan_is_reproducible_from_its_seed() -> None:
    first, _ = make_plan(ChaosOptions(slots=50, seed=3))
    second, _ = make_plan(ChaosOptions(slots=50, seed=3))

    def drawn(plans: list[Any]) -> list[Any]:
        return [(p.fault, p.duplicates, p.storm, p.late, p.forced, p.pause, p.rerun, p.rerun_after) for p in plans]

    assert drawn(first) == drawn(second)


# --- terminal records --------------------------------------------------------------------------------
def deliver(t_ms: int, rid: str, slot: str, kind: str = "race") -> dict[str, Any]:
    return {"what": "deliver", "t_ns": t_ms * MS, "request_id": rid, "slot": slot, "kind": kind}


def superseded(t_ms: int, rid: str, older: str, by: str, recorded: bool = True) -> dict[str, Any]:
    return {
        "what": "superseded",
        "t_ns": t_ms * MS,
        "request_id": rid,
        "slot": older,
        "by_slot": by,
        "recorded": recorded,
    }


def terminal(history: list[dict[str, Any]], state: FinalState, dlq: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    return check_terminal_records(history, state, dead_lettered=dlq)


def three_slots() -> tuple[list[dict[str, Any]], FinalState]:
    """S1 committed by a, S2 recorded MISSED (superseded) by c's acquisition of S3, S3 committed by c."""
    history = [deliver(0, "a", S1), deliver(0, "x", S1)] + clean_run("a", S1, 1, 0)
    history += [result(5, "x", S1, "lost", None, "held"), deliver(100, "b", S2), cp(100, "b", S2, "acquired", 2)]
    history += [deliver(200, "c", S3), superseded(201, "c", S2, S3), *clean_run("c", S3, 3, 201)]
    state = FinalState(
        slot_items={
            S1: {"status": "SUCCEEDED", "fencing_token": 1},
            S2: {"status": "MISSED", "reason": "superseded"},
            S3: {"status": "SUCCEEDED", "fencing_token": 3},
        },
    )
    return history, state


def test_one_terminal_record_per_delivered_slot_is_clean() -> None:
    history, state = three_slots()
    assert terminal(history, state) == []
    assert [w.writer for w in terminal_writes(history)] == [("a", 1), ("c", "missed"), ("c", 3)]


def test_a_delivered_slot_without_a_terminal_record_is_caught_unless_dead_lettered() -> None:
    history, state = three_slots()
    state.slot_items[S2] = {"status": "RUNNING", "fencing_token": 2}
    history = [e for e in history if e["what"] != "superseded"]
    [violation] = terminal(history, state)
    assert violation["check"] == "terminal_records" and violation["slot"] == S2 and "RUNNING" in violation["detail"]
    assert terminal(history, state, dlq=(S2,)) == []


def test_racers_that_all_lost_undecided_leave_the_slot_without_a_record_and_that_is_caught() -> None:
    history = [
        deliver(0, "a", S1),
        deliver(0, "b", S1),
        result(5, "a", S1, "lost", None, "conflict"),
        result(6, "b", S1, "lost", None, "unavailable"),
    ]
    [violation] = terminal(history, FinalState())
    assert "absent" in violation["detail"] and "lost:conflict x1" in violation["detail"]


def test_a_terminal_record_overwritten_by_a_second_writer_is_caught() -> None:
    history, state = three_slots()
    history.append(result(300, "y", S2, "missed", None, "overrun"))  # a second MISSED write accepted
    [violation] = terminal(history, state)
    assert violation["slot"] == S2 and "2 terminal writes" in violation["detail"]
    history, state = three_slots()
    history += clean_run("d", S2, 4, 400)  # a commit over the MISSED record
    assert [v["slot"] for v in terminal(history, state)] == [S2]


def test_the_stored_record_must_be_the_one_reported() -> None:
    history, state = three_slots()
    state.slot_items[S2] = {"status": "SUCCEEDED", "fencing_token": 2}  # the MISSED record is gone
    assert [v["detail"].startswith("the stored record") for v in terminal(history, state)] == [True]
    history, state = three_slots()
    state.slot_items[S1]["fencing_token"] = 9
    assert "token 9, committed 1" in terminal(history, state)[0]["detail"]
    history, state = three_slots()
    state.slot_items[S2]["reason"] = "overrun"
    assert "reason 'overrun'" in terminal(history, state)[0]["detail"]


def test_a_committed_item_never_carries_a_miss_reason() -> None:
    history, state = three_slots()
    state.slot_items[S1]["reason"] = "superseded"
    [violation] = terminal(history, state)
    assert violation["slot"] == S1 and "miss reason" in violation["detail"]


def test_a_holder_killed_after_its_commit_matches_either_commit_status() -> None:
    history, state = three_slots()
    history = [e for e in history if not (e["what"] == "result" and e["request_id"] == "a")]  # no result line
    assert terminal(history, state) == []
    state.slot_items[S1] = {"status": "FAILED", "fencing_token": 1}
    assert terminal(history, state) == []
    state.slot_items[S1] = {"status": "MISSED", "reason": "superseded"}
    assert len(terminal(history, state)) == 1


def test_a_commit_refused_for_good_must_end_failed_with_the_write_rejected_error() -> None:
    history = [
        deliver(0, "a", S1),
        cp(0, "a", S1, "acquired", 1),
        cp(10, "a", S1, "before_commit", 1),
        cp(20, "a", S1, "before_commit", 1),
        cp(30, "a", S1, "committed", 1),
        {**result(31, "a", S1, "failed", 1, "write_rejected"), "error_type": "WriteRejectedError"},
    ]
    rejected = {"status": "FAILED", "fencing_token": 1, "error": {"type": "WriteRejectedError"}}
    state = FinalState(slot_items={S1: rejected})
    assert terminal(history, state) == []
    state.slot_items[S1]["error"] = {"type": "QueryFailedError"}
    assert "write_rejected" in terminal(history, state)[0]["detail"]
    state.slot_items[S1] = {"status": "SUCCEEDED", "fencing_token": 1}
    assert "status SUCCEEDED, reported FAILED" in terminal(history, state)[0]["detail"]


def test_a_racer_reporting_the_slot_corrupt_is_caught() -> None:
    history, state = three_slots()
    history.append(result(500, "z", S3, "corrupt", None, "corrupt_item"))
    assert [v["slot"] for v in terminal(history, state)] == [S3]


# --- the MISSED records logged ---------------------------------------------------------------------
def logged(missed_reason: str, message: str = "slot 2026-11-22T00:30:00Z: missed", **fields: Any) -> str:
    """A runtime JSON log line recording a slot MISSED for ``missed_reason``."""
    record = {"level": "WARNING", "message": message, "job": "j", "missed_slot": "2026-11-22T00:30:00Z"}
    return json.dumps({**record, "missed_reason": missed_reason, **fields})


def test_missed_records_are_read_from_the_log_lines_that_carry_missed_reason_and_nothing_else() -> None:
    lines = [
        logged("superseded", message="slot 2026-11-22T00:00:00Z missed: superseded by 2026-11-22T00:30:00Z"),
        logged("too_old", outcome="missed", reason="too_old"),
        logged("superseded", outcome="missed", reason="superseded"),
        json.dumps({"level": "INFO", "message": "slot x: lost", "outcome": "lost", "reason": "superseded"}),
        json.dumps({"_aws": {"CloudWatchMetrics": []}, "missed_reason": "superseded"}),  # an EMF blob is no log line
        "Traceback (most recent call last): missed_reason",
        '{not json "missed_reason"',
    ]
    assert logged_missed_slots(lines) == {"superseded": 2, "too_old": 1}


def test_missed_records_logged_must_equal_the_missed_items_reason_by_reason() -> None:
    _, state = three_slots()  # one MISSED superseded
    assert check_slot_missed_logged({"superseded": 1}, state) == []
    missing = check_slot_missed_logged({}, state)
    assert [v["check"] for v in missing] == ["slot_missed_logged"]
    assert "0 MISSED record(s) logged, 1 slot item(s) MISSED" in missing[0]["detail"]
    assert len(check_slot_missed_logged({"superseded": 2}, state)) == 1  # counted twice
    assert len(check_slot_missed_logged({"superseded": 1, "too_old": 1}, state)) == 1  # a record that is not stored


# --- near-future deliveries --------------------------------------------------------------------------
FUTURE = "2026-11-22T02:07:00Z"


def refused(t_ms: int, rid: str, attempt: int = 1) -> list[dict[str, Any]]:
    return [
        deliver(t_ms, rid, FUTURE, "future"),
        {
            "what": "dynamodb_requests",
            "t_ns": (t_ms + 1) * MS,
            "request_id": rid,
            "slot": FUTURE,
            "kind": "future",
            "count": 0,
        },
        {
            "what": "error",
            "t_ns": (t_ms + 2) * MS,
            "request_id": rid,
            "slot": FUTURE,
            "kind": "future",
            "attempt": attempt,
            "error_type": "InvalidEventError",
        },
    ]


def test_a_refused_future_delivery_retried_by_lambda_is_clean() -> None:
    history = (
        refused(0, "f")
        + refused(10, "f", 2)
        + refused(20, "f", 3)
        + [{"what": "dlq", "t_ns": 21 * MS, "slot": FUTURE, "kind": "future"}]
    )
    assert check_future_refused(history, FinalState(), future_slots=[FUTURE]) == []
    assert delivered_slots(history) == []  # not a delivered slot for terminal_records


@pytest.mark.parametrize("breach", ["acquired", "requests", "error", "item", "result", "retries", "superseded"])
def test_a_future_slot_that_was_acted_on_is_caught(breach: str) -> None:
    history, state = refused(0, "f"), FinalState()
    if breach == "acquired":
        history.append(cp(5, "f", FUTURE, "acquired", 7))
    elif breach == "requests":
        history[1]["count"] = 1
    elif breach == "error":
        history[2]["error_type"] = "TransientLockError"
    elif breach == "item":
        state.slot_items[FUTURE] = {"status": "MISSED", "reason": "superseded"}
    elif breach == "result":
        state.results[FUTURE] = {"fencing_token": 7, "rows": []}
    elif breach == "retries":
        history += refused(10, "f", 2) + refused(20, "f", 3) + refused(30, "f", 4)
    elif breach == "superseded":
        history.append(superseded(5, "f", S1, FUTURE))
    assert {v["check"] for v in check_future_refused(history, state, future_slots=[FUTURE])} == {"future_slot_refused"}


# --- the plan's new faults ---------------------------------------------------------------------------
@pytest.mark.parametrize(("slots", "seed"), [(12, 12), (30, 2), (30, 20261122), (200, 200)])
def test_every_plan_forces_each_aimed_write_fault_and_has_a_future_and_an_ancient_delivery(
    slots: int, seed: int
) -> None:
    plans, ancient = make_plan(ChaosOptions(slots=slots, seed=seed))
    forced = [(f["write"], f["kind"]) for p in plans for f in p.forced]
    assert {(w, k) for w, k, _ in FORCED_WRITE_FAULTS} <= set(forced)
    for plan in plans:  # FORCED_WRITE_FAULTS go to slots without a checkpoint fault or a storm
        if any((f["write"], f["kind"]) in {(w, k) for w, k, _ in FORCED_WRITE_FAULTS} for f in plan.forced):
            assert plan.fault is None and plan.storm is None
    # the MISSED record's lost answer rides with each ancient delivery (the harness) and the slot after a holder
    # stopped until the next slot; a release's conflict with an Athena storm (its holder releases the lease)
    assert any(
        p.storm and p.storm["target"] == "athena" and p.fault is None and FORCED_RELEASE_CONFLICT in p.forced
        for p in plans
    )
    for previous, plan in itertools.pairwise(plans):
        if previous.fault and previous.fault.get("policy") == "next_slot":
            assert FORCED_MISSED_RESEND in plan.forced
    assert any(p.future_lead_s for p in plans) and all(30 <= (p.future_lead_s or 30) <= 540 for p in plans)
    assert ancient and all(any(p.late == a for p in plans) for a in ancient)


def test_the_new_faults_leave_the_rest_of_a_seeded_plan_as_it_was() -> None:
    with_writes, _ = make_plan(ChaosOptions(slots=50, seed=3))
    without, _ = make_plan(ChaosOptions(slots=50, seed=3, write_fault_scale=0, future_fraction=0))
    assert [(p.fault, p.duplicates) for p in with_writes] == [(p.fault, p.duplicates) for p in without]
    for new, old in zip(with_writes, without):  # at most added: an ancient delivery, an Athena storm
        assert new.late == old.late or old.late is None
        assert new.storm == old.storm or (old.storm is None and new.storm["target"] == "athena")
    assert not any(p.forced or p.future_lead_s for p in without)


# --- the operator's actions: pause and resume -----------------------------------------------------------
S4 = "2026-11-22T01:30:00Z"


def op(t_ms: int, action: str, slot: str, **fields: Any) -> dict[str, Any]:
    return {"what": "operator", "t_ns": t_ms * MS, "action": action, "slot": slot, **fields}


def requests(t_ms: int, rid: str, slot: str, acquires: int = 1) -> dict[str, Any]:
    return {
        "what": "dynamodb_requests",
        "t_ns": t_ms * MS,
        "request_id": rid,
        "slot": slot,
        "count": acquires + 1,
        "writes": {"acquire": acquires},
    }


def of(history: list[dict[str, Any]], rid: str, what: str = "result") -> dict[str, Any]:
    return next(e for e in history if e["what"] == what and e.get("request_id") == rid)


def paused_run() -> tuple[list[dict[str, Any]], FinalState]:
    """S1 committed; the operator pauses before S2 (three racers lose as paused, p1 records it MISSED) and
    resumes through a minute after S2; S3 commits; a late delivery of S2 after the resume loses superseded."""
    history = [deliver(0, "a", S1), *clean_run("a", S1, 1, 0), op(90, "pause", S2)]
    for n, rid in enumerate(("p1", "p2", "p3")):
        history += [deliver(100, rid, S2), requests(101 + n, rid, S2)]
    history += [
        result(110, "p1", S2, "missed", None, "paused"),
        result(111, "p2", S2, "lost", None, "paused"),
        result(112, "p3", S2, "lost", None, "paused"),
        op(150, "resume", S2, through="2026-11-22T00:31:00Z"),
        deliver(200, "c", S3),
        deliver(200, "l", S2, "late"),
        *clean_run("c", S3, 2, 200),
        result(205, "l", S2, "lost", None, "superseded"),
    ]
    state = FinalState(
        slot_items={
            S1: {"status": "SUCCEEDED", "fencing_token": 1},
            S2: {"status": "MISSED", "reason": "paused"},
            S3: {"status": "SUCCEEDED", "fencing_token": 2},
        }
    )
    return history, state


def test_a_paused_slot_whose_racers_all_lost_with_one_missed_record_is_clean() -> None:
    history, state = paused_run()
    assert check_paused_slots(history, state, queries_started={S2: 0}) == []
    # the live checks still hold on it (the operator's events are not racers')
    assert check_history(history) == [] and check_terminal_records(history, state) == []


@pytest.mark.parametrize(
    "breach",
    [
        "acquired",
        "query",
        "engine_query",
        "won",
        "two_writers",
        "no_writer",
        "stored",
        "requests",
        "after_resume",
        "unpaused",
    ],
)
def test_a_paused_slot_that_ran_or_was_not_recorded_once_is_caught(breach: str) -> None:
    history, state = paused_run()
    queries = {S2: 0}
    if breach == "acquired":
        history.append(cp(105, "p2", S2, "acquired", 2))
    elif breach == "query":
        of(history, "p2")["queries_started"] = 1
    elif breach == "engine_query":
        queries[S2] = 1
    elif breach == "won":
        of(history, "p2").update(status="lost", reason="held")
    elif breach == "two_writers":
        of(history, "p3").update(status="missed")  # p3 wrote a second MISSED record
    elif breach == "no_writer":
        of(history, "p1").update(status="lost")
    elif breach == "stored":
        state.slot_items[S2]["reason"] = "superseded"
    elif breach == "requests":
        history.append(requests(113, "p3", S2, acquires=1))  # a second acquisition request, no fault injected
    elif breach == "after_resume":
        history.append(result(210, "z", S4, "lost", None, "paused"))
    elif breach == "unpaused":
        state.slot_items[S4] = {"status": "MISSED", "reason": "paused"}
    violations = check_paused_slots(history, state, queries_started=queries)
    assert violations and {v["check"] for v in violations} == {"paused_slot"}, violations


def test_a_second_pause_after_a_resume_is_clean_and_a_refusal_outside_any_pause_is_caught() -> None:
    history, state = paused_run()
    history += [op(300, "pause", S4), deliver(310, "q1", S4), requests(311, "q1", S4)]
    history += [result(320, "q1", S4, "missed", None, "paused"), op(350, "resume", S4, through="2026-11-22T01:31:00Z")]
    state.slot_items[S4] = {"status": "MISSED", "reason": "paused"}
    assert check_paused_slots(history, state) == []
    history.append(result(40, "early", S1, "lost", None, "paused"))  # before any pause
    [violation] = check_paused_slots(history, state)
    assert violation["slot"] == S1 and "not paused" in violation["detail"]


def test_an_acquisition_resent_after_an_injected_fault_is_still_one_request() -> None:
    history, state = paused_run()
    history += [
        requests(113, "p3", S2, acquires=1),
        {
            "what": "injected",
            "t_ns": 101 * MS,
            "request_id": "p3",
            "operation": "UpdateItem",
            "kind": "connection_error",
        },
    ]
    assert check_paused_slots(history, state) == []


# --- the operator's actions: a forced release of a live holder ---------------------------------------------
def released_run() -> tuple[list[dict[str, Any]], FinalState]:
    """a holds S1 (token 1), stops before its commit; the operator releases it (token 1 fenced out, counter 2);
    b takes over (token 3), adopts a's query and commits; a resumes and its commit is rejected as stale."""
    history = [
        deliver(0, "a", S1),
        cp(0, "a", S1, "acquired", 1),
        cp(5, "a", S1, "query_started", 1),
        cp(10, "a", S1, "before_commit", 1),
        op(20, "release", S1, request_id="a", token=1, checkpoint="before_commit", lease_live=True),
        deliver(1000, "b", S1, "redelivery"),
        cp(1001, "b", S1, "acquired", 3),
        cp(1010, "b", S1, "before_commit", 3),
        cp(1020, "b", S1, "committed", 3),
        {**result(1021, "b", S1, "succeeded", 3), "takeover": True, "queries_started": 0},
        {"what": "resumed", "t_ns": 1100 * MS, "request_id": "a", "slot": S1},
        result(1110, "a", S1, "stale_rejected", 1),
    ]
    return history, FinalState(slot_items={S1: {"status": "SUCCEEDED", "fencing_token": 3}})


def test_a_released_holder_rejected_and_a_takeover_that_adopted_its_query_is_clean() -> None:
    history, state = released_run()
    assert check_force_release(history, state) == []
    assert check_history(history) == []


@pytest.mark.parametrize("breach", ["accepted", "unfinished", "own_token", "query_again", "no_takeover"])
def test_a_released_holder_that_committed_or_a_slot_not_taken_over_is_caught(breach: str) -> None:
    history, state = released_run()
    if breach == "accepted":  # fencing failed: a's stale commit went through after the release
        history[-1] = cp(1105, "a", S1, "committed", 1)
    elif breach == "unfinished":
        state.slot_items[S1] = {"status": "RUNNING", "fencing_token": 3}
    elif breach == "own_token":
        state.slot_items[S1]["fencing_token"] = 1
    elif breach == "query_again":
        of(history, "b")["queries_started"] = 1
    elif breach == "no_takeover":
        of(history, "b")["takeover"] = False
    violations = check_force_release(history, state)
    assert violations and {v["check"] for v in violations} == {"force_release"}, violations


# --- manual generations ---------------------------------------------------------------------------------
def rerun(t_ms: int, rid: str, slot: str, generation: int, **fields: Any) -> dict[str, Any]:
    return op(t_ms, "rerun", slot, generation=generation, request_id=rid, **fields)


def generations_run() -> tuple[list[dict[str, Any]], FinalState]:
    """The live S1 (token 5) and S2 (token 6) commit; S1 is re-run as generation 2 (m1, manual token 1) beside S2's
    racers, and S2 as generation 2 (m2, manual token 2) after it, which fails for good (no result)."""
    history = [deliver(0, "a", S1), *clean_run("a", S1, 5, 0)]
    history += [deliver(100, "b", S2), rerun(100, "m1", S1, 2, beside=S2, live_status="SUCCEEDED", live_token=5)]
    history += [deliver(101, "m1", S1, "manual"), *clean_run("m1", S1, 1, 101), *clean_run("b", S2, 6, 102)]
    history += [result(103, "x", S2, "lost", None, "held")]
    history += [rerun(200, "m2", S2, 2, beside=None, live_status="SUCCEEDED", live_token=6), deliver(201, "m2", S2)]
    history += [
        cp(201, "m2", S2, "acquired", 2),
        cp(210, "m2", S2, "before_commit", 2),
        cp(220, "m2", S2, "committed", 2),
        {**result(221, "m2", S2, "failed", 2, "write_rejected"), "error_type": "WriteRejectedError"},
    ]
    state = FinalState(
        slot_items={S1: {"status": "SUCCEEDED", "fencing_token": 5}, S2: {"status": "SUCCEEDED", "fencing_token": 6}},
        results={
            S1: {"fencing_token": 5, "rows": ROWS, "row_count": 2},
            S2: {"fencing_token": 6, "rows": ROWS, "row_count": 2},
        },
        latest={"latest_slot": S2, "latest_generation": 1, "fencing_token": 6},
        generation_items={
            (S1, 2): {"status": "SUCCEEDED", "fencing_token": 1},
            (S2, 2): {"status": "FAILED", "fencing_token": 2, "error": {"type": "WriteRejectedError"}},
        },
        generation_results={(S1, 2): {"fencing_token": 1, "rows": ROWS, "row_count": 2}},
    )
    return history, state


def test_manual_generations_committed_once_each_beside_the_live_schedule_are_clean() -> None:
    history, state = generations_run()
    assert manual_requests(history) == {"m1": (S1, 2), "m2": (S2, 2)}
    assert check_generations(history, state, expected_rows={S1: ROWS, S2: ROWS}) == []
    assert check_manual_isolation(history, state) == []
    # generation 1 keeps every existing check: the manual commits (low tokens of their own counter, a second
    # commit of S1 and S2) are not the live schedule's
    assert {e.get("request_id") for e in live_history(history)} >= {"a", "b", "x"}
    assert not {"m1", "m2"} & {e.get("request_id") for e in live_history(history)}
    assert check_history(history) == []
    assert check_terminal_records(history, state) == []
    assert final(state, planned=(S1, S2)) == []


def test_without_the_generation_filter_the_manual_commits_would_break_the_live_rules() -> None:
    history, _ = generations_run()
    unlabelled = [e for e in history if e["what"] != "operator"]
    assert {"one_commit_per_slot", "stale_write_accepted"} <= set(checks(check_history(unlabelled)))


@pytest.mark.parametrize(
    "breach",
    ["no_commit", "two_commits", "stale", "item", "token", "no_result", "rows", "failed_result", "unrequested"],
)
def test_a_manual_generation_that_did_not_end_exactly_once_on_its_own_is_caught(breach: str) -> None:
    history, state = generations_run()
    if breach == "no_commit":  # m1 lost the manual lease and nobody ran generation 2 again
        history = [e for e in history if e.get("request_id") != "m1" or e["what"] in ("operator", "deliver")]
        history.append(result(110, "m1", S1, "lost", None, "busy"))
    elif breach == "two_commits":
        history += [rerun(300, "m3", S1, 2), *clean_run("m3", S1, 3, 300)]
    elif breach == "stale":  # m2's token 2 was acquired before m1 (token 1) sent its commit
        history.append(cp(104, "m9", S2, "acquired", 9))
        history.append(rerun(103, "m9", S2, 2))
        history = sorted(history, key=lambda e: e["t_ns"])
    elif breach == "item":
        state.generation_items[(S1, 2)]["status"] = "RUNNING"
    elif breach == "token":
        state.generation_items[(S1, 2)]["fencing_token"] = 7
    elif breach == "no_result":
        del state.generation_results[(S1, 2)]
    elif breach == "rows":
        state.generation_results[(S1, 2)]["rows"] = ROWS[:1]
    elif breach == "failed_result":
        state.generation_results[(S2, 2)] = {"fencing_token": 2, "rows": ROWS, "row_count": 2}
    elif breach == "unrequested":
        state.generation_items[(S3, 2)] = {"status": "SUCCEEDED", "fencing_token": 4}
    violations = check_generations(history, state, expected_rows={S1: ROWS, S2: ROWS})
    assert violations and {v["check"] for v in violations} == {"generation_commits"}, violations


def test_latest_must_end_at_the_newest_slot_and_generation() -> None:
    _, state = generations_run()
    state.generation_results[(S2, 3)] = {"fencing_token": 3, "rows": ROWS, "row_count": 2}
    assert final(state, planned=(S1, S2)) == ["results_mismatch"]  # LATEST still names (S2, 1)
    state.latest = {"latest_slot": S2, "latest_generation": 3, "fencing_token": 3}
    assert final(state, planned=(S1, S2)) == []
    state.latest = {"latest_slot": S1, "latest_generation": 2, "fencing_token": 1}  # an older slot's re-run
    assert final(state, planned=(S1, S2)) == ["results_mismatch"]


@pytest.mark.parametrize("breach", ["busy", "manual_missed", "manual_superseded", "beside_missed", "live_changed"])
def test_a_manual_run_that_disturbed_the_live_schedule_is_caught(breach: str) -> None:
    history, state = generations_run()
    if breach == "busy":
        history.append(result(104, "y", S2, "lost", None, "busy"))
    elif breach == "manual_missed":
        history.append(result(230, "m2", S3, "missed", None, "superseded"))
    elif breach == "manual_superseded":
        history.append(superseded(230, "m1", S1, S3))
    elif breach == "beside_missed":
        state.slot_items[S2] = {"status": "MISSED", "reason": "superseded"}
    elif breach == "live_changed":
        state.slot_items[S1]["fencing_token"] = 8
    violations = check_manual_isolation(history, state)
    assert violations and {v["check"] for v in violations} == {"manual_isolated"}, violations


# --- the plan's operator actions -------------------------------------------------------------------------
@pytest.mark.parametrize(("slots", "seed"), [(12, 12), (12, 20261122), (30, 2), (30, 20261122), (200, 200)])
def test_every_plan_has_a_pause_a_forced_release_and_reruns_where_they_can_run(slots: int, seed: int) -> None:
    plans, _ = make_plan(ChaosOptions(slots=slots, seed=seed))
    isos = [p.iso for p in plans]

    def deferred(i: int) -> bool:
        return i >= 0 and bool(plans[i].fault and plans[i].fault.get("policy") == RESUME_AFTER_NEXT_SLOT)

    released = [p for p in plans if p.fault and p.fault.get("operator") == OPERATOR_RELEASE]
    assert any(p.fault["checkpoint"] == "before_commit" for p in released)
    for p in released:  # a plain slot otherwise: no storm, no forced write fault, no deferred predecessor
        assert p.storm is None and not p.forced and not p.pause and not deferred(p.index - 1)
        assert p.fault["policy"] != RESUME_AFTER_NEXT_SLOT
    paused = [p for p in plans if p.pause]
    assert paused
    for p in paused:  # nothing that would need the slot to run; re-run once resumed
        assert p.fault is None and p.storm is None and not p.forced and p.rerun is None
        assert not deferred(p.index - 1) and p.rerun_after
    first = paused[0]
    assert any(p.rerun == first.iso for p in plans[first.index + 1 :])  # re-run again beside a later slot: g3
    for p in plans:
        if p.rerun:  # an earlier, finished slot, within the window, beside a slot that runs
            target = isos.index(p.rerun)
            assert p.index - RERUN_WINDOW <= target < p.index and not deferred(target)
            assert not p.pause and not deferred(p.index)
    newest = next(p for p in reversed(plans) if not deferred(p.index))
    assert newest.rerun_after


def test_the_operator_actions_leave_the_rest_of_a_seeded_plan_as_it_was() -> None:
    with_ops, _ = make_plan(ChaosOptions(slots=50, seed=3))
    without, _ = make_plan(ChaosOptions(slots=50, seed=3, operator_fraction=0))
    assert not any(p.pause or p.rerun or p.rerun_after for p in without)
    assert not any(p.fault and p.fault.get("operator") for p in without)
    for new, old in zip(with_ops, without):  # a forced release only replaces "no fault"
        if new.fault and new.fault.get("operator") == OPERATOR_RELEASE:
            assert old.fault is None
        else:
            assert new.fault == old.fault
        assert new.duplicates == old.duplicates
