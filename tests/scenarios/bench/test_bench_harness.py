"""The benchmark harness at tiny size: it runs, and it counts the requests each contender must send.

Counts, never times: performance goals live in ``make bench``. Runs against the serialized moto server
(the session fixture). python-dynamodb-lock lives in .venv-bench only; its rows run where it is installed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import slotlock
from bench import report_tables, scenarios
from bench.backends import Endpoint
from bench.coldstart import asset_size
from bench.contenders import Floor, PowertoolsIdempotency, PythonDynamoDBLock, SlotLockContender, select
from bench.counting import failed_write_units
from slotlock.capacity import attribute_value_size as value_size_bytes
from slotlock.capacity import item_size_bytes

pytestmark = pytest.mark.slow

# (winner calls, loser-while-held calls, late-loser calls, whether the late loser runs the job again)
EXPECTED = {
    "floor": ({"PutItem": 1}, {"PutItem": 1}, {"PutItem": 1}, False),
    "slotlock": ({"UpdateItem": 1, "TransactWriteItems": 1}, {"UpdateItem": 1}, {"UpdateItem": 1}, False),
    "fenced-lease": ({"UpdateItem": 2}, {"UpdateItem": 1}, {"UpdateItem": 2}, True),
    "powertools": ({"PutItem": 1, "UpdateItem": 1}, {"PutItem": 1}, {"PutItem": 1}, False),
    "python-dynamodb-lock": (
        {"GetItem": 1, "PutItem": 1, "DeleteItem": 1},
        {"GetItem": 1},
        {"GetItem": 1, "PutItem": 1, "DeleteItem": 1},
        True,
    ),
}


@pytest.fixture
def endpoint(atomic_moto_endpoint: str) -> Endpoint:
    return Endpoint("moto-atomic", atomic_moto_endpoint)


def test_item_sizes_follow_the_published_rules() -> None:
    # names count: "pk" (2) + "abc" (3); numbers: 1 byte per 2 significant digits + 1
    assert item_size_bytes({"pk": {"S": "abc"}}) == 5
    assert value_size_bytes({"N": "12345"}) == 4
    assert value_size_bytes({"N": "-0.00100"}) == 2  # leading and trailing zeros do not count
    assert value_size_bytes({"M": {"a": {"BOOL": True}}}) == 3 + 1 + 1 + 1
    assert value_size_bytes({"L": [{"S": "xy"}, {"NULL": True}]}) == 3 + (2 + 1) + (1 + 1)
    # a failed conditional write costs 1 WCU per started KB of the existing item, at least 1
    assert failed_write_units(None) == 1.0
    assert failed_write_units({"pk": {"S": "k"}, "blob": {"S": "x" * 2000}}) == 2.0


def test_accounting_counts_every_request_of_every_role(endpoint: Endpoint) -> None:
    # GIVEN every contender installed here, on fresh tables
    contenders, skipped = select()
    assert set(skipped) <= {PythonDynamoDBLock.name}
    run_id = scenarios.new_run_id()
    scenarios.create_tables(endpoint, run_id, contenders)

    # WHEN a winner, a loser racing while it holds the slot, and a late loser go through two slots
    figures = scenarios.accounting(endpoint, run_id, contenders, slots=2)

    # THEN each role sent exactly the requests its library sends, the same in both slots
    for contender in contenders:
        entry = figures[contender.name]
        winner, loser, late, late_runs_again = EXPECTED[contender.name]
        assert entry["stable"], contender.name
        last = entry["last"]
        assert (last["winner"]["by_operation"], last["winner"]["ran"]) == (winner, True), contender.name
        assert (last["loser"]["by_operation"], last["loser"]["ran"]) == (loser, False), contender.name
        assert (last["late"]["by_operation"], last["late"]["ran"]) == (late, late_runs_again), contender.name
        assert all(last[role]["http_attempts"] == last[role]["requests"] for role in last)  # no retries here

    # AND our loser's failed conditional write is costed from the ALL_OLD item (small: 1 WCU)
    ours = figures["slotlock"]["last"]
    assert ours["loser"]["failed_conditional_writes"] == 1
    assert ours["loser"]["capacity_units_computed"] == 1.0
    # AND our winner pays one more request per heartbeat
    assert figures["slotlock"]["heartbeat"]["requests"] == 2 + 3
    assert figures["slotlock"]["heartbeat"]["requests_per_heartbeat"] == 1.0
    # AND the table shows the counts
    assert "2: TransactWriteItems+UpdateItem" in report_tables.accounting_table(figures, reports_capacity=False)


def test_contended_races_run_each_slot_once_with_one_request_per_loser(endpoint: Endpoint) -> None:
    # WHEN 2 racer processes race twice per contender (after one warm-up race)
    contenders = [Floor, SlotLockContender, PowertoolsIdempotency]
    run_id = scenarios.new_run_id()
    figures = scenarios.contended(endpoint, run_id, contenders, racers=2, rounds=2, warmup=1, timeout_s=240)

    # THEN every measured race ran the job exactly once, winners and losers sent what they must
    for contender in contenders:
        entry = figures[contender.name]
        assert entry["races"] == 2
        assert entry["runs_per_slot"] == {"min": 1, "max": 1, "mean": 1.0, "slots_not_exactly_once": 0}
        assert entry["loser_requests"] == {"mean": 1.0, "max": 1}
        assert entry["resolution"]["n"] == 2
    assert figures["floor"]["winner_requests_mean"] == 1.0
    assert figures["slotlock"]["winner_requests_mean"] == 2.0
    assert figures["powertools"]["winner_requests_mean"] == 2.0
    assert figures["slotlock"]["outcomes"] == {"held": 2, "succeeded": 2}


def test_takeover_after_the_holder_is_killed(endpoint: Endpoint) -> None:
    # WHEN our holder process is SIGKILLed right after acquiring a 0.5 s lease
    run_id = scenarios.new_run_id()
    scenarios.create_tables(endpoint, run_id, [SlotLockContender])
    figures = scenarios.takeover(endpoint, run_id, [SlotLockContender], lease_s=0.5, repetitions=1)

    # THEN a polling successor took the slot over and committed (it raises otherwise); it read the
    # predecessor's in-flight state once (GetItem) besides its polls and its commit
    sample = figures["slotlock"]["repetitions"][0]
    assert sample["successor_requests"] >= 3
    assert sample["kill_to_commit_s"] > 0


def test_asset_size_packages_the_lambda_code_without_bytecode() -> None:
    asset = asset_size()
    assert "**/__pycache__" in asset["excludes"] and "**/*.pyc" in asset["excludes"]
    lambdas = Path(__file__).resolve().parents[3] / "lambdas"
    sources = [p for p in lambdas.rglob("*.py") if "__pycache__" not in p.parts]
    slotlock_sources = list(Path(slotlock.__file__).resolve().parent.glob("*.py"))
    assert asset["files"] >= len(sources) + len(slotlock_sources) > len(sources) > 0
    assert 0 < asset["zip_bytes"] < asset["bytes"]


def test_the_cold_start_asset_holds_slotlock_whole_and_the_handler_imports_from_it_alone() -> None:
    """``make bench`` failed at its cold start: the staged asset lacked ``slotlock.ops`` (a subpackage)."""
    import subprocess
    import sys
    from pathlib import Path

    import slotlock
    from bench import coldstart

    root = coldstart.asset_root()
    source = Path(slotlock.__file__).resolve().parent
    installed = {p.relative_to(source) for p in source.rglob("*.py") if "__pycache__" not in p.parts}
    staged = {p.relative_to(root / "slotlock") for p in (root / "slotlock").rglob("*.py")}
    assert staged == installed and Path("ops/__init__.py") in staged
    done = subprocess.run(
        [sys.executable, "-I", "-c", "import sys; sys.path.insert(0, sys.argv[1]); import slotlock.ops", str(root)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
