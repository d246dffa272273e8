"""The Athena capacity budget's settings (issue 24): cdk.json ``context.stack.capacity`` validated at synth, each key
named with its range, and the budget's numbers as the job catalog carries them (one model with the runtime's,
``athena_refresh.budget.CapacityBudget``). The synthesized stacks' side: tests/stacks/test_capacity.py.
"""

from __future__ import annotations

import io
import json
import math
from pathlib import Path
from typing import Any

import pytest

import app
from athena_refresh import contract
from athena_refresh.budget import CapacityBudget
from athena_refresh.checks import ConfigError
from slotlock import table as lock_table
from stacks import REPO_ROOT
from stacks.stack_settings import MAX_SHARED_WORKGROUPS, STACK_KEY, CapacitySettings, StackSettings, load_context

#: The capacity keys the runtime reads too, with their variable (bounds: contract.NUMERIC_BOUNDS).
CAPACITY_NUMBERS = {
    "permits": contract.ENV_CAPACITY_PERMITS,
    "wait_in_place_s": contract.ENV_CAPACITY_WAIT_IN_PLACE_S,
    "manual_headroom": contract.ENV_CAPACITY_MANUAL_HEADROOM,
    "retry_delay_s": contract.ENV_CAPACITY_RETRY_DELAY_S,
    "max_query_active_s": contract.ENV_CAPACITY_MAX_QUERY_ACTIVE_S,
}


def _problems(capacity: Any) -> list[str]:
    with pytest.raises(ConfigError) as excinfo:
        StackSettings.from_context({"capacity": capacity})
    return list(excinfo.value.problems)


# --- settings ----------------------------------------------------------------------------------------------


def test_cdk_json_writes_the_defaults_out() -> None:
    # GIVEN the repository's cdk.json / WHEN its stack block is read / THEN the budget is there, at the defaults
    stack = load_context(REPO_ROOT / "cdk.json")[STACK_KEY]
    assert stack["capacity"] == {
        "permits": contract.DEFAULT_CAPACITY_PERMITS,
        "semaphore_name": None,
        "table_name": None,
        "wait_in_place_s": contract.DEFAULT_CAPACITY_WAIT_IN_PLACE_S,
        "manual_headroom": contract.DEFAULT_CAPACITY_MANUAL_HEADROOM,
        "retry_delay_s": contract.DEFAULT_CAPACITY_RETRY_DELAY_S,
        "max_query_active_s": contract.DEFAULT_CAPACITY_MAX_QUERY_ACTIVE_S,
        "shared_workgroups": [],
    }
    assert StackSettings.from_context(stack).capacity == CapacitySettings() == StackSettings().capacity
    assert CapacitySettings().permits == 10 and CapacitySettings().enabled


@pytest.mark.parametrize("key", list(CAPACITY_NUMBERS))
def test_each_capacity_number_takes_the_contracts_bounds_and_names_key_and_range(key: str) -> None:
    lo, hi = contract.NUMERIC_BOUNDS[CAPACITY_NUMBERS[key]]
    lo, hi = math.ceil(lo), math.floor(hi)
    permits = {"permits": contract.MAX_CAPACITY_PERMITS} if key == "manual_headroom" else {}  # headroom < permits
    # GIVEN a value at each bound / THEN it is accepted
    for value in (lo, hi):
        settings = StackSettings.from_context({"capacity": {**permits, key: value}})
        assert getattr(settings.capacity, key) == value
    # GIVEN a value just outside, a float or a string / THEN one problem naming the key and the range
    for value in (lo - 1, hi + 1, float(lo), str(lo), True):
        (problem,) = _problems({**permits, key: value})
        assert problem.startswith(f"context stack.capacity.{key}: must be an integer from {lo} to {hi} (")
        assert problem.endswith(f", got {value!r}")


def test_bad_permits_and_a_bad_semaphore_name_are_both_reported() -> None:
    problems = _problems({"permits": 100, "semaphore_name": "my budget"})
    assert problems == [
        (
            "context stack.capacity.permits: must be an integer from 0 to 99 (0: off; active Athena queries of every "
            "deployment sharing the semaphore; keep the sum of the budgets below the account's active DML query quota), "
            "got 100"
        ),
        f"context stack.capacity.semaphore_name: must be {lock_table.SEMAPHORE_NAME_RULE}, or null, got 'my budget'",
    ]


@pytest.mark.parametrize("name", ["a" * 129, "", "x/y", "acct#region"])
def test_a_semaphore_name_must_be_a_permit_key_part(name: str) -> None:
    if name == "":  # empty is "not set", like null: the account and Region
        assert StackSettings.from_context({"capacity": {"semaphore_name": name}}).capacity.semaphore_name is None
        return
    (problem,) = _problems({"semaphore_name": name})
    assert problem.startswith("context stack.capacity.semaphore_name: must be 1 to 128 letters, digits")


@pytest.mark.parametrize(("permits", "headroom"), [(10, 10), (10, 11), (1, 1), (3, 98)])
def test_manual_headroom_must_stay_below_permits(permits: int, headroom: int) -> None:
    (problem,) = _problems({"permits": permits, "manual_headroom": headroom})
    assert problem.startswith(f"context stack.capacity.manual_headroom: must be below permits ({permits})")
    assert problem.endswith(f"got {headroom}")


def test_off_accepts_any_headroom_in_range_and_unknown_keys_are_named() -> None:
    assert StackSettings.from_context({"capacity": {"permits": 0, "manual_headroom": 98}}).capacity.enabled is False
    (problem,) = _problems({"permit": 5})
    assert problem.startswith("context stack.capacity.permit: unknown key; allowed keys: permits, semaphore_name")
    with pytest.raises(ConfigError, match=r"context stack\.capacity: must be an object with keys permits"):
        StackSettings.from_context({"capacity": 10})


def test_the_synth_stops_on_a_bad_budget_naming_each_key(
    tmp_path: Path, sample_jobs_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN cdk.json with headroom >= permits and a bad semaphore name
    document = json.loads((REPO_ROOT / "cdk.json").read_text(encoding="utf-8"))
    document["context"][STACK_KEY]["capacity"] = {"permits": 4, "manual_headroom": 4, "semaphore_name": "a b"}
    cdk_json = tmp_path / "cdk.json"
    cdk_json.write_text(json.dumps(document), encoding="utf-8")
    monkeypatch.setattr(app, "CDK_JSON", cdk_json)
    # WHEN the app synthesizes / THEN exit 2, one line per key (the headroom rule waits for valid keys only)
    err = io.StringIO()
    assert app.main(jobs_dir=sample_jobs_dir, err=err) == app.EXIT_INVALID_CONFIG
    assert err.getvalue().splitlines() == [
        f"context stack.capacity.semaphore_name: must be {lock_table.SEMAPHORE_NAME_RULE}, or null, got 'a b'"
    ]
    document["context"][STACK_KEY]["capacity"] = {"permits": 4, "manual_headroom": 4}
    cdk_json.write_text(json.dumps(document), encoding="utf-8")
    err = io.StringIO()
    assert app.main(jobs_dir=sample_jobs_dir, err=err) == app.EXIT_INVALID_CONFIG
    (line,) = err.getvalue().splitlines()
    assert line.startswith("context stack.capacity.manual_headroom: must be below permits (4)") and "got 4" in line


@pytest.mark.parametrize(
    ("value", "why"),
    [
        (["other wg"], "('other wg' is not one)"),
        (["a" * 129], f"({'a' * 129!r} is not one)"),
        ([""], "('' is not one)"),
        ([7], "(7 is not one)"),
        (["team-b", "team-b"], "('team-b' repeated)"),
        ("team-b", ""),
        ([f"wg-{i}" for i in range(MAX_SHARED_WORKGROUPS + 1)], ""),
    ],
)
def test_shared_workgroups_must_be_distinct_athena_workgroup_names(value: Any, why: str) -> None:
    # GIVEN a shared_workgroups value that is not a list of distinct workgroup names (CreateWorkGroup's Name pattern)
    # WHEN the settings are read / THEN one line naming the key, the rule, the offending entry and the value
    (problem,) = _problems({"shared_workgroups": value})
    rule = (
        f"must be a list of at most {MAX_SHARED_WORKGROUPS} distinct Athena workgroup names (1 to 128 letters, "
        "digits, '.', '-' or '_' each) of the other deployments sharing this budget, in this account and Region"
    )
    assert problem == f"context stack.capacity.shared_workgroups: {rule}{' ' + why if why else ''}, got {value!r}"


def test_shared_workgroups_accept_workgroup_names_and_default_to_none() -> None:
    # GIVEN names at the rule's edges / THEN kept in order, as given; null or absent: none
    names = ["a", "W" * 128, "team-b.athena_wg-2"]
    capacity = StackSettings.from_context({"capacity": {"shared_workgroups": names}}).capacity
    assert capacity.shared_workgroups == tuple(names)
    assert StackSettings.from_context({"capacity": {"shared_workgroups": None}}).capacity.shared_workgroups == ()
    assert CapacitySettings().shared_workgroups == ()


def test_the_stack_writes_the_numbers_the_runtime_loads_with_the_same_rules() -> None:
    # GIVEN cdk.json's budget / WHEN its numbers are taken for the catalog / THEN the runtime's model of them, as typed
    # JSON that loads back the same, and the headroom rule words its problem the same on both sides
    budget = StackSettings().capacity.budget
    assert budget == CapacityBudget(
        permits=10, wait_in_place_s=60, manual_headroom=2, retry_delay_s=120, max_query_active_s=1800
    )
    assert CapacityBudget.from_raw(json.loads(json.dumps(budget.as_raw()))) == budget
    (synth,) = _problems({"permits": 4, "manual_headroom": 4})
    with pytest.raises(ConfigError) as info:
        CapacityBudget(permits=4, manual_headroom=4)
    (runtime,) = info.value.problems
    assert synth.removeprefix("context stack.") == runtime


def test_a_shared_table_name_must_be_a_table_name() -> None:
    with pytest.raises(ConfigError) as info:
        StackSettings.from_context({"capacity": {"table_name": "no spaces allowed"}})
    assert "capacity.table_name" in str(info.value)
