"""The chaos history checker on hand-made histories: each check passes a clean history and catches its violation."""

from __future__ import annotations

from typing import Any

import pytest

from local.chaos import KILL_POINTS, MIN_STALE_COMMIT_SCENARIOS, RESUME_POLICIES, STALE_COMMIT_POINTS, ChaosOptions, make_plan
from local.chaos_checker import FinalState, accepted_commits, check_final_state, check_history, percentile

S1, S2, S3 = "2026-11-22T00:00:00Z", "2026-11-22T00:30:00Z", "2026-11-22T01:00:00Z"
MS = 1_000_000


def cp(t_ms: int, rid: str, slot: str, checkpoint: str, token: int) -> dict[str, Any]:
    return {"what": "checkpoint", "t_ns": t_ms * MS, "request_id": rid, "slot": slot, "checkpoint": checkpoint,
            "token": token}


def result(t_ms: int, rid: str, slot: str, status: str, token: int | None, reason: str | None = None) -> dict[str, Any]:
    return {"what": "result", "t_ns": t_ms * MS, "request_id": rid, "slot": slot, "status": status, "token": token,
            "reason": reason}


def clean_run(rid: str, slot: str, token: int, t0: int) -> list[dict[str, Any]]:
    return [cp(t0, rid, slot, "acquired", token), cp(t0 + 10, rid, slot, "before_commit", token),
            cp(t0 + 20, rid, slot, "committed", token), result(t0 + 21, rid, slot, "succeeded", token)]


def checks(violations: list[dict[str, Any]]) -> list[str]:
    return sorted(v["check"] for v in violations)


def test_a_clean_history_has_no_violation() -> None:
    history = clean_run("a", S1, 1, 0) + clean_run("b", S2, 2, 100) + clean_run("c", S3, 3, 200)
    history += [result(5, "x", S1, "lost", None, "held"), result(150, "y", S1, "lost", None, "superseded")]
    assert check_history(history) == []


def test_a_stale_holder_rejected_after_a_takeover_is_clean() -> None:
    # a acquires 1 and stops before its commit; b takes over with 2 and commits; a resumes: stale_rejected
    history = [cp(0, "a", S1, "acquired", 1), cp(10, "a", S1, "before_commit", 1), cp(3000, "b", S1, "acquired", 2),
               cp(3010, "b", S1, "before_commit", 2), cp(3020, "b", S1, "committed", 2),
               {"what": "resumed", "t_ns": 3100 * MS, "request_id": "a", "slot": S1},
               result(3110, "a", S1, "stale_rejected", 1)]
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
    history = [cp(0, "a", S1, "acquired", 1), cp(10, "a", S1, "before_commit", 1), cp(3000, "b", S1, "acquired", 2),
               {"what": "resumed", "t_ns": 3100 * MS, "request_id": "a", "slot": S1},
               cp(3110, "a", S1, "committed", 1), result(3111, "a", S1, "succeeded", 1)]
    violations = check_history(history)
    assert checks(violations) == ["stale_write_accepted"]
    assert "token 2" in violations[0]["detail"]


def test_the_send_time_without_a_resume_is_the_before_commit_checkpoint() -> None:
    # b's acquisition comes after a's commit was sent (a slow reply, not a stale write): no violation
    history = [cp(0, "a", S1, "acquired", 1), cp(10, "a", S1, "before_commit", 1), cp(20, "b", S2, "acquired", 2),
               cp(30, "a", S1, "committed", 1), cp(40, "b", S2, "before_commit", 2), cp(50, "b", S2, "committed", 2)]
    assert check_history(history) == []


def test_an_older_slot_may_not_commit_after_a_newer_one() -> None:
    history = clean_run("b", S2, 2, 0) + [cp(100, "a", S1, "acquired", 3), cp(110, "a", S1, "before_commit", 3),
                                           cp(120, "a", S1, "committed", 3)]
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
        slot_items={S1: {"status": "SUCCEEDED", "fencing_token": s1_token},
                    S2: {"status": "SUCCEEDED", "fencing_token": s2_token},
                    S3: {"status": "MISSED", "reason": "superseded"}},
        results={S1: {"fencing_token": s1_token, "rows": rows, "row_count": len(rows)},
                 S2: {"fencing_token": s2_token, "rows": ROWS, "row_count": 2}},
        latest={"latest_slot": S2, "fencing_token": s2_token},
    )


def final(state: FinalState, *, planned: tuple[str, ...] = (S1, S2, S3), dlq: tuple[str, ...] = ()) -> list[str]:
    return checks(check_final_state(state, planned_slots=planned, dead_lettered=dlq,
                                    expected_rows={S1: ROWS, S2: ROWS}))


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


@pytest.mark.parametrize("rows", [ROWS[:1], ROWS + ROWS[:1], list(reversed(ROWS))], ids=["lost", "duplicated", "reordered"])
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
    stale = [f for f in faults if f["action"] == "pause" and f["checkpoint"] in STALE_COMMIT_POINTS
             and f["policy"] != "next_slot"]
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
