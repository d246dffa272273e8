"""The runtime emits exactly the metrics of the contract (``contract.ALL_METRICS``), and nothing else.

The stack's dashboard and alarms are built from ``contract.ALL_METRICS``; this test drives the real
Lambda handler (Powertools decorators, settings from the environment, the slot lock, the results
store) through every scenario that emits a metric, reads the EMF blobs it prints (capsys), and checks
that the union of metric names is ``ALL_METRICS``, that every ``reason`` of ``LostRace`` and
``SlotMissed`` in the contract occurs, and that each blob has the dimensions the dashboard expects.

Other racers act directly on the lock table with clocks of their own (the handler's lock uses the
system clock), one request at a time: in-process moto is not atomic under concurrency.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from athena_refresh import contract, service
from athena_refresh.handler import lambda_handler
from athena_refresh.settings import Settings
from slotlock import Slot, SlotLock, pause, request_generation

#: Powertools' own cold-start metric (``capture_cold_start_metric=True`` in the handler). Not a
#: metric of the job: its dimensions are ``function_name`` and ``service``, not ``job``.
POWERTOOLS_METRICS = frozenset({"ColdStart"})
SQL = "SELECT origin, count(*) AS flights FROM flights WHERE t >= ? AND t < ? GROUP BY 1"
OPERATOR = "arn:aws:iam::123456789012:user/op"

pytestmark = [
    pytest.mark.filterwarnings("ignore:No application metrics to publish:UserWarning"),
    # Each scenario is its own job in one process (a deployed function serves one job): expected here.
    pytest.mark.filterwarnings("ignore:Dimension 'job' has already been added"),
    pytest.mark.usefixtures("fresh_powertools_state"),
]


@dataclass
class Emitted:
    """The EMF blobs one scenario's handler invocations printed."""

    blobs: list[dict[str, Any]] = field(default_factory=list)

    def of(self, namespace: str) -> list[dict[str, Any]]:
        return [b for b in self.blobs if b["_aws"]["CloudWatchMetrics"][0]["Namespace"] == namespace]

    @property
    def names(self) -> set[str]:
        return {
            m["Name"]
            for b in self.of(contract.METRICS_NAMESPACE)
            for d in b["_aws"]["CloudWatchMetrics"]
            for m in d["Metrics"]
        } - POWERTOOLS_METRICS

    def reasons(self, metric: str) -> set[str]:
        return {b[contract.DIMENSION_REASON] for b in self.of(contract.METRICS_NAMESPACE) if metric in b}


class Harness:
    """One job (its own name, so scenarios never share a lock item) on the moto tables."""

    def __init__(
        self, job: str, ddb: Any, tables: dict[str, str], make_engine: Any, make_context: Any, read: Any
    ) -> None:
        self.job, self.ddb = job, ddb
        self.lock_table, self.results_table = tables["lock_table"], tables["results_table"]
        self.make_engine, self.make_context, self._read = make_engine, make_context, read
        self.slot = Slot(int(time.time()) - 5)  # scheduled a few seconds ago (the handler's lock: system clock)
        self.engine = make_engine([["SUCCEEDED"]] * 5)
        service.use_engine_factory(lambda settings: self.engine)

    def use_engine(self, engine: Any) -> Any:
        self.engine = engine
        service.use_engine_factory(lambda settings: engine)
        return engine

    def invoke(self, request_id: str, slot: Slot | None = None, *, generation: int | None = None) -> dict[str, Any]:
        """One invocation for ``slot``; ``generation`` (2+): an operator's re-run of it (the manual marker)."""
        event: dict[str, Any] = {"scheduled_time": (slot or self.slot).iso, "racer": 0, "job": self.job}
        if generation is not None:
            event["manual"] = {
                "generation": generation,
                "run_id": "r1",
                "kind": "rerun",
                "requested_by": OPERATOR,
                "reason": "test",
            }
        return lambda_handler(event, self.make_context(request_id, on_fake_clock=False))

    def racer(self, *, clock_offset_s: float = 0) -> SlotLock:
        """Another racer's lock, its clock ``clock_offset_s`` away from the system clock (skewed clocks are how
        these scenarios expire a lease without waiting: their slots may lie minutes ahead of such a clock)."""
        return SlotLock(
            self.lock_table,
            self.job,
            client=self.ddb,
            lease_duration_s=45,
            heartbeat_interval_s=15,
            clock_ms=lambda: int((time.time() + clock_offset_s) * 1000),
            max_slot_lead_s=300,
        )

    def answer_acquisitions_with(self, error_code: str) -> None:
        """From now on, every acquisition the handler's lock sends is answered with ``error_code`` (HTTP 400),
        as DynamoDB answers a write that meets a transaction in flight on the item, or throttles it."""
        client = service.dependencies(Settings.from_env()).lock.client

        def answer(model: Any, params: dict[str, Any], **_: Any) -> Any:
            from botocore.awsrequest import AWSResponse

            if "ADD #token :one" not in params["body"].decode():
                return None
            return (
                AWSResponse("https://dynamodb", 400, {}, None),
                {
                    "Error": {"Code": error_code, "Message": f"injected {error_code}"},
                    "ResponseMetadata": {"HTTPStatusCode": 400},
                },
            )

        client.meta.events.register("before-call.dynamodb.UpdateItem", answer, unique_id="emitted-metrics-answer")

    def emitted(self) -> Emitted:
        return Emitted([r for r in self._read() if "_aws" in r])


# ---------------------------------------------------------------------------------------------------
# scenarios: each returns the blobs of the invocations under test and the metric names expected
# ---------------------------------------------------------------------------------------------------
WIN = {
    contract.METRIC_LEASE_ACQUIRED,
    contract.METRIC_RUN_SUCCEEDED,
    contract.METRIC_LAST_SUCCESS_AGE_S,
    contract.METRIC_QUERIES_STARTED,
    contract.METRIC_ROWS_STORED,
    contract.METRIC_QUERY_DURATION_MS,
    contract.METRIC_DATA_SCANNED_BYTES,
    contract.METRIC_ESTIMATED_COST_USD,
    contract.METRIC_VALUE_SERIES_DROPPED,
}


def win_and_commit(h: Harness) -> tuple[Emitted, set[str]]:
    assert h.invoke("req-A")["status"] == "succeeded"
    return h.emitted(), WIN


def lost_slot_finished(h: Harness) -> tuple[Emitted, set[str]]:
    assert h.invoke("req-A")["status"] == "succeeded"
    h.emitted()
    result = h.invoke("req-B")
    assert (result["status"], result["reason"]) == ("lost", "slot_finished")
    return h.emitted(), {contract.METRIC_LOST_RACE, contract.METRIC_LAST_SUCCESS_AGE_S}


def lost_held(h: Harness) -> tuple[Emitted, set[str]]:
    assert h.racer().try_acquire(h.slot, "req-winner").acquired
    result = h.invoke("req-B")
    assert (result["status"], result["reason"]) == ("lost", "held")
    return h.emitted(), {contract.METRIC_LOST_RACE}  # fresh job: no last success to report yet


def overrun(h: Harness) -> tuple[Emitted, set[str]]:
    # an older slot's holder is still running: the first racer records the slot as missed, the next loses
    assert h.racer().try_acquire(Slot(h.slot.epoch_s - 60), "req-old").acquired
    first, second = h.invoke("req-B"), h.invoke("req-C")
    assert (first["status"], first["reason"], second["status"], second["reason"]) == (
        "missed",
        "overrun",
        "lost",
        "overrun",
    )
    return h.emitted(), {contract.METRIC_SLOT_MISSED, contract.METRIC_LOST_RACE}


def lost_superseded(h: Harness) -> tuple[Emitted, set[str]]:
    # a newer slot holds the lock: the first racer records this slot MISSED (superseded), the next loses
    assert h.racer(clock_offset_s=60).try_acquire(Slot(h.slot.epoch_s + 60), "req-newer").acquired
    first, second = h.invoke("req-B"), h.invoke("req-C")
    assert (first["status"], first["reason"], second["status"], second["reason"]) == (
        "missed",
        "superseded",
        "lost",
        "superseded",
    )
    return h.emitted(), {contract.METRIC_SLOT_MISSED, contract.METRIC_LOST_RACE}


def lost_conflict(h: Harness) -> tuple[Emitted, set[str]]:
    # the winner's commit transaction is in flight on the lock item for the loser's whole (short) budget
    h.answer_acquisitions_with("TransactionConflictException")
    result = h.invoke("req-B")
    assert (result["status"], result["reason"]) == ("lost", "conflict")
    return h.emitted(), {contract.METRIC_LOST_RACE}


def lost_unavailable(h: Harness) -> tuple[Emitted, set[str]]:
    # DynamoDB throttles the acquisition past botocore's retries and the loser's own budget
    h.answer_acquisitions_with("ProvisionedThroughputExceededException")
    result = h.invoke("req-B")
    assert (result["status"], result["reason"]) == ("lost", "unavailable")
    return h.emitted(), {contract.METRIC_LOST_RACE}


def too_old(h: Harness) -> tuple[Emitted, set[str]]:
    # No LastSuccessAgeS: a too-old delivery is rejected before any lock request (documented in README).
    result = h.invoke("req-B", Slot(h.slot.epoch_s - 3600))
    assert (result["status"], result["reason"]) == ("missed", "too_old")
    return h.emitted(), {contract.METRIC_SLOT_MISSED}


def missed_superseded(h: Harness) -> tuple[Emitted, set[str]]:
    # an older slot's holder died (its lease expired); this slot's winner records the older slot as missed
    assert h.racer(clock_offset_s=-120).try_acquire(Slot(h.slot.epoch_s - 60), "req-dead").acquired
    assert h.invoke("req-B")["status"] == "succeeded"
    return h.emitted(), WIN | {contract.METRIC_SLOT_MISSED}


def takeover_adopts_query(h: Harness) -> tuple[Emitted, set[str]]:
    # a dead winner started the query and recorded it; its lease has expired
    qid = h.engine.start_query(sql=SQL, parameters=["'a'", "'b'"], client_request_token="t" * 32)
    dead = h.racer(clock_offset_s=-60)
    lease = dead.try_acquire(h.slot, "req-dead")
    assert lease.acquired
    dead.record_state(lease, {"query_execution_id": qid, "attempt": 1})
    result = h.invoke("req-B")
    assert (result["status"], result["takeover"], result["adopted_state"]) == ("succeeded", True, True)
    return h.emitted(), WIN - {contract.METRIC_QUERIES_STARTED} | {
        contract.METRIC_TAKEOVER,
        contract.METRIC_QUERY_ADOPTED,
    }


def stale_rejected(h: Harness) -> tuple[Emitted, set[str]]:
    # while the handler polls, a racer whose clock runs 60 s ahead sees its lease expired and takes over
    def take_over(engine: Any, poll: int) -> None:
        if poll == 1:
            assert h.racer(clock_offset_s=60).try_acquire(h.slot, "req-B").acquired

    h.use_engine(h.make_engine([["SUCCEEDED"]], on_get_query=take_over))
    result = h.invoke("req-A")
    assert result["status"] == "stale_rejected"
    return h.emitted(), {
        contract.METRIC_LEASE_ACQUIRED,
        contract.METRIC_QUERIES_STARTED,
        contract.METRIC_QUERY_DURATION_MS,
        contract.METRIC_DATA_SCANNED_BYTES,
        contract.METRIC_STALE_WRITE_REJECTED,
    }


def lease_lost(h: Harness) -> tuple[Emitted, set[str]]:
    # the takeover happens while the query is being started: recording its id finds the lease gone
    engine = h.make_engine([["SUCCEEDED"]])
    start = engine.start_query

    def start_then_lose(**kwargs: Any) -> str:
        assert h.racer(clock_offset_s=60).try_acquire(h.slot, "req-B").acquired
        return start(**kwargs)

    engine.start_query = start_then_lose
    h.use_engine(engine)
    result = h.invoke("req-A")
    assert (result["status"], result["reason"]) == ("lease_lost", "record_state")
    return h.emitted(), {contract.METRIC_LEASE_ACQUIRED, contract.METRIC_QUERIES_STARTED, contract.METRIC_LEASE_LOST}


def query_failed(h: Harness) -> tuple[Emitted, set[str]]:
    h.use_engine(h.make_engine([[{"state": "FAILED", "retryable": False, "error_message": "bad column"}]]))
    assert h.invoke("req-A")["status"] == "failed"
    return h.emitted(), {contract.METRIC_LEASE_ACQUIRED, contract.METRIC_QUERIES_STARTED, contract.METRIC_RUN_FAILED}


def corrupt_lock_item(h: Harness) -> tuple[Emitted, set[str]]:
    h.ddb.put_item(TableName=h.lock_table, Item={"pk": {"S": f"lock#{h.job}"}, "fencing_token": {"S": "7"}})
    result = h.invoke("req-A")
    assert (result["status"], result["details"]["attribute"]) == ("corrupt", "fencing_token")
    return h.emitted(), {contract.METRIC_CORRUPT_LOCK_ITEM}


def results_contradict_the_lock(h: Harness) -> tuple[Emitted, set[str]]:
    # the results' LATEST pointer names the coming slot with a higher token than the lock ever issued (e.g.
    # after a point-in-time restore of the lock table, before the fence bump; only the same slot and
    # generation compare tokens): the commit is refused
    h.invoke("req-A", Slot(h.slot.epoch_s - 60))
    h.emitted()
    h.ddb.update_item(
        TableName=h.results_table,
        Key={"job": {"S": h.job}, "slot": {"S": "LATEST"}},
        UpdateExpression="SET fencing_token = :t, latest_slot = :slot",
        ExpressionAttributeValues={":t": {"N": "1000"}, ":slot": {"S": h.slot.iso}},
    )
    result = h.invoke("req-B")
    assert (result["status"], result["details"]["attribute"]) == ("corrupt", "fencing_token")
    # The corrupt path returns before the outcome metrics: no LeaseAcquired although a lease was held.
    return h.emitted(), {
        contract.METRIC_QUERIES_STARTED,
        contract.METRIC_QUERY_DURATION_MS,
        contract.METRIC_DATA_SCANNED_BYTES,
        contract.METRIC_CORRUPT_LOCK_ITEM,
    }


def paused(h: Harness) -> tuple[Emitted, set[str]]:
    # an operator paused the job: the first racer records the slot MISSED (paused), the next loses
    assert pause(h.racer(), reason="maintenance", requested_by=OPERATOR).changed
    first, second = h.invoke("req-B"), h.invoke("req-C")
    assert (first["status"], first["reason"], second["status"], second["reason"]) == (
        "missed",
        "paused",
        "lost",
        "paused",
    )
    return h.emitted(), {contract.METRIC_SLOT_MISSED, contract.METRIC_LOST_RACE}


def lost_busy(h: Harness) -> tuple[Emitted, set[str]]:
    # two re-runs of a past slot were requested; the first holds the manual lease, so the second loses as busy
    # (no LastSuccessAgeS: a manual generation does not report the live schedule's last success)
    past = Slot(h.slot.epoch_s - 600)
    racer = h.racer()
    second, third = [
        request_generation(racer.context, past, run_id=run_id, kind="rerun", requested_by=OPERATOR, reason="test")
        for run_id in ("r1", "r2")
    ]
    assert (second.generation, third.generation) == (2, 3)
    assert racer.for_generation(2).try_acquire(past, "req-rerun-2").acquired
    result = h.invoke("req-B", past, generation=3)
    assert (result["status"], result["reason"], result["generation"]) == ("lost", "busy", 3)
    return h.emitted(), {contract.METRIC_LOST_RACE}


def rerun_commits(h: Harness) -> tuple[Emitted, set[str]]:
    # an operator re-runs a past slot (generation 2): a winner's metrics, but no LastSuccessAgeS (a re-run's
    # success must not hide that the live schedule stopped succeeding)
    past = Slot(h.slot.epoch_s - 600)
    racer = h.racer()
    request_generation(racer.context, past, run_id="r1", kind="rerun", requested_by=OPERATOR, reason="test")
    result = h.invoke("req-A", past, generation=2)
    assert (result["status"], result["generation"]) == ("succeeded", 2)
    return h.emitted(), WIN - {contract.METRIC_LAST_SUCCESS_AGE_S}


SCENARIOS: dict[str, Callable[[Harness], tuple[Emitted, set[str]]]] = {
    "win_and_commit": win_and_commit,
    "lost_slot_finished": lost_slot_finished,
    "lost_held": lost_held,
    "overrun": overrun,
    "lost_superseded": lost_superseded,
    "lost_conflict": lost_conflict,
    "lost_unavailable": lost_unavailable,
    "too_old": too_old,
    "missed_superseded": missed_superseded,
    "takeover_adopts_query": takeover_adopts_query,
    "stale_rejected": stale_rejected,
    "lease_lost": lease_lost,
    "query_failed": query_failed,
    "corrupt_lock_item": corrupt_lock_item,
    "results_contradict_the_lock": results_contradict_the_lock,
    "paused": paused,
    "lost_busy": lost_busy,
    "rerun_commits": rerun_commits,
}


# ---------------------------------------------------------------------------------------------------
# fixtures
# ---------------------------------------------------------------------------------------------------
@pytest.fixture
def harness(
    monkeypatch: pytest.MonkeyPatch,
    aws_resources: dict[str, str],
    ddb: Any,
    make_engine: Any,
    make_context: Any,
    capsys: pytest.CaptureFixture[str],
) -> Callable[[str], Harness]:
    """``harness(job)``: sets the function's environment for ``job`` (values: flights and delay by origin,
    at most 2 series, so the default three origins also drop one) and returns a :class:`Harness`."""
    import json

    def read() -> list[dict[str, Any]]:
        return [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]

    def make(job: str) -> Harness:
        env = {
            contract.ENV_JOB_NAME: job,
            contract.ENV_LOCK_TABLE_NAME: aws_resources["lock_table"],
            contract.ENV_RESULTS_TABLE_NAME: aws_resources["results_table"],
            contract.ENV_RESULTS_BUCKET_NAME: aws_resources["bucket"],
            contract.ENV_LEASE_DURATION_S: "45",
            contract.ENV_HEARTBEAT_INTERVAL_S: "15",
            contract.ENV_MAX_SLOT_AGE_S: "1800",
            contract.ENV_ATHENA_WORKGROUP: "athena-refresh",
            contract.ENV_ATHENA_DATABASE: "flights_demo",
            contract.ENV_QUERY_SQL: SQL,
            contract.ENV_DATA_YEAR: "2013",
            contract.ENV_VALUE_METRIC_COLUMNS: "flights,avg_dep_delay_min",
            contract.ENV_VALUE_METRIC_DIMENSIONS: "origin",
            contract.ENV_VALUE_METRIC_MAX_SERIES: "2",
        }
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        read()  # start from an empty capture
        return Harness(job, ddb, aws_resources, make_engine, make_context, read)

    return make


def _run(name: str, harness: Callable[[str], Harness]) -> tuple[Emitted, set[str]]:
    return SCENARIOS[name](harness(f"job-{name.replace('_', '-')}"))


# ---------------------------------------------------------------------------------------------------
# tests
# ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", list(SCENARIOS))
def test_each_scenario_emits_exactly_its_metrics_with_the_dashboards_dimensions(
    name: str, harness: Callable[[str], Harness]
) -> None:
    emitted, expected = _run(name, harness)

    assert emitted.names == expected
    for blob in emitted.of(contract.METRICS_NAMESPACE):
        if POWERTOOLS_METRICS.issuperset(blob) or "ColdStart" in blob:
            continue
        job = blob[contract.DIMENSION_JOB]
        [dimensions] = blob["_aws"]["CloudWatchMetrics"][0]["Dimensions"]
        reason = [contract.DIMENSION_REASON] if contract.DIMENSION_REASON in dimensions else []
        assert sorted(dimensions) == sorted([contract.DIMENSION_SERVICE, contract.DIMENSION_JOB, *reason]), blob
        assert (blob[contract.DIMENSION_SERVICE], job) == (contract.SERVICE_NAME, f"job-{name.replace('_', '-')}")
    for blob in emitted.of(contract.VALUES_NAMESPACE):
        assert blob["_aws"]["CloudWatchMetrics"][0]["Dimensions"] == [[contract.DIMENSION_JOB, "origin"]]
    # values are published exactly when a result was committed
    assert bool(emitted.of(contract.VALUES_NAMESPACE)) == (contract.METRIC_ROWS_STORED in expected)


@pytest.mark.parametrize("backend", ["moto"], indirect=True)  # the scenarios already ran on both backends above
def test_the_scenarios_together_emit_every_contract_metric_and_every_reason(harness: Callable[[str], Harness]) -> None:
    union: set[str] = set()
    lost_reasons: set[str] = set()
    missed_reasons: set[str] = set()
    for name, scenario in SCENARIOS.items():
        emitted, _ = scenario(harness(f"union-{name.replace('_', '-')}"))
        assert emitted.names <= set(contract.ALL_METRICS), (name, emitted.names - set(contract.ALL_METRICS))
        union |= emitted.names
        lost_reasons |= emitted.reasons(contract.METRIC_LOST_RACE)
        missed_reasons |= emitted.reasons(contract.METRIC_SLOT_MISSED)

    assert union == set(contract.ALL_METRICS)
    assert lost_reasons == set(contract.LOSS_REASONS)
    assert missed_reasons == set(contract.MISSED_REASONS)
