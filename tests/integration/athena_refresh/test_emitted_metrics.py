"""The runtime emits exactly the metrics of the contract (issue 23), and every other fact as a log field.

The stack's dashboard and alarms are built from ``contract.JOB_METRICS`` (dimensions service + job) and
``contract.DEPLOYMENT_METRICS`` (dimension service only); each metric name + dimension set is a billed custom
metric. This test drives the real Lambda handler (Powertools decorators, settings from the environment, the slot
lock, the results store) through every outcome, reads what it prints (capsys: EMF blobs and the JSON log lines),
and checks for each outcome exactly which metrics it emitted with which dimensions, and the fields of its one
structured log line ("slot <iso>: <outcome>"); together the outcomes emit every contract metric and log every
loss and missed reason of the contract.

Other racers act directly on the lock table with clocks of their own (the handler's lock uses the
system clock), one request at a time: in-process moto is not atomic under concurrency.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from athena_refresh import contract, service
from athena_refresh.budget import CapacityBudget
from athena_refresh.catalog import CatalogQuery, write_catalog
from athena_refresh.handler import make_handler
from athena_refresh.job_defaults import spec_of
from athena_refresh.settings import Settings
from slotlock import Lease, PermitOwner, Semaphore, Slot, SlotLock, pause, request_generation

SQL = "SELECT origin, count(*) AS flights FROM flights WHERE t >= ? AND t < ? GROUP BY 1"
OPERATOR = "arn:aws:iam::123456789012:user/op"
#: The fake engine's statistics of every query (tests/integration/athena_refresh/conftest.py).
SCANNED_BYTES, DURATION_MS = 7_340_032, 910
#: A field the line must carry, whatever its value.
PRESENT = object()
#: A field the line must not carry (unknown for that outcome: the logger leaves None out).
ABSENT = object()

pytestmark = [
    pytest.mark.filterwarnings("ignore:No application metrics to publish:UserWarning"),
    # Each scenario is its own job in one process (a deployed function serves one job): expected here.
    pytest.mark.filterwarnings("ignore:Dimension 'job' has already been added"),
    pytest.mark.usefixtures("fresh_powertools_state"),
    pytest.mark.backends("moto", "dynamodb-local"),
]


@dataclass
class Emitted:
    """What one scenario's handler invocations printed: EMF blobs and JSON log lines."""

    records: list[dict[str, Any]] = field(default_factory=list)

    @property
    def blobs(self) -> list[dict[str, Any]]:
        return [r for r in self.records if "_aws" in r]

    def of(self, namespace: str) -> list[dict[str, Any]]:
        return [b for b in self.blobs if b["_aws"]["CloudWatchMetrics"][0]["Namespace"] == namespace]

    @staticmethod
    def names(blob: Mapping[str, Any]) -> list[str]:
        return [m["Name"] for d in blob["_aws"]["CloudWatchMetrics"] for m in d["Metrics"]]

    @staticmethod
    def dimension_sets(blob: Mapping[str, Any]) -> list[list[str]]:
        return [sorted(dims) for d in blob["_aws"]["CloudWatchMetrics"] for dims in d["Dimensions"]]

    @property
    def job_metrics(self) -> set[str]:
        """Names in blobs whose one dimension set is service + job."""
        job = sorted([contract.DIMENSION_SERVICE, contract.DIMENSION_JOB])
        return {
            n for b in self.of(contract.METRICS_NAMESPACE) if self.dimension_sets(b) == [job] for n in self.names(b)
        }

    @property
    def deployment_counts(self) -> Counter[str]:
        """Names in blobs whose one dimension set is service only, counted."""
        return Counter(
            n
            for b in self.of(contract.METRICS_NAMESPACE)
            if self.dimension_sets(b) == [[contract.DIMENSION_SERVICE]]
            for n in self.names(b)
        )

    @property
    def lines(self) -> list[dict[str, Any]]:
        """The invocations' outcome lines ("slot <iso>: <outcome>"), in order."""
        return [
            r
            for r in self.records
            if "_aws" not in r and contract.LOG_FIELD_OUTCOME in r and str(r.get("message", "")).startswith("slot ")
        ]

    @property
    def missed(self) -> list[tuple[str, str]]:
        """(missed_slot, missed_reason) of every line that records a slot MISSED (outcome lines and the warning of
        a winner that recorded an older slot superseded)."""
        return [
            (r[contract.LOG_FIELD_MISSED_SLOT], r[contract.LOG_FIELD_MISSED_REASON])
            for r in self.records
            if contract.LOG_FIELD_MISSED_REASON in r
        ]


class Harness:
    """One job (its own name, so scenarios never share a lock item) on the moto tables."""

    def __init__(
        self,
        job: str,
        ddb: Any,
        tables: dict[str, str],
        make_engine: Any,
        make_context: Any,
        read: Any,
        setenv: Callable[[str, str], None],
        with_spec: Callable[..., None],
        with_capacity: Callable[..., None],
    ) -> None:
        self.job, self.ddb, self.setenv, self.with_spec = job, ddb, setenv, with_spec
        self.with_capacity = with_capacity  # (re)write the catalog's capacity budget with these numbers
        self.lock_table, self.results_table = tables["lock_table"], tables["results_table"]
        self.make_engine, self.make_context, self._read = make_engine, make_context, read
        self.slot = Slot(int(time.time()) - 5)  # scheduled a few seconds ago (the handler's lock: system clock)
        self.engine = make_engine([["SUCCEEDED"]] * 5)
        self.deps_options: dict[str, Any] = {}
        self._deps: dict[Settings, service.Deps] = {}
        self.handler = make_handler(self.deps)

    def deps(self, settings: Settings) -> service.Deps:
        """The handler's deps for ``settings``: one per settings, as an execution environment keeps them."""
        if settings not in self._deps:
            self._deps[settings] = service.Deps.from_settings(settings, engine=self.engine, **self.deps_options)
        return self._deps[settings]

    def use(self, **options: Any) -> None:
        """From the next invocation on, deps with these parts (``Deps.from_settings`` options), built anew."""
        self.deps_options.update(options)
        self._deps.clear()
        self.handler = make_handler(self.deps)

    def use_engine(self, engine: Any) -> Any:
        self.engine = engine
        self.use()
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
        return self.handler(event, self.make_context(request_id, on_fake_clock=False))

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
        client = self.deps(Settings.from_env()).lock.client

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
        """What was printed since the last call."""
        return Emitted(self._read())


# ---------------------------------------------------------------------------------------------------
# scenarios: each returns what the invocations under test printed, and what they must have printed
# ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Expected:
    """``job``: the per-job metrics (dimensions service + job); ``deployment``: the deployment-wide counts (dimension
    service only, value 1 each, one blob each); ``lines``: the fields of each invocation's outcome line, in order
    (a subset: PRESENT / ABSENT for fields whose value is not fixed, or which must be missing); ``missed``: the
    (slot, reason) of every MISSED record the invocations logged."""

    job: frozenset[str] = frozenset()
    deployment: frozenset[str] = frozenset()
    lines: tuple[Mapping[str, Any], ...] = ()
    missed: tuple[tuple[str, str], ...] = ()


JOB_MEASUREMENTS = frozenset({contract.METRIC_DATA_SCANNED_BYTES, contract.METRIC_QUERY_DURATION_MS})
WIN_METRICS = JOB_MEASUREMENTS | {contract.METRIC_LAST_SUCCESS_AGE_S}
#: The winner's outcome line: lease, one query started, its statistics, the commit's rows, the estimate, and the
#: value series over the cap (3 origins, cap 2: one dropped); no threshold configured, so none exceeded.
WIN_LINE: Mapping[str, Any] = {
    "outcome": "succeeded",
    "reason": ABSENT,
    "fencing_token": PRESENT,
    "query_execution_id": PRESENT,
    "lease_acquired": True,
    "takeover": False,
    "query_adopted": False,
    "queries_started": 1,
    "data_scanned_bytes": SCANNED_BYTES,
    "query_duration_ms": DURATION_MS,
    "rows_stored": 3,
    "estimated_cost_usd": PRESENT,
    "value_series_dropped": 1,
    "threshold_exceeded": ABSENT,
    "missed_slot": ABSENT,
    "missed_reason": ABSENT,
}


def lost(reason: str, **fields: Any) -> dict[str, Any]:
    """A loser's outcome line: no lease, no query, nothing measured or stored."""
    return {
        "outcome": "lost",
        "reason": reason,
        "lease_acquired": False,
        "takeover": False,
        "queries_started": 0,
        "data_scanned_bytes": ABSENT,
        "rows_stored": ABSENT,
        "missed_reason": ABSENT,
        **fields,
    }


def missed(slot: Slot, reason: str) -> dict[str, Any]:
    """The outcome line of the racer that recorded its slot MISSED."""
    return {
        "outcome": "missed",
        "reason": reason,
        "lease_acquired": False,
        "queries_started": 0,
        "missed_slot": slot.iso,
        "missed_reason": reason,
    }


def win_and_commit(h: Harness) -> tuple[Emitted, Expected]:
    assert h.invoke("req-A")["status"] == "succeeded"
    return h.emitted(), Expected(job=WIN_METRICS, lines=(WIN_LINE,))


def threshold_exceeded(h: Harness) -> tuple[Emitted, Expected]:
    # the job's [alarms] data_scanned_bytes is below what the query scans; its duration threshold is not reached
    h.with_spec(alarms={"data_scanned_bytes": SCANNED_BYTES - 1, "query_duration_ms": DURATION_MS})  # equal: not above
    assert h.invoke("req-A")["status"] == "succeeded"
    line = {**WIN_LINE, "threshold_exceeded": contract.METRIC_DATA_SCANNED_BYTES}
    return h.emitted(), Expected(
        job=WIN_METRICS, deployment=frozenset({contract.METRIC_THRESHOLD_EXCEEDED}), lines=(line,)
    )


def lost_slot_finished(h: Harness) -> tuple[Emitted, Expected]:
    assert h.invoke("req-A")["status"] == "succeeded"
    h.emitted()
    result = h.invoke("req-B")
    assert (result["status"], result["reason"]) == ("lost", "slot_finished")
    # the loser reports the last success's age, read from the lock item it touched (ALL_OLD)
    return h.emitted(), Expected(job=frozenset({contract.METRIC_LAST_SUCCESS_AGE_S}), lines=(lost("slot_finished"),))


def lost_held(h: Harness) -> tuple[Emitted, Expected]:
    assert h.racer().try_acquire(h.slot, "req-winner").acquired
    result = h.invoke("req-B")
    assert (result["status"], result["reason"]) == ("lost", "held")
    return h.emitted(), Expected(lines=(lost("held"),))  # fresh job: no last success to report yet


def overrun(h: Harness) -> tuple[Emitted, Expected]:
    # an older slot's holder is still running: the first racer records the slot as missed, the next loses
    assert h.racer().try_acquire(Slot(h.slot.epoch_s - 60), "req-old").acquired
    first, second = h.invoke("req-B"), h.invoke("req-C")
    assert (first["status"], first["reason"], second["status"], second["reason"]) == (
        "missed",
        "overrun",
        "lost",
        "overrun",
    )
    return h.emitted(), Expected(lines=(missed(h.slot, "overrun"), lost("overrun")), missed=((h.slot.iso, "overrun"),))


def lost_superseded(h: Harness) -> tuple[Emitted, Expected]:
    # a newer slot holds the lock: the first racer records this slot MISSED (superseded), the next loses
    assert h.racer(clock_offset_s=60).try_acquire(Slot(h.slot.epoch_s + 60), "req-newer").acquired
    first, second = h.invoke("req-B"), h.invoke("req-C")
    assert (first["status"], first["reason"], second["status"], second["reason"]) == (
        "missed",
        "superseded",
        "lost",
        "superseded",
    )
    return h.emitted(), Expected(
        lines=(missed(h.slot, "superseded"), lost("superseded")), missed=((h.slot.iso, "superseded"),)
    )


def lost_conflict(h: Harness) -> tuple[Emitted, Expected]:
    # the winner's commit transaction is in flight on the lock item for the loser's whole (short) budget
    h.answer_acquisitions_with("TransactionConflictException")
    result = h.invoke("req-B")
    assert (result["status"], result["reason"]) == ("lost", "conflict")
    return h.emitted(), Expected(lines=(lost("conflict"),))


def lost_unavailable(h: Harness) -> tuple[Emitted, Expected]:
    # DynamoDB throttles the acquisition past botocore's retries and the loser's own budget
    h.answer_acquisitions_with("ProvisionedThroughputExceededException")
    result = h.invoke("req-B")
    assert (result["status"], result["reason"]) == ("lost", "unavailable")
    return h.emitted(), Expected(lines=(lost("unavailable"),))


def too_old(h: Harness) -> tuple[Emitted, Expected]:
    # No LastSuccessAgeS: a too-old delivery is rejected before any lock request (documented in README).
    old = Slot(h.slot.epoch_s - 3600)
    result = h.invoke("req-B", old)
    assert (result["status"], result["reason"]) == ("missed", "too_old")
    return h.emitted(), Expected(lines=(missed(old, "too_old"),), missed=((old.iso, "too_old"),))


def missed_superseded(h: Harness) -> tuple[Emitted, Expected]:
    # an older slot's holder died (its lease expired); this slot's winner records the older slot as missed: its
    # acquisition's warning says so (logged at once, so it counts even if the invocation fails later)
    older = Slot(h.slot.epoch_s - 60)
    assert h.racer(clock_offset_s=-120).try_acquire(older, "req-dead").acquired
    assert h.invoke("req-B")["status"] == "succeeded"
    return h.emitted(), Expected(job=WIN_METRICS, lines=(WIN_LINE,), missed=((older.iso, "superseded"),))


def missed_capacity_superseded(h: Harness) -> tuple[Emitted, Expected]:
    # an older slot was given back for capacity and its comeback never came: this slot's winner records it MISSED
    # "capacity" (what the older slot waited for), and its warning says that reason, as the record does
    older = Slot(h.slot.epoch_s - 60)
    racer = h.racer(clock_offset_s=-120)
    lease = racer.try_acquire(older, "req-gave-back")
    assert isinstance(lease, Lease)
    racer.release(lease, given_back="capacity")
    assert h.invoke("req-B")["status"] == "succeeded"
    return h.emitted(), Expected(job=WIN_METRICS, lines=(WIN_LINE,), missed=((older.iso, "capacity"),))


def takeover_adopts_query(h: Harness) -> tuple[Emitted, Expected]:
    # a dead winner started the query and recorded it; its lease has expired
    qid = h.engine.start_query(sql=SQL, parameters=["'a'", "'b'"], client_request_token="t" * 32)
    dead = h.racer(clock_offset_s=-60)
    lease = dead.try_acquire(h.slot, "req-dead")
    assert lease.acquired
    dead.record_state(lease, {"query_execution_id": qid, "attempt": 1})
    result = h.invoke("req-B")
    assert (result["status"], result["takeover"], result["adopted_state"]) == ("succeeded", True, True)
    line = {**WIN_LINE, "takeover": True, "query_adopted": True, "queries_started": 0, "query_execution_id": qid}
    return h.emitted(), Expected(job=WIN_METRICS, lines=(line,))


def stale_rejected(h: Harness) -> tuple[Emitted, Expected]:
    # while the handler polls, a racer whose clock runs 60 s ahead sees its lease expired and takes over
    def take_over(engine: Any, poll: int) -> None:
        if poll == 1:
            assert h.racer(clock_offset_s=60).try_acquire(h.slot, "req-B").acquired

    h.use_engine(h.make_engine([["SUCCEEDED"]], on_get_query=take_over))
    result = h.invoke("req-A")
    assert result["status"] == "stale_rejected"
    # the query's statistics are known (logged), but nothing was committed: no per-job measurement
    line = {
        "outcome": "stale_rejected",
        "reason": "fencing_token_superseded",
        "lease_acquired": True,
        "queries_started": 1,
        "data_scanned_bytes": SCANNED_BYTES,
        "query_duration_ms": DURATION_MS,
        "rows_stored": ABSENT,
        "estimated_cost_usd": ABSENT,
        "value_series_dropped": ABSENT,
    }
    return h.emitted(), Expected(deployment=frozenset({contract.METRIC_STALE_WRITE_REJECTED}), lines=(line,))


def lease_lost(h: Harness) -> tuple[Emitted, Expected]:
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
    line = {"outcome": "lease_lost", "reason": "record_state", "lease_acquired": True, "queries_started": 1}
    return h.emitted(), Expected(lines=({**line, "data_scanned_bytes": ABSENT, "rows_stored": ABSENT},))


def query_failed(h: Harness) -> tuple[Emitted, Expected]:
    h.use_engine(h.make_engine([[{"state": "FAILED", "retryable": False, "error_message": "bad column"}]]))
    assert h.invoke("req-A")["status"] == "failed"
    line = {"outcome": "failed", "lease_acquired": True, "queries_started": 1, "data_scanned_bytes": ABSENT}
    return h.emitted(), Expected(lines=({**line, "rows_stored": ABSENT},))


def corrupt_lock_item(h: Harness) -> tuple[Emitted, Expected]:
    h.ddb.put_item(TableName=h.lock_table, Item={"pk": {"S": f"lock#{h.job}"}, "fencing_token": {"S": "7"}})
    result = h.invoke("req-A")
    assert (result["status"], result["details"]["attribute"]) == ("corrupt", "fencing_token")
    line = {"outcome": "corrupt", "attribute": "fencing_token", "queries_started": 0}
    return h.emitted(), Expected(deployment=frozenset({contract.METRIC_CORRUPT_LOCK_ITEM}), lines=(line,))


def unsupported_schema_version(h: Harness) -> tuple[Emitted, Expected]:
    # a newer slotlock wrote the lock item (table layout 2): reported, never counted as a corrupt item
    h.ddb.put_item(
        TableName=h.lock_table,
        Item={"pk": {"S": f"lock#{h.job}"}, "fencing_token": {"N": "7"}, "schema_version": {"N": "2"}},
    )
    result = h.invoke("req-A")
    assert (result["status"], result["details"]["item_key"]) == ("unsupported_schema", f"lock#{h.job}")
    line = {"outcome": "unsupported_schema", "item_key": f"lock#{h.job}", "schema_version_found": 2}
    return h.emitted(), Expected(lines=({**line, "queries_started": 0},))


def results_contradict_the_lock(h: Harness) -> tuple[Emitted, Expected]:
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
    # The corrupt path returns before the outcome's metrics: the query ran, but nothing was committed
    line = {"outcome": "corrupt", "queries_started": 1, "data_scanned_bytes": SCANNED_BYTES, "rows_stored": ABSENT}
    return h.emitted(), Expected(deployment=frozenset({contract.METRIC_CORRUPT_LOCK_ITEM}), lines=(line,))


def paused(h: Harness) -> tuple[Emitted, Expected]:
    # an operator paused the job: the first racer records the slot MISSED (paused), the next loses
    assert pause(h.racer(), reason="maintenance", requested_by=OPERATOR).changed
    first, second = h.invoke("req-B"), h.invoke("req-C")
    assert (first["status"], first["reason"], second["status"], second["reason"]) == (
        "missed",
        "paused",
        "lost",
        "paused",
    )
    return h.emitted(), Expected(lines=(missed(h.slot, "paused"), lost("paused")), missed=((h.slot.iso, "paused"),))


def lost_busy(h: Harness) -> tuple[Emitted, Expected]:
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
    return h.emitted(), Expected(lines=(lost("busy", generation=3),))


def rerun_commits(h: Harness) -> tuple[Emitted, Expected]:
    # an operator re-runs a past slot (generation 2): the commit's measurements, but no LastSuccessAgeS (a
    # re-run's success must not hide that the live schedule stopped succeeding)
    past = Slot(h.slot.epoch_s - 600)
    racer = h.racer()
    request_generation(racer.context, past, run_id="r1", kind="rerun", requested_by=OPERATOR, reason="test")
    result = h.invoke("req-A", past, generation=2)
    assert (result["status"], result["generation"]) == ("succeeded", 2)
    return h.emitted(), Expected(job=JOB_MEASUREMENTS, lines=({**WIN_LINE, "generation": 2},))


#: The capacity semaphore's measurements (deployment-wide, once per permit taken; not counts of 1).
SEMAPHORE_METRICS = frozenset({contract.METRIC_PERMITS_IN_USE, contract.METRIC_PERMIT_WAIT_MS})


def _capacity_on(h: Harness, permits: int) -> Semaphore:
    """The deployment's capacity budget on (the catalog's numbers), its semaphore named after the job (the wiring:
    scenarios never share one)."""
    h.with_capacity(permits=permits, manual_headroom=0)
    h.setenv(contract.ENV_CAPACITY_SEMAPHORE_NAME, f"{h.job}-budget")
    return Semaphore(h.lock_table, f"{h.job}-budget", permits, client=h.ddb)


def capacity_permit_taken(h: Harness) -> tuple[Emitted, Expected]:
    # the budget on: the winner takes a free permit, records its query on it and gives it back in the commit; the
    # semaphore's two measurements are deployment-wide (never per job)
    semaphore = _capacity_on(h, 3)
    assert h.invoke("req-A")["status"] == "succeeded"
    permits, _ = semaphore.read()
    assert all(permit.free for permit in permits)  # given back in the commit transaction
    line = {**WIN_LINE, "permit": "free", "permit_wait_ms": 0}
    return h.emitted(), Expected(job=WIN_METRICS, deployment=SEMAPHORE_METRICS, lines=(line,))


def capacity_missed(h: Harness) -> tuple[Emitted, Expected]:
    # the one permit is held by another job's live query; the slot may not wait in place and a comeback an hour later
    # would be past its maximum age (30 min), while this invocation cannot last that long: the winner finishes it
    # MISSED "capacity" at its last chance (fenced, once); no query, no metric. (No clock decides: robust under load.)
    semaphore = _capacity_on(h, 1)
    h.with_capacity(wait_in_place_s=0, retry_delay_s=3600)
    other = PermitOwner("other-job", h.slot)
    assert semaphore.try_acquire(other, 1, int(time.time() * 1000) + 600_000).acquired
    result = h.invoke("req-A")
    assert (result["status"], result["reason"], result["queries_started"]) == ("missed", "capacity", 0)
    line = {
        "outcome": "missed",
        "reason": "capacity",
        "lease_acquired": True,
        "queries_started": 0,
        "missed_slot": h.slot.iso,
        "missed_reason": "capacity",
        "permit": ABSENT,
        "permit_wait_ms": 0,
    }
    return h.emitted(), Expected(lines=(line,), missed=((h.slot.iso, "capacity"),))


def capacity_query_unreadable(h: Harness) -> tuple[Emitted, Expected]:
    # issue 31: the one permit expired naming another deployment's query, which this role may not read (Athena answers
    # AccessDeniedException): not reclaimable now, so the winner waits (0 s in place here) and gives the slot back;
    # the unreadable query is a field of the outcome line, never a metric, never a FAILED record or a Lambda error
    from athena_refresh.errors import QueryEngineError

    semaphore = _capacity_on(h, 1)
    h.with_capacity(wait_in_place_s=0, retry_delay_s=120)  # back well before the slot's maximum age
    now_ms = int(time.time() * 1000)
    earlier = Semaphore(h.lock_table, f"{h.job}-budget", 1, client=h.ddb, clock_ms=lambda: now_ms - 120_000)
    other = PermitOwner("other-deployment-job", h.slot)
    taken = earlier.try_acquire(other, 1, now_ms - 60_000)  # its expiry has passed by the system clock
    earlier.record_query(taken, "other-deployment-query")  # type: ignore[arg-type]
    engine = h.engine

    def get_query(query_execution_id: str) -> Any:
        if query_execution_id == "other-deployment-query":
            message = "AccessDeniedException: not authorized to perform athena:GetQueryExecution on workgroup/other"
            raise QueryEngineError("GetQueryExecution", message, retryable=False, error_code="AccessDeniedException")
        return type(engine).get_query(engine, query_execution_id)

    engine.get_query = get_query
    deferred: list[str] = []
    h.use(deferral=lambda _s, _c: _Deferral(deferred))
    result = h.invoke("req-A")
    assert (result["status"], result["reason"], result["queries_started"]) == ("deferred", "capacity", 0), result
    assert len(deferred) == 1 and semaphore.read()[0][0].owner == other.id  # still counted: not reclaimed
    line = {
        "outcome": "deferred",
        "reason": "capacity",
        "lease_acquired": True,
        "queries_started": 0,
        "permit": ABSENT,
        "capacity_deferrals": 1,
        "permit_queries_unreadable": 1,
    }
    return h.emitted(), Expected(lines=(line,))


@dataclass
class _Deferral:
    """A capacity deferral that records the keys of the re-invocations it arranged."""

    keys: list[str]

    def defer(self, event: Mapping[str, Any], *, at_ms: int, key: str) -> str:
        self.keys.append(key)
        return f"schedule-{len(self.keys)}"


SCENARIOS: dict[str, Callable[[Harness], tuple[Emitted, Expected]]] = {
    "win_and_commit": win_and_commit,
    "threshold_exceeded": threshold_exceeded,
    "lost_slot_finished": lost_slot_finished,
    "lost_held": lost_held,
    "overrun": overrun,
    "lost_superseded": lost_superseded,
    "lost_conflict": lost_conflict,
    "lost_unavailable": lost_unavailable,
    "too_old": too_old,
    "missed_superseded": missed_superseded,
    "missed_capacity_superseded": missed_capacity_superseded,
    "takeover_adopts_query": takeover_adopts_query,
    "stale_rejected": stale_rejected,
    "lease_lost": lease_lost,
    "query_failed": query_failed,
    "corrupt_lock_item": corrupt_lock_item,
    "unsupported_schema_version": unsupported_schema_version,
    "results_contradict_the_lock": results_contradict_the_lock,
    "paused": paused,
    "lost_busy": lost_busy,
    "rerun_commits": rerun_commits,
    "capacity_permit_taken": capacity_permit_taken,
    "capacity_missed": capacity_missed,
    "capacity_query_unreadable": capacity_query_unreadable,
}


# ---------------------------------------------------------------------------------------------------
# fixtures
# ---------------------------------------------------------------------------------------------------
class _CurrentStdout:
    """A stream that writes to the current ``sys.stdout`` (capsys swaps it between test phases)."""

    def write(self, text: str) -> int:
        import sys

        return sys.stdout.write(text)

    def flush(self) -> None:
        import sys

        sys.stdout.flush()


@pytest.fixture
def harness(
    monkeypatch: pytest.MonkeyPatch,
    aws_resources: dict[str, str],
    ddb: Any,
    make_engine: Any,
    make_context: Any,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> Iterator[Callable[[str], Harness]]:
    """``harness(job)``: sets the function's environment for ``job`` and writes its job catalog (values: flights and
    delay by origin, at most 2 series, so the default three origins also drop one; the alarm thresholds derived, far
    above the fake engine's statistics) and returns a :class:`Harness`. The Powertools log lines go to capsys too."""
    import json

    handler = service.logger.registered_handler
    previous = handler.stream
    handler.stream = _CurrentStdout()  # plain assignment: setStream() would flush the old stream

    def read() -> list[dict[str, Any]]:
        return [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]

    def make(job: str) -> Harness:
        catalog_path = tmp_path / job / "job_catalog.json"
        catalog_path.parent.mkdir()

        written: dict[str, Any] = {"changes": {}, "capacity": None}

        def with_capacity(**numbers: Any) -> None:
            """(Re)write the job's catalog with its capacity budget's ``numbers`` changed (from the budget off)."""
            budget = written["capacity"] or CapacityBudget()
            written["capacity"] = CapacityBudget(**{**budget.as_raw(), **numbers})
            with_spec(**written["changes"])

        def with_spec(**changes: Any) -> None:
            """(Re)write the job's catalog: its spec with ``changes`` (one racer: no losers in the cost estimate) and
            the capacity budget set so far (none: off)."""
            written["changes"] = changes
            spec = spec_of(
                **{
                    "job_name": job,
                    "schedule_expression": "cron(0/30 * * * ? *)",
                    "racers": 1,
                    "lease_duration_s": 45,
                    "heartbeat_interval_s": 15,
                    "max_slot_age_s": 1800,
                    "window_s": 86_400,
                    "data_year": 2013,
                    "database": "flights_demo",
                    "table": "flights",
                    "workgroup": "athena-refresh",
                    "sql": SQL,
                    "value_metrics": {
                        "columns": ["flights", "avg_dep_delay_min"],
                        "dimensions": ["origin"],
                        "max_series": 2,
                    },
                    "per_job_metrics": True,  # the job's own metrics are opt-in (issue 35): these tests pin them
                    **changes,
                }
            )
            write_catalog(catalog_path, {job: CatalogQuery(SQL, spec=spec)}, capacity=written["capacity"])

        with_spec()
        env = {
            contract.ENV_JOB_NAME: job,
            contract.ENV_LOCK_TABLE_NAME: aws_resources["lock_table"],
            contract.ENV_RESULTS_TABLE_NAME: aws_resources["results_table"],
            contract.ENV_RESULTS_BUCKET_NAME: aws_resources["bucket"],
            contract.ENV_ATHENA_WORKGROUP: "athena-refresh",
            contract.ENV_ATHENA_DATABASE: "flights_demo",
            contract.ENV_JOB_CATALOG_PATH: str(catalog_path),
        }
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        read()  # start from an empty capture
        return Harness(
            job, ddb, aws_resources, make_engine, make_context, read, monkeypatch.setenv, with_spec, with_capacity
        )

    yield make
    handler.stream = previous


def _run(name: str, harness: Callable[[str], Harness]) -> tuple[Emitted, Expected]:
    return SCENARIOS[name](harness(f"job-{name.replace('_', '-')}"))


#: What each scenario emitted on moto, once its own test passed: the union test reads it instead of running every
#: scenario a second time (it runs what is missing, e.g. under ``-k``).
EMITTED_ON_MOTO: dict[str, Emitted] = {}


def _mismatches(line: Mapping[str, Any], expected: Mapping[str, Any]) -> dict[str, Any]:
    """The expected fields the line does not match: ``{field: (expected, found)}``."""
    wrong = {}
    for key, want in expected.items():
        if want is PRESENT:
            ok = line.get(key) is not None
        elif want is ABSENT:
            ok = key not in line
        else:
            ok = key in line and line[key] == want
        if not ok:
            wrong[key] = ("<present>" if want is PRESENT else "<absent>" if want is ABSENT else want, line.get(key))
    return wrong


# ---------------------------------------------------------------------------------------------------
# tests
# ---------------------------------------------------------------------------------------------------
def test_a_job_that_does_not_opt_in_sends_no_metric_of_its_own_and_logs_the_same_facts(
    harness: Callable[[str], Harness], backend: str
) -> None:
    # GIVEN a job without per_job_metrics (the default since issue 35) whose slot commits above a threshold
    h = harness("job-opted-out")
    h.with_spec(
        per_job_metrics=False, alarms={"data_scanned_bytes": SCANNED_BYTES - 1, "query_duration_ms": DURATION_MS}
    )
    # WHEN it wins and commits
    assert h.invoke("req-A")["status"] == "succeeded"
    emitted = h.emitted()
    # THEN no per-job metric (no blob with the job dimension), the deployment-wide count still, and the same line:
    # bytes scanned, duration and the estimated cost are its fields
    assert emitted.job_metrics == frozenset()
    assert emitted.deployment_counts == Counter({contract.METRIC_THRESHOLD_EXCEEDED: 1})
    [line] = emitted.lines
    expected = {**WIN_LINE, "threshold_exceeded": contract.METRIC_DATA_SCANNED_BYTES}
    assert _mismatches(line, expected) == {}, line


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_each_outcome_emits_exactly_its_metrics_and_logs_its_facts(
    name: str, harness: Callable[[str], Harness], backend: str
) -> None:
    job = f"job-{name.replace('_', '-')}"
    emitted, expected = _run(name, harness)

    # the per-job metrics: one blob at most per invocation, dimensions service + job, names of JOB_METRICS only
    assert emitted.job_metrics == expected.job
    # the deployment-wide counts: one blob each (dimension service only, no job), value 1
    assert emitted.deployment_counts == Counter(expected.deployment)
    for blob in emitted.of(contract.METRICS_NAMESPACE):
        dims = emitted.dimension_sets(blob)
        assert dims in ([sorted([contract.DIMENSION_SERVICE, contract.DIMENSION_JOB])], [[contract.DIMENSION_SERVICE]])
        assert blob[contract.DIMENSION_SERVICE] == contract.SERVICE_NAME
        if dims == [[contract.DIMENSION_SERVICE]]:
            [metric] = emitted.names(blob)
            assert (
                metric in contract.DEPLOYMENT_METRICS
                and (blob[metric] in (1, [1]) or metric in SEMAPHORE_METRICS)
                and contract.DIMENSION_JOB not in blob
            )
        else:
            assert blob[contract.DIMENSION_JOB] == job and set(emitted.names(blob)) <= set(contract.JOB_METRICS)
    # nothing else in the operational namespace (no former metric, no ColdStart)
    names = {n for b in emitted.of(contract.METRICS_NAMESPACE) for n in emitted.names(b)}
    assert names <= set(contract.ALL_METRICS)

    # one outcome line per invocation, with the expected facts
    assert len(emitted.lines) == len(expected.lines), emitted.lines
    for line, fields in zip(emitted.lines, expected.lines):
        assert line["job"] == job and line["message"].startswith(f"slot {line['slot']}: {line['outcome']}")
        assert _mismatches(line, fields) == {}, line
        level = (
            "ERROR"
            if line["outcome"] in ("corrupt", "unsupported_schema")
            else "INFO"
            if line["outcome"] in ("succeeded", "lost", "deferred")  # deferred: not an error (observability.md)
            else "WARNING"
        )
        assert line["level"] == level
    assert emitted.missed == list(expected.missed)

    # the value metrics (their own namespace, dimensions job + the dimension columns) exactly when a result was
    # committed
    for blob in emitted.of(contract.VALUES_NAMESPACE):
        assert blob["_aws"]["CloudWatchMetrics"][0]["Dimensions"] == [[contract.DIMENSION_JOB, "origin"]]
    assert bool(emitted.of(contract.VALUES_NAMESPACE)) == any(line.get("rows_stored") for line in emitted.lines)
    if backend == "moto":
        EMITTED_ON_MOTO[name] = emitted


@pytest.mark.backends("moto")  # the scenarios already ran on both backends above
def test_the_outcomes_together_emit_every_contract_metric_and_log_every_reason(
    harness: Callable[[str], Harness],
) -> None:
    job_metrics: set[str] = set()
    deployment: set[str] = set()
    lost_reasons: set[str] = set()
    missed_reasons: set[str] = set()
    for name, scenario in SCENARIOS.items():
        emitted = EMITTED_ON_MOTO.get(name) or scenario(harness(f"union-{name.replace('_', '-')}"))[0]
        job_metrics |= emitted.job_metrics
        deployment |= set(emitted.deployment_counts)
        lost_reasons |= {line["reason"] for line in emitted.lines if line["outcome"] == "lost"}
        missed_reasons |= {reason for _, reason in emitted.missed}

    assert job_metrics == set(contract.JOB_METRICS)
    assert deployment == set(contract.DEPLOYMENT_METRICS)
    assert set(contract.ALL_METRICS) == set(contract.JOB_METRICS) | set(contract.DEPLOYMENT_METRICS)
    assert lost_reasons == set(contract.LOSS_REASONS)
    assert missed_reasons == set(contract.MISSED_REASONS)
