"""The chaos history checker on hand-made histories: each check passes a clean history and catches its violation;
and the seeded plan's coverage."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest

from local.chaos.checker import (
    FinalState,
    accepted_commits,
    check_final_state,
    check_future_refused,
    check_history,
    check_slot_missed_metric,
    check_terminal_records,
    delivered_slots,
    emf_metric_values,
    percentile,
    terminal_writes,
)
from local.chaos.plan import (
    FORCED_MISSED_RESEND,
    FORCED_RELEASE_CONFLICT,
    FORCED_WRITE_FAULTS,
    KILL_POINTS,
    MIN_STALE_COMMIT_SCENARIOS,
    RESUME_POLICIES,
    STALE_COMMIT_POINTS,
    ChaosOptions,
    make_plan,
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
    assert [(p.fault, p.duplicates, p.storm) for p in first] == [(p.fault, p.duplicates, p.storm) for p in second]


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


# --- the SlotMissed metric ---------------------------------------------------------------------------
def emf(reason: str, values: Any = (1.0,), name: str = "SlotMissed", namespace: str = "ScheduledAthenaRefresh") -> str:
    return json.dumps(
        {
            "_aws": {
                "Timestamp": 1,
                "CloudWatchMetrics": [
                    {
                        "Namespace": namespace,
                        "Dimensions": [["service", "job", "reason"]],
                        "Metrics": [{"Name": name, "Unit": "Count"}],
                    }
                ],
            },
            "service": "athena-refresh",
            "job": "j",
            "reason": reason,
            name: list(values) if isinstance(values, tuple) else values,
        }
    )


def test_slot_missed_values_are_read_from_emf_lines_and_nothing_else() -> None:
    lines = [
        emf("superseded"),
        emf("too_old", 1.0),
        emf("superseded", (1.0, 1.0)),
        emf("held", name="LostRace"),
        emf("superseded", namespace="ScheduledAthenaRefresh/Values"),
        "Traceback (most recent call last):",
        json.dumps({"level": "INFO", "message": "SlotMissed superseded"}),
        '{not json SlotMissed "_aws"',
    ]
    assert emf_metric_values(lines) == {"superseded": 3, "too_old": 1}


def test_slot_missed_values_must_equal_the_missed_items_reason_by_reason() -> None:
    _, state = three_slots()  # one MISSED superseded
    assert check_slot_missed_metric({"superseded": 1}, state) == []
    missing = check_slot_missed_metric({}, state)
    assert [v["check"] for v in missing] == ["slot_missed_metric"]
    assert "0 SlotMissed value(s) emitted, 1 slot item(s) MISSED" in missing[0]["detail"]
    assert len(check_slot_missed_metric({"superseded": 2}, state)) == 1  # counted twice
    assert len(check_slot_missed_metric({"superseded": 1, "too_old": 1}, state)) == 1  # a record that is not stored


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
