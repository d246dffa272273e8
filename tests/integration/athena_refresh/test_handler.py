"""The real Lambda entry point (``athena_refresh.handler.make_handler``: the deployed decorators), end to end on moto.

Configuration comes from environment variables (monkeypatch), the query engine is a scripted fake
passed in the handler's deps (``make_handler(handler_deps)``: ``Deps.from_settings(settings, engine=...)``),
everything else is the production code path: Powertools decorators, ``Settings.from_env``, the cached
dependencies (their boto3 clients are created inside ``mock_aws``), the slot lock with the system clock, the
results store. EMF metrics and JSON logs
are read from stdout (capsys).
"""

from __future__ import annotations

import datetime as dt
import json
import sys
import time
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from athena_refresh import contract, service
from athena_refresh.budget import CapacityBudget
from athena_refresh.catalog import CatalogError, CatalogQuery, catalog_document, write_catalog
from athena_refresh.errors import ConfigurationError, QueryTimeoutError
from athena_refresh.job_defaults import spec_of
from athena_refresh.jobspec import JobSpec, ValueMetricsSpec
from athena_refresh.settings import Settings
from slotlock import InvalidEventError, Slot, SlotLock

JOB = "flights-dashboard"
LEASE, HEARTBEAT = contract.ENV_LEASE_DURATION_S, contract.ENV_HEARTBEAT_INTERVAL_S
#: The job's spec as the stack writes it into the job catalog (one racer: the inline form's cost estimate).
SPEC_KEYS: dict[str, Any] = {
    "job_name": JOB,
    "schedule_expression": "cron(0/30 * * * ? *)",
    "racers": 1,
    "lease_duration_s": 45,
    "heartbeat_interval_s": 15,
    "max_slot_age_s": 1800,
    "history_ttl_s": 2_592_000,
    "max_query_attempts": 3,
    "window_s": 86_400,
    "data_year": 2013,
    "database": "flights_demo",
    "table": "flights",
    "workgroup": "athena-refresh",
    "sql": "SELECT origin, count(*) AS flights FROM flights WHERE t >= ? AND t < ? GROUP BY 1",
    "value_metrics": ValueMetricsSpec(columns=("flights", "avg_dep_delay_min"), dimensions=("origin",), max_series=10),
    "result_reuse_max_age_min": 0,
    "max_slot_lead_s": 5,
    "bytes_scanned_cutoff_per_query": 10_000_000_000,
    # above the fake engine's statistics (7 MiB, 910 ms): no threshold exceeded unless a test lowers one
    "alarms": {"data_scanned_bytes": 2**30, "query_duration_ms": 600_000},
    "per_job_metrics": True,  # opt-in since issue 35; these tests pin the metrics (test_emitted_metrics: opted out)
}


def job_spec(**changes: Any) -> JobSpec:
    """The handler tests' job (SPEC_KEYS) with ``changes``."""
    return spec_of(**{**SPEC_KEYS, **changes})


#: The deployment's capacity budget as the stack writes it into the catalog: off here
#: (tests/integration/athena_refresh/test_capacity.py turns it on).
BUDGET_OFF = CapacityBudget(
    permits=0, wait_in_place_s=60, manual_headroom=2, retry_delay_s=120, max_query_active_s=1800
)


def write_job_catalog(path: Path, spec: JobSpec) -> Path:
    """The job catalog the stack bundles for ``spec``, its query bound to the window's start and end, and the
    deployment's capacity budget (off)."""
    return write_catalog(path, {spec.job_name: CatalogQuery(spec.sql, spec=spec)}, capacity=BUDGET_OFF)


# Powertools warns when an invocation flushes no buffered metric: expected when the handler raises before
# the run, and for a loser or a failed run on a fresh table (there is no last success to report yet).
pytestmark = [
    pytest.mark.filterwarnings("ignore:No application metrics to publish:UserWarning"),
    pytest.mark.usefixtures("fresh_powertools_state"),  # every test is a new execution environment
    pytest.mark.backends("moto", "dynamodb-local"),
]


_CURRENT_SLOT: Slot | None = None


@pytest.fixture(autouse=True)
def _one_current_slot_per_test() -> Iterator[None]:
    """Fix "now" once per test, so a test that crosses a minute boundary still means one slot."""
    global _CURRENT_SLOT
    _CURRENT_SLOT = Slot(int(time.time()) - 5)
    yield
    _CURRENT_SLOT = None


def current_slot() -> Slot:
    """A slot scheduled a few seconds ago (the lock runs on the system clock here; max slot age applies),
    the same one for the whole test."""
    return _CURRENT_SLOT if _CURRENT_SLOT is not None else Slot(int(time.time()) - 5)


def scheduler_event(slot: Slot) -> dict[str, Any]:
    """EventBridge Scheduler target input: ``{"scheduled_time": "<aws.scheduler.scheduled-time>"}``."""
    return {"scheduled_time": slot.iso}


def rule_event(slot: Slot) -> dict[str, Any]:
    """A scheduled rule's event (the shape EventBridge sends to a rule target)."""
    return {
        "version": "0",
        "id": "53dc4d37-cffa-4f76-80c9-8b7d4a4d2eaa",
        "detail-type": "Scheduled Event",
        "source": "aws.events",
        "account": "123456789012",
        "time": slot.iso,
        "region": "us-east-1",
        "resources": ["arn:aws:events:us-east-1:123456789012:rule/athena-refresh-racer-2"],
        "detail": {},
    }


# ---------------------------------------------------------------------------------------------------
# fixtures
# ---------------------------------------------------------------------------------------------------


@pytest.fixture
def handler_env(monkeypatch: pytest.MonkeyPatch, aws_resources: dict[str, str], tmp_path: Path) -> dict[str, str]:
    """Every variable the stack sets, pointing at the (moto) tables and bucket, and the job catalog with the job's
    spec (``JOB_CATALOG_PATH``: the asset's bundled catalog in a deployment)."""
    values = {
        contract.ENV_JOB_NAME: JOB,
        contract.ENV_LOCK_TABLE_NAME: aws_resources["lock_table"],
        contract.ENV_RESULTS_TABLE_NAME: aws_resources["results_table"],
        contract.ENV_RESULTS_BUCKET_NAME: aws_resources["bucket"],
        contract.ENV_ATHENA_WORKGROUP: "athena-refresh",
        contract.ENV_ATHENA_DATABASE: "flights_demo",
        contract.ENV_ATHENA_CATALOG: "AwsDataCatalog",
        contract.ENV_JOB_CATALOG_PATH: str(write_job_catalog(tmp_path / "job_catalog.json", job_spec())),
        # the capacity budget's wiring (its numbers, off here, are in the catalog: BUDGET_OFF)
        contract.ENV_CAPACITY_SEMAPHORE_NAME: "123456789012-us-east-1",
        contract.ENV_CAPACITY_TABLE_NAME: "",  # the lock table
        contract.ENV_DEFERRAL_ROLE_ARN: "arn:aws:iam::123456789012:role/job-scheduler",
        contract.ENV_DEFERRAL_SCHEDULE_GROUP: "default",
        contract.ENV_DEFERRAL_SCHEDULE_PREFIX: "sar-0123456789ab-",
    }
    assert set(values) == set(contract.STACK_ENV_VARS) | {contract.ENV_JOB_CATALOG_PATH}  # the job: in the catalog
    for key, value in values.items():
        monkeypatch.setenv(key, value)
    return values


@pytest.fixture
def engines(make_engine: Any, handler_deps: Any) -> list[Any]:
    """Give the handler's deps a fake engine factory (``Deps.from_settings(settings, engine=FakeEngine())``).

    Queries succeed at the first poll (the real job sleeps for real between polls). Every engine the
    service builds is appended here, so a test can see whether one was even built.
    """
    built: list[Any] = []

    def factory(settings: Any) -> Any:
        engine = make_engine([["SUCCEEDED"]] * 5)
        built.append(engine)
        return engine

    handler_deps.engine_factory = factory
    return built


@pytest.fixture
def handler_session(aws: None, monkeypatch: pytest.MonkeyPatch) -> boto3.session.Session:
    """boto3's default session, fresh for the test: the handler builds its clients from it."""
    session = boto3.session.Session(region_name="us-east-1")
    monkeypatch.setattr(boto3, "DEFAULT_SESSION", session)
    return session


@pytest.fixture
def handler_ddb_requests(handler_session: boto3.session.Session) -> list[str]:
    """DynamoDB requests sent by the clients the handler builds."""
    sent: list[str] = []
    handler_session.events.register("before-call.dynamodb", lambda model, **_: sent.append(model.name))
    return sent


@pytest.fixture
def handler_requests(handler_session: boto3.session.Session) -> list[str]:
    """Every AWS request (any service: DynamoDB, S3, Athena, ...) the handler's clients send, ``service.Operation``."""
    sent: list[str] = []
    handler_session.events.register(
        "before-call", lambda model, **_: sent.append(f"{model.service_model.service_name}.{model.name}")
    )
    return sent


class _CurrentStdout:
    """A stream that writes to the current ``sys.stdout`` (capsys swaps it between test phases)."""

    def write(self, text: str) -> int:
        return sys.stdout.write(text)

    def flush(self) -> None:
        sys.stdout.flush()


@pytest.fixture
def stdout_json(capsys: pytest.CaptureFixture[str]) -> Iterator[Callable[[], list[dict[str, Any]]]]:
    """``stdout_json()``: every JSON line printed so far (EMF blobs and Powertools log records).

    EMF is printed to the current sys.stdout; the Powertools log handler bound its stream at import, so
    for the test it writes to whatever sys.stdout is at the time of each record (capsys' during the call).
    """
    handler = service.logger.registered_handler
    previous = handler.stream
    handler.stream = _CurrentStdout()  # plain assignment: setStream() would flush the old stream

    def read() -> list[dict[str, Any]]:
        lines = capsys.readouterr().out.splitlines()
        return [json.loads(line) for line in lines if line.startswith("{")]

    yield read
    handler.stream = previous


@pytest.fixture
def invoke(
    handler_env: dict[str, str],
    engines: list[Any],
    handler_ddb_requests: list[str],
    make_context: Any,
    lambda_handler: Any,
) -> Callable[..., dict[str, Any]]:
    """``invoke(event, request_id)``: one Lambda invocation of the real handler."""

    def call(event: Any, request_id: str = "req-1") -> dict[str, Any]:
        return lambda_handler(event, make_context(request_id, on_fake_clock=False))

    return call


def emf_blobs(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in records if "_aws" in r]


def metric_names(blob: dict[str, Any]) -> list[str]:
    return [m["Name"] for d in blob["_aws"]["CloudWatchMetrics"] for m in d["Metrics"]]


def dimensions(blob: dict[str, Any]) -> list[list[str]]:
    """The blob's dimension sets, each sorted (EMF's order carries no meaning)."""
    return [sorted(dims) for d in blob["_aws"]["CloudWatchMetrics"] for dims in d["Dimensions"]]


#: The dimension set of the per-job metrics, sorted.
JOB_DIMENSIONS = sorted([contract.DIMENSION_SERVICE, contract.DIMENSION_JOB])


def emitted(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Metric name -> the EMF blob that carries it."""
    return {name: blob for blob in emf_blobs(records) for name in metric_names(blob)}


def log_records(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in records if "_aws" not in r and "message" in r]


def outcome_line(records: list[dict[str, Any]]) -> dict[str, Any]:
    """The invocation's one structured line, ``slot <iso>: <outcome>``."""
    [line] = [r for r in log_records(records) if "outcome" in r and r["message"].startswith("slot ")]
    return line


@pytest.fixture
def take_lease_elsewhere(ddb: Any, lock_table: str) -> Callable[[Slot, str], None]:
    """``take_lease_elsewhere(slot, owner)``: another racer (its own Lambda and client) wins the slot and
    is still running. Its requests are not counted as the handler's."""

    def take(slot: Slot, owner: str) -> None:
        lock = SlotLock(lock_table, JOB, client=ddb, lease_duration_s=45, heartbeat_interval_s=15)
        assert lock.try_acquire(slot, owner).acquired

    return take


# ---------------------------------------------------------------------------------------------------
# event shapes, winners and losers
# ---------------------------------------------------------------------------------------------------


def test_scheduler_input_and_scheduled_rule_event_name_the_same_slot(
    invoke: Any, engines: list[Any], store: Any, lock_table: str
) -> None:
    # GIVEN one scheduled time, delivered to one racer by Scheduler and to another by a rule
    slot = current_slot()

    # WHEN the Scheduler-shaped delivery runs first, then the rule-shaped one
    first = invoke(scheduler_event(slot), "req-scheduler")
    second = invoke(rule_event(slot), "req-rule")

    # THEN both name the same slot: the first ran it, the second found it finished
    assert (first["status"], first["slot"], first["fencing_token"]) == ("succeeded", slot.iso, 1)
    assert (second["status"], second["reason"], second["slot"]) == ("lost", "slot_finished", slot.iso)
    assert first["queries_started"] == 1 and second["queries_started"] == 0
    assert [r["slot"] for r in store.list_results(JOB)] == [slot.iso]
    assert len(engines) == 1 and engines[0].call_names == ["start_query", "get_query", "get_results"]


@pytest.mark.parametrize("shape", [scheduler_event, rule_event], ids=["scheduler", "rule"])
def test_each_event_shape_runs_the_slot(shape: Callable[[Slot], dict[str, Any]], invoke: Any, store: Any) -> None:
    # GIVEN a fresh slot, delivered in one of the two shapes
    slot = current_slot()
    # WHEN the handler runs
    result = invoke(shape(slot))
    # THEN it ran the slot and stored the result
    assert (result["status"], result["slot"], result["job_name"], result["owner_id"]) == (
        "succeeded",
        slot.iso,
        JOB,
        "req-1",
    )
    stored = store.get_result(JOB, slot.iso)
    assert stored is not None and stored["fencing_token"] == 1 and len(stored["rows"]) == 3
    json.dumps(result)  # the Lambda response must be JSON-serialisable


def test_seconds_in_the_scheduled_time_are_floored_to_the_minute(invoke: Any) -> None:
    # GIVEN a scheduled time with seconds and milliseconds (cron granularity is one minute)
    slot = current_slot()
    noisy = (slot.datetime + dt.timedelta(seconds=37)).strftime("%Y-%m-%dT%H:%M:%S.123+00:00")
    # WHEN / THEN the slot is that minute
    assert invoke({"scheduled_time": noisy})["slot"] == slot.iso


def test_loser_returns_lost_with_a_reason_and_does_not_raise(
    invoke: Any, engines: list[Any], handler_ddb_requests: list[str], store: Any, take_lease_elsewhere: Any
) -> None:
    # GIVEN another racer holds this slot's lease
    slot = current_slot()
    take_lease_elsewhere(slot, "req-winner")

    # WHEN this racer's delivery runs
    result = invoke(rule_event(slot), "req-loser")

    # THEN it returns normally with the reason and the holder, after one DynamoDB request
    assert (result["status"], result["reason"], result["fencing_token"]) == ("lost", "held", None)
    assert result["details"]["holder_owner_id"] == "req-winner"
    assert handler_ddb_requests == ["UpdateItem"]
    assert all(engine.calls == [] for engine in engines)
    assert store.list_results(JOB) == []


def test_large_event_with_junk_fields_but_a_valid_time_runs(invoke: Any) -> None:
    # GIVEN a 1 MB event (Lambda's async payload limit): a valid scheduled time among unknown fields,
    # one of them a 1,000,000-character string, others nested or named like the rule event's fields
    slot = current_slot()
    event: dict[str, Any] = {"scheduled_time": slot.iso, "junk": "x" * 1_000_000, "detail": {"time": "never"}}
    event.update({f"field_{i}": {"nested": [i, None, True, "ü"]} for i in range(1_000)})
    assert len(json.dumps(event)) > 1_000_000

    # WHEN / THEN it is ignored apart from the time
    result = invoke(event)
    assert (result["status"], result["slot"]) == ("succeeded", slot.iso)


# ---------------------------------------------------------------------------------------------------
# rejected before any request
# ---------------------------------------------------------------------------------------------------


@pytest.mark.backends("moto")  # refused before any request
@pytest.mark.parametrize(
    ("event", "field"),
    [
        ({}, "scheduled_time"),
        ({"detail-type": "Scheduled Event", "source": "aws.events", "detail": {}}, "time"),
        ({"scheduled_time": "half past midnight"}, "scheduled_time"),
        ({"scheduled_time": "2026-13-45T00:30:00Z"}, "scheduled_time"),
        ({"scheduled_time": ""}, "scheduled_time"),
        ({"scheduled_time": "2026-11-22T00:30:00"}, "scheduled_time"),  # naive: no time zone
        ({"scheduled_time": 1_795_307_400}, "scheduled_time"),  # wrong type
        ({"scheduled_time": None}, "scheduled_time"),
        ({"scheduled_time": ["2026-11-22T00:30:00Z"]}, "scheduled_time"),
        ({"scheduled_time": "2026-11-22T00:30:00Z" + " " * 100}, "scheduled_time"),  # too long
        ({"scheduled_time": "1970-01-01T00:00:00Z"}, "scheduled_time"),  # outside 2000..2099
        ({"detail-type": "Scheduled Event", "time": {"iso": "2026-11-22T00:30:00Z"}}, "time"),
        ({"scheduled_time": "2026-11-22T00:30:00Z" + "x" * 1_000_000}, "scheduled_time"),  # 1 MB string
        ({"detail-type": "Scheduled Event", "time": "9" * 1_000_000}, "time"),
        ({"scheduled_time": "2026-11-22T00:30:00Z\x00"}, "scheduled_time"),  # NUL byte
        ({"scheduled_time": "\uff12\uff10\uff12\uff16-11-22T00:30:00Z"}, "scheduled_time"),  # full-width digits
        ({"scheduled_time": "2026-11-22T00:30:00+24:00"}, "scheduled_time"),  # impossible offset
        ({"scheduled_time": True}, "scheduled_time"),
        ([], "<event>"),
        ("2026-11-22T00:30:00Z", "<event>"),
        (None, "<event>"),
        (42, "<event>"),
    ],
    ids=[
        "empty",
        "rule-without-time",
        "unparseable",
        "impossible-date",
        "empty-string",
        "naive",
        "number",
        "null",
        "list",
        "too-long",
        "1970",
        "rule-time-object",
        "1mb-time",
        "1mb-rule-time",
        "nul-byte",
        "full-width",
        "offset-24h",
        "bool",
        "list-event",
        "string-event",
        "null-event",
        "number-event",
    ],
)
def test_malformed_event_raises_naming_the_field_before_any_request(
    event: Any,
    field: str,
    invoke: Any,
    handler_requests: list[str],
    engines: list[Any],
    scan: Any,
    aws_resources: dict[str, str],
) -> None:
    # WHEN a malformed event arrives
    with pytest.raises(InvalidEventError) as info:
        invoke(event)

    # THEN the error names the field (its message stays short whatever the payload), no AWS request of any
    # service was sent, no engine built, nothing stored. Lambda's two async retries repeat no request either.
    assert info.value.field == field
    assert len(str(info.value)) < 300
    assert handler_requests == []
    assert engines == []
    assert scan(aws_resources["lock_table"]) == [] and scan(aws_resources["results_table"]) == []


@pytest.mark.backends("moto")  # refused before any request
@pytest.mark.parametrize(
    ("changes", "key"),
    [
        ({contract.ENV_LOCK_TABLE_NAME: None}, contract.ENV_LOCK_TABLE_NAME),
        ({LEASE: "20", HEARTBEAT: "15"}, HEARTBEAT),
        ({LEASE: "30", HEARTBEAT: "15"}, HEARTBEAT),
        ({contract.ENV_QUERY_SQL: "SELECT 1 WHERE t >= ? AND t < ?"}, contract.ENV_QUERY_SQL),
        ({contract.ENV_WINDOW_S: "3600"}, contract.ENV_WINDOW_S),
        ({LEASE: "nan"}, LEASE),
        ({contract.ENV_RESULTS_TABLE_NAME: None}, contract.ENV_RESULTS_TABLE_NAME),
        ({contract.ENV_ATHENA_WORKGROUP: ""}, contract.ENV_ATHENA_WORKGROUP),
        ({LEASE: "45s"}, LEASE),
        ({HEARTBEAT: "fifteen"}, HEARTBEAT),
        ({LEASE: "10", HEARTBEAT: "15"}, HEARTBEAT),  # lease shorter than the heartbeat
        ({contract.ENV_MAX_QUERY_ATTEMPTS: "0"}, contract.ENV_MAX_QUERY_ATTEMPTS),
        ({contract.ENV_MAX_QUERY_ATTEMPTS: "2.5"}, contract.ENV_MAX_QUERY_ATTEMPTS),
        ({contract.ENV_QUERY_SQL: "SELECT 1 WHERE t >= ?"}, contract.ENV_QUERY_SQL),
        ({contract.ENV_JOB_NAME: "flights#dashboard"}, contract.ENV_JOB_NAME),
    ],
    ids=[
        "no-lock-table",
        "lease-below-2x-heartbeat",
        "lease-equal-2x-heartbeat",
        "inline-sql-beside-the-catalog",
        "job-setting-beside-the-catalog",
        "nan-lease",
        "no-results-table",
        "empty-workgroup",
        "lease-with-unit",
        "heartbeat-words",
        "lease-below-heartbeat",
        "zero-attempts",
        "fractional-attempts",
        "inline-sql-with-one-placeholder",
        "job-name-with-key-separator",
    ],
)
def test_bad_configuration_raises_naming_the_variable_before_any_request(
    changes: dict[str, str | None],
    key: str,
    invoke: Any,
    monkeypatch: pytest.MonkeyPatch,
    handler_requests: list[str],
    engines: list[Any],
    scan: Any,
    aws_resources: dict[str, str],
) -> None:
    # GIVEN a deployment with one configuration mistake
    for name, value in changes.items():
        if value is None:
            monkeypatch.delenv(name)
        else:
            monkeypatch.setenv(name, value)

    # WHEN a valid event arrives
    with pytest.raises(ConfigurationError) as info:
        invoke(scheduler_event(current_slot()))

    # THEN the variable is named and no AWS request of any service was sent, nothing built
    assert info.value.key == key and str(info.value).startswith(f"{key}: ")
    assert handler_requests == [] and engines == []
    assert scan(aws_resources["lock_table"]) == []


@pytest.mark.parametrize("ahead", ["one-day", "year-2099"])
def test_far_future_scheduled_time_is_refused_before_any_request(
    ahead: str,
    invoke: Any,
    handler_requests: list[str],
    engines: list[Any],
    scan: Any,
    aws_resources: dict[str, str],
) -> None:
    # GIVEN the job has history (the current slot ran)
    assert invoke(scheduler_event(current_slot()), "req-1")["status"] == "succeeded"
    before = [scan(aws_resources["lock_table"]), scan(aws_resources["results_table"])]
    handler_requests.clear()
    future = current_slot().datetime + dt.timedelta(days=1) if ahead == "one-day" else dt.datetime(2099, 6, 1)

    # WHEN a delivery scheduled far ahead arrives (hostile, or a mistyped manual invocation): acquiring it
    # would make every real slot lose as "superseded" until that time
    with pytest.raises(InvalidEventError) as info:
        invoke({"scheduled_time": future.strftime("%Y-%m-%dT%H:%M:00Z")}, "req-hostile")

    # THEN it is refused naming the field, before any AWS request, and nothing stored changed
    assert info.value.field == "scheduled_time" and "ahead of this caller's clock" in str(info.value)
    assert handler_requests == [] and all(engine.calls == engines[0].calls for engine in engines)
    assert [scan(aws_resources["lock_table"]), scan(aws_resources["results_table"])] == before


@pytest.fixture
def tamper_item(ddb: Any) -> Callable[[str, dict[str, Any], dict[str, Any]], None]:
    """``tamper_item(table, key, {attribute: DynamoDB JSON or None to remove})``: edit one item by hand."""

    def edit(table: str, key: dict[str, Any], changes: dict[str, Any]) -> None:
        item = ddb.get_item(TableName=table, Key=key, ConsistentRead=True)["Item"]
        for name, value in changes.items():
            item.pop(name, None) if value is None else item.__setitem__(name, value)
        ddb.put_item(TableName=table, Item=item)

    return edit


@pytest.mark.parametrize("tampered", ["lock-token-removed", "latest-token-above-the-counter"])
def test_a_tampered_item_is_reported_with_the_corrupt_lock_item_metric_and_not_retried(
    tampered: str,
    invoke: Any,
    tamper_item: Any,
    aws_resources: dict[str, str],
    scan: Any,
    stdout_json: Any,
) -> None:
    # GIVEN the previous minute's slot ran, then an item was edited by hand: the lock item lost its fencing
    # token (an ADD would restart the counter at 1), or the results' LATEST pointer names the coming slot with a
    # token above the lock's counter (only the same slot and generation compare tokens; a String token is
    # covered on DynamoDB Local by test_bad_input: moto judges that comparison differently)
    previous = Slot(current_slot().epoch_s - 60)
    assert invoke(scheduler_event(previous), "req-previous")["status"] == "succeeded"
    if tampered == "lock-token-removed":
        table, key = aws_resources["lock_table"], {"pk": {"S": f"lock#{JOB}"}}
        tamper_item(table, key, {"fencing_token": None})
        item_key, attribute = f"lock#{JOB}", "fencing_token"
    else:
        table, key = aws_resources["results_table"], {"job": {"S": JOB}, "slot": {"S": "LATEST"}}
        tamper_item(table, key, {"fencing_token": {"N": "99"}, "latest_slot": {"S": current_slot().iso}})
        item_key, attribute = f"{JOB}/LATEST", "fencing_token"
    results_before = scan(aws_resources["results_table"])
    lock_before = scan(aws_resources["lock_table"])
    stdout_json()  # drop the previous run's output

    # WHEN the current slot's racer runs
    result = invoke(scheduler_event(current_slot()), "req-A")
    records = stdout_json()

    # THEN it returns normally (a corrupt item cannot heal: no Lambda retry) with status "corrupt",
    # naming the item and the attribute
    assert (result["status"], result["reason"]) == ("corrupt", "corrupt_item")
    assert (result["details"]["item_key"], result["details"]["attribute"]) == (item_key, attribute)
    # AND the deployment-wide CorruptLockItem count is emitted once (EMF, Count, dimension service only: one
    # metric for every job), and nothing else; the ERROR line names the job, the slot, the item and the attribute
    [blob] = emf_blobs(records)
    assert metric_names(blob) == [contract.METRIC_CORRUPT_LOCK_ITEM]
    assert blob[contract.METRIC_CORRUPT_LOCK_ITEM] in (1, [1])
    assert {"Name": contract.METRIC_CORRUPT_LOCK_ITEM, "Unit": "Count"} in blob["_aws"]["CloudWatchMetrics"][0][
        "Metrics"
    ]
    assert dimensions(blob) == [[contract.DIMENSION_SERVICE]] and contract.DIMENSION_JOB not in blob
    assert blob[contract.DIMENSION_SERVICE] == contract.SERVICE_NAME
    [error] = [r for r in log_records(records) if r["level"] == "ERROR" and "corrupt" in r["message"]]
    assert (error["item_key"], error["attribute"], error["slot"]) == (item_key, attribute, current_slot().iso)
    assert (error["job"], error["outcome"]) == (JOB, "corrupt")
    # AND the results are untouched (the commit was refused as a whole); a corrupt lock item is untouched too
    assert scan(aws_resources["results_table"]) == results_before
    if tampered == "lock-token-removed":
        assert scan(aws_resources["lock_table"]) == lock_before and result["queries_started"] == 0


def test_a_lock_item_of_a_newer_table_layout_is_reported_and_not_retried_nor_called_corrupt(
    invoke: Any,
    tamper_item: Any,
    aws_resources: dict[str, str],
    scan: Any,
    stdout_json: Any,
    handler_ddb_requests: list[str],
    engines: list[Any],
) -> None:
    # GIVEN the previous minute's slot ran, then a newer slotlock rewrote the lock item (schema_version 2)
    previous = Slot(current_slot().epoch_s - 60)
    assert invoke(scheduler_event(previous), "req-previous")["status"] == "succeeded"
    tamper_item(aws_resources["lock_table"], {"pk": {"S": f"lock#{JOB}"}}, {"schema_version": {"N": "2"}})
    lock_before, results_before = scan(aws_resources["lock_table"]), scan(aws_resources["results_table"])
    calls_before = [list(engine.calls) for engine in engines]
    stdout_json()
    handler_ddb_requests.clear()

    # WHEN the current slot's racer runs
    result = invoke(scheduler_event(current_slot()), "req-A")
    records = stdout_json()

    # THEN it returns normally (no Lambda retry: every retry would meet the same item) with its own status, never
    # "corrupt" nor "lost", after its one acquisition request (the loser's ALL_OLD named the layout)
    assert (result["status"], result["reason"], result["queries_started"]) == (
        "unsupported_schema",
        "schema_version",
        0,
    )
    details = result["details"]
    assert (details["item_key"], details["schema_version_found"], details["schema_version_supported"]) == (
        f"lock#{JOB}",
        2,
        [1],
    )
    assert handler_ddb_requests == ["UpdateItem"]
    # AND one ERROR line names the job, the slot, the item and both versions; no CorruptLockItem count
    [error] = [r for r in log_records(records) if r["level"] == "ERROR"]
    assert (error["job"], error["slot"], error["outcome"], error["item_key"]) == (
        JOB,
        current_slot().iso,
        "unsupported_schema",
        f"lock#{JOB}",
    )
    assert "schema_version=2" in error["message"] and "reads and writes layout 1" in error["message"]
    assert contract.METRIC_CORRUPT_LOCK_ITEM not in emitted(records)
    # AND nothing was written nor queried: the newer item is left as it is
    assert scan(aws_resources["lock_table"]) == lock_before and scan(aws_resources["results_table"]) == results_before
    assert [list(engine.calls) for engine in engines] == calls_before


# ---------------------------------------------------------------------------------------------------
# observability
# ---------------------------------------------------------------------------------------------------


def test_winner_emits_its_three_job_metrics_in_one_blob(invoke: Any, stdout_json: Any) -> None:
    # WHEN a winner runs the slot
    result = invoke(scheduler_event(current_slot()))
    records = stdout_json()

    # THEN one EMF blob (namespace, dimensions service + job) carries exactly the three per-job metrics: the last
    # success's age (0: just now), and the committed slot's scanned bytes and query duration (the fake's statistics)
    assert result["status"] == "succeeded"
    [blob] = [
        b for b in emf_blobs(records) if b["_aws"]["CloudWatchMetrics"][0]["Namespace"] == contract.METRICS_NAMESPACE
    ]
    assert sorted(metric_names(blob)) == sorted(contract.JOB_METRICS)
    assert dimensions(blob) == [JOB_DIMENSIONS]
    assert (blob[contract.DIMENSION_SERVICE], blob[contract.DIMENSION_JOB]) == (contract.SERVICE_NAME, JOB)
    values = {name: blob[name] for name in contract.JOB_METRICS}  # Powertools prints values as lists
    assert values == {
        contract.METRIC_LAST_SUCCESS_AGE_S: [0.0],
        contract.METRIC_DATA_SCANNED_BYTES: [7_340_032.0],
        contract.METRIC_QUERY_DURATION_MS: [910.0],
    }
    units = {m["Name"]: m["Unit"] for m in blob["_aws"]["CloudWatchMetrics"][0]["Metrics"]}
    assert units == {
        contract.METRIC_LAST_SUCCESS_AGE_S: "Seconds",
        contract.METRIC_DATA_SCANNED_BYTES: "Bytes",
        contract.METRIC_QUERY_DURATION_MS: "Milliseconds",
    }
    # AND no other blob in the operational namespace: no deployment-wide count, no ColdStart (one more custom metric
    # per function; Powertools' cold_start log key says it), no former metric; the value metrics are their own
    others = [b for b in emf_blobs(records) if b is not blob]
    assert all(b["_aws"]["CloudWatchMetrics"][0]["Namespace"] == contract.VALUES_NAMESPACE for b in others)
    assert outcome_line(records)["cold_start"] is True


def test_the_committed_slot_records_and_logs_its_cost_estimate(
    invoke: Any, stdout_json: Any, store: Any, lock: SlotLock
) -> None:
    # WHEN a winner runs the slot (no catalog: one racer; the context says 256 MB)
    slot = current_slot()
    assert invoke(scheduler_event(slot))["status"] == "succeeded"
    records = stdout_json()
    logged_usd = outcome_line(records)[contract.LOG_FIELD_ESTIMATED_COST_USD]

    # THEN the result item, its LATEST copy and the slot's history carry the same estimate as the log line (no
    # EstimatedCostUSD metric any more)
    stored, latest = store.result(JOB, slot.iso), store.latest(JOB)
    cost = stored.cost
    assert cost == latest.cost and cost["estimated_cost_usd"] == logged_usd > 0
    assert cost["estimate"] is True and cost["prices"]["region"] == "us-east-1"
    assert lock.get_slot(slot)["summary"]["cost"] == cost
    assert contract.METRIC_ESTIMATED_COST_USD not in emitted(records)
    # AND it counts what the slot used: the 7 MB query billed at the 10 MB minimum, one request of 256 MB,
    # the lock's metered writes plus the commit's model, one scheduler invocation
    usage = cost["usage"]
    assert usage["athena_billed_bytes"] == 10 * 2**20 and usage["lambda_requests"] == 1
    assert usage["write_units"] >= 2 * 3  # at least the commit's three items
    assert cost["by_service_usd"]["athena"] == pytest.approx(10 * 2**20 / 2**40 * 5.0, abs=1e-10)
    assert cost["by_service_usd"]["scheduler"] == pytest.approx(1e-6)


def test_loser_emits_only_the_last_success_age_and_logs_its_reason(invoke: Any, stdout_json: Any) -> None:
    # GIVEN the slot already ran (so the loser also learns when the last success was)
    slot = current_slot()
    assert invoke(scheduler_event(slot), "req-winner")["status"] == "succeeded"
    stdout_json()  # drop the winner's output

    # WHEN a late racer arrives
    result = invoke(rule_event(slot), "req-loser")
    records = stdout_json()

    # THEN its only metric is LastSuccessAgeS (from the lock item's ALL_OLD, no extra read), dimensions service + job
    assert (result["status"], result["reason"]) == ("lost", "slot_finished")
    [blob] = emf_blobs(records)
    assert metric_names(blob) == [contract.METRIC_LAST_SUCCESS_AGE_S]
    assert dimensions(blob) == [JOB_DIMENSIONS]
    # AND the loss and its reason are fields of its log line (no LostRace metric, no reason dimension)
    line = outcome_line(records)
    assert (line["outcome"], line["reason"], line["lease_acquired"], line["takeover"]) == (
        "lost",
        "slot_finished",
        False,
        False,
    )
    assert (line["queries_started"], line["query_adopted"]) == (0, False)
    assert "fencing_token" not in line and "rows_stored" not in line and "data_scanned_bytes" not in line


def test_held_loser_of_a_fresh_job_emits_no_metric(invoke: Any, stdout_json: Any, take_lease_elsewhere: Any) -> None:
    # GIVEN another racer holds the lease of a job that never succeeded
    slot = current_slot()
    take_lease_elsewhere(slot, "req-winner")

    # WHEN this racer runs
    invoke(scheduler_event(slot), "req-loser")
    records = stdout_json()

    # THEN it emits nothing (no last success to report yet) and logs reason "held"
    assert emf_blobs(records) == []
    assert (outcome_line(records)["outcome"], outcome_line(records)["reason"]) == ("lost", "held")


def test_a_slot_above_a_threshold_emits_one_deployment_wide_count_and_a_warning(
    invoke: Any, stdout_json: Any, handler_env: dict[str, str]
) -> None:
    # GIVEN thresholds below the fake engine's statistics (7,340,032 bytes, 910 ms): both are exceeded
    alarms = {"data_scanned_bytes": 1_000_000, "query_duration_ms": 500}
    write_job_catalog(Path(handler_env[contract.ENV_JOB_CATALOG_PATH]), job_spec(alarms=alarms))
    slot = current_slot()

    # WHEN the winner commits the slot
    assert invoke(scheduler_event(slot), "req-A")["status"] == "succeeded"
    records = stdout_json()

    # THEN ThresholdExceeded is emitted once (1, Count, dimension service only), in a blob of its own
    [count] = [b for b in emf_blobs(records) if contract.METRIC_THRESHOLD_EXCEEDED in metric_names(b)]
    assert metric_names(count) == [contract.METRIC_THRESHOLD_EXCEEDED] and count[
        contract.METRIC_THRESHOLD_EXCEEDED
    ] in (1, [1])
    assert dimensions(count) == [[contract.DIMENSION_SERVICE]] and contract.DIMENSION_JOB not in count
    # AND the job's measurements are emitted as usual
    job_blobs = [b for b in emf_blobs(records) if contract.METRIC_DATA_SCANNED_BYTES in metric_names(b)]
    assert len(job_blobs) == 1 and job_blobs[0][contract.DIMENSION_JOB] == JOB
    # AND one warning per threshold names job, slot, threshold, value and threshold; the outcome line says which
    warnings = [r for r in log_records(records) if "above the threshold" in r["message"]]
    assert [(w["level"], w["threshold_metric"], w["measured"], w["threshold"]) for w in warnings] == [
        ("WARNING", contract.METRIC_DATA_SCANNED_BYTES, 7_340_032, 1_000_000),
        ("WARNING", contract.METRIC_QUERY_DURATION_MS, 910, 500),
    ]
    assert warnings[0]["message"] == (
        f"job {JOB} slot {slot.iso}: DataScannedBytes 7340032 is above the threshold 1000000 (ALARM_DATA_SCANNED_BYTES)"
    )
    assert outcome_line(records)["threshold_exceeded"] == "DataScannedBytes,QueryDurationMs"


def test_logs_carry_job_slot_owner_and_fencing_token(invoke: Any, stdout_json: Any) -> None:
    # WHEN a winner runs the slot
    slot = current_slot()
    invoke(scheduler_event(slot), "req-A")
    logs = log_records(stdout_json())

    # THEN every record after the acquisition carries job, slot, owner and fencing token
    assert logs, "no log records captured"
    for record in logs:
        assert (record["job"], record["slot"], record["owner"]) == (JOB, slot.iso, "req-A"), record
    checkpoints = [r for r in logs if "checkpoint" in r]
    assert [r["checkpoint"] for r in checkpoints] == [
        "acquired",
        "state_recorded",
        "query_started",
        "query_finished",
        "before_commit",
        "committed",
    ]
    assert all(r["fencing_token"] == 1 for r in checkpoints)
    assert checkpoints[-1]["query_execution_id"].startswith("qid-")
    final = logs[-1]
    assert final["message"] == f"slot {slot.iso}: succeeded" and final["level"] == "INFO"
    assert (final["outcome"], final["fencing_token"], final["service"]) == ("succeeded", 1, contract.SERVICE_NAME)
    assert final["function_request_id"] == "req-A"  # Powertools' Lambda context keys
    # AND the outcome line carries the facts that used to be metrics (issue 23); unknown ones are absent
    assert final["query_execution_id"] == checkpoints[-1]["query_execution_id"]
    facts = {key: final.get(key) for key in contract.LOG_ONLY_FIELDS}
    assert facts == {
        "lease_acquired": True,
        "takeover": False,
        "query_adopted": False,
        "queries_started": 1,
        "data_scanned_bytes": 7_340_032,
        "query_duration_ms": 910,
        "rows_stored": 3,
        "estimated_cost_usd": facts["estimated_cost_usd"],
        "value_series_dropped": 0,  # 3 origins, cap 10
        "threshold_exceeded": None,
        "missed_slot": None,
        "missed_reason": None,
        "permit": None,  # the capacity budget is off here
        "permit_wait_ms": None,
        "capacity_deferrals": None,
        "permit_queries_unreadable": None,
    }
    assert facts["estimated_cost_usd"] > 0
    assert not {"threshold_exceeded", "missed_slot", "missed_reason"} & set(final)


def test_loser_logs_carry_job_slot_and_owner(invoke: Any, stdout_json: Any, take_lease_elsewhere: Any) -> None:
    # GIVEN another racer holds the lease
    slot = current_slot()
    take_lease_elsewhere(slot, "req-winner")

    # WHEN this racer runs
    invoke(scheduler_event(slot), "req-B")

    # THEN its outcome log record says which job, slot and owner lost, and why
    [final] = [r for r in log_records(stdout_json()) if r["message"].startswith("slot ")]
    assert (final["job"], final["slot"], final["owner"], final["outcome"], final["reason"]) == (
        JOB,
        slot.iso,
        "req-B",
        "lost",
        "held",
    )


def test_permanent_query_failure_returns_failed_and_logs_it(
    invoke: Any, make_engine: Any, stdout_json: Any, store: Any, handler_deps: Any
) -> None:
    # GIVEN Athena rejects the query for good
    handler_deps.engine_factory = lambda settings: make_engine(
        [
            [
                {
                    "state": "FAILED",
                    "retryable": False,
                    "error_category": 2,
                    "error_type": 1006,
                    "error_message": "bad column",
                },
            ]
        ]
    )

    # WHEN the winner runs
    slot = current_slot()
    result = invoke(scheduler_event(slot), "req-A")
    records = stdout_json()

    # THEN the invocation returns (no Lambda retry), stores nothing, emits no metric (a fresh job: no last success;
    # nothing committed) and logs the outcome as a WARNING line with the query it started
    assert result["status"] == "failed" and result["details"]["error_type"] == 1006
    assert emf_blobs(records) == []
    assert store.list_results(JOB) == []
    line = outcome_line(records)
    assert (line["level"], line["outcome"], line["lease_acquired"], line["queries_started"]) == (
        "WARNING",
        "failed",
        True,
        1,
    )
    assert "data_scanned_bytes" not in line and "rows_stored" not in line
    # AND the job's own (stdlib) log record is JSON with the invocation's keys, like the handler's
    [failure] = [r for r in log_records(records) if "failed for good" in r["message"]]
    assert failure["level"] == "ERROR"
    assert (failure["job"], failure["slot"], failure["owner"], failure["fencing_token"]) == (JOB, slot.iso, "req-A", 1)


def test_time_budget_exhausted_raises_for_lambdas_retry_which_reenters_and_adopts(
    invoke: Any,
    make_engine: Any,
    make_context: Any,
    lock: SlotLock,
    store: Any,
    handler_deps: Any,
    lambda_handler: Any,
) -> None:
    # GIVEN an invocation with only the commit reserve left (5 s) and a query that is still running
    engine = make_engine([["RUNNING"]])
    handler_deps.engine_factory = lambda settings: engine
    slot = current_slot()

    # WHEN the handler runs out of time while polling
    with pytest.raises(QueryTimeoutError):
        lambda_handler(scheduler_event(slot), make_context("req-A", remaining_ms=5_000, on_fake_clock=False))

    # THEN it raised (so Lambda retries the event) after releasing the lease, keeping owner and query id
    [qid] = engine.queries
    record = lock.get_lock()
    assert record.owner_id == "req-A" and record.lease_expires_at_ms is not None
    assert record.lease_expires_at_ms <= int(time.time() * 1000)
    assert lock.get_slot(slot)["state"]["query_execution_id"] == qid  # type: ignore[index]

    # WHEN Lambda's retry arrives (same request id) and the query has finished meanwhile
    engine.queries[qid].script = deque(["SUCCEEDED"])
    result = invoke(scheduler_event(slot), "req-A")

    # THEN it re-enters at once, adopts the query instead of starting another, and stores the result
    assert (result["status"], result["reentered"], result["adopted_state"]) == ("succeeded", True, True)
    assert result["queries_started"] == 0 and len(engine.starts) == 1
    assert store.get_result(JOB, slot.iso)["query_execution_id"] == qid  # type: ignore[index]


def test_the_deps_reach_the_lock_and_the_runner_explicitly(invoke: Any, handler_deps: Any) -> None:
    # GIVEN deps passed to make_handler (as the demo and the chaos suite do): a listener and a lock clock 4 s
    # behind the system clock, beside the fake engine the fixtures gave
    seen: list[tuple[str, int]] = []
    clock_calls: list[int] = []

    def behind_clock_ms() -> int:
        now = int(time.time() * 1000) - 4_000
        clock_calls.append(now)
        return now

    handler_deps.options.update(
        clock_ms=behind_clock_ms,
        listener=lambda checkpoint, lease: seen.append((checkpoint, lease.fencing_token)),
    )

    # WHEN a winner runs the slot
    result = invoke(scheduler_event(current_slot()))

    # THEN the listener saw every checkpoint after the service's own handling, and the lock used the clock
    assert result["status"] == "succeeded"
    assert seen[0][0] == "acquired" and "query_started" in dict(seen)
    assert {token for _, token in seen} == {result["fencing_token"]}
    assert clock_calls and handler_deps(Settings.from_env()).lock.clock_ms is behind_clock_ms


@pytest.fixture
def settings_reads(monkeypatch: pytest.MonkeyPatch) -> list[Settings]:
    """Every ``Settings.from_env`` read that succeeded, in order (the handler's and the test's)."""
    reads: list[Settings] = []
    read = Settings.from_env

    def counted(*args: Any, **kwargs: Any) -> Settings:
        settings = read(*args, **kwargs)
        reads.append(settings)
        return settings

    monkeypatch.setattr(Settings, "from_env", counted)
    return reads


@pytest.mark.backends("moto")  # what the handler reads, not how the table answers
def test_the_settings_are_read_once_per_environment_and_again_when_a_variable_changes(
    invoke: Any, engines: list[Any], settings_reads: list[Settings], monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN warm invocations, the Lambda runtime setting a new X-Ray trace header for each
    slot = current_slot()
    for number in (1, 2):
        monkeypatch.setenv("_X_AMZN_TRACE_ID", f"Root=1-5759e988-bd862e3fe1be46a99427297{number};Sampled=0")
        invoke(scheduler_event(slot), f"req-{number}")

    # THEN the settings were read once, and both ran with the same deps (one engine built)
    assert len(settings_reads) == 1 and len(engines) == 1

    # WHEN a variable changes (a test's or a local tool's edit) before the next invocation
    # (the lease: one of the variables a local run may tune; a job's settings come from its catalog spec)
    first_lease_s = settings_reads[0].lease_duration_s
    monkeypatch.setenv(LEASE, str(int(first_lease_s) + 5))
    invoke(scheduler_event(slot), "req-3")

    # THEN that invocation read the settings again and ran with deps built for them
    assert [s.lease_duration_s for s in settings_reads] == [first_lease_s, first_lease_s + 5] and len(engines) == 2


@pytest.mark.backends("moto")  # refused before any request
def test_a_bad_variable_is_refused_at_every_invocation_until_it_is_fixed(
    invoke: Any, engines: list[Any], settings_reads: list[Settings], monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a deployment with a bad variable: every invocation refuses it, none is remembered as read
    monkeypatch.setenv(LEASE, "0")
    for request_id in ("req-1", "req-2"):
        with pytest.raises(ConfigurationError, match=f"^{LEASE}: "):
            invoke(scheduler_event(current_slot()), request_id)
    assert settings_reads == [] and engines == []

    # WHEN it is fixed / THEN the next invocation reads the settings and runs the slot
    monkeypatch.setenv(LEASE, "45")
    assert invoke(scheduler_event(current_slot()), "req-3")["status"] == "succeeded"
    assert len(settings_reads) == 1 and len(engines) == 1


# ---------------------------------------------------------------------------------------------------
# the job catalog (jobs as folders: the stack bundles each job's prepared query in the asset)
# ---------------------------------------------------------------------------------------------------

CATALOG_SQL = "SELECT carrier, count(*) AS n FROM flights WHERE t >= ? AND t < ? AND d <= ? OR s = ? GROUP BY 1"


@pytest.fixture
def catalog_env(handler_env: dict[str, str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """The query with named parameters and a constant, beside another job's entry (no spec: the read side's)."""
    path = tmp_path / "catalog" / "job_catalog.json"
    path.parent.mkdir()
    query = CatalogQuery(
        CATALOG_SQL,
        ("window_start", "window_end", "delay_min", "window_start"),
        constants={"delay_min": "15"},
        spec=job_spec(sql=CATALOG_SQL),
    )
    path.write_text(json.dumps(catalog_document({JOB: query, "other-job": CatalogQuery("SELECT 1 AS a", ())})))
    monkeypatch.setenv(contract.ENV_JOB_CATALOG_PATH, str(path))
    return path


def test_the_query_and_its_named_parameters_come_from_the_job_catalog(
    catalog_env: Path, invoke: Any, engines: list[Any], store: Any
) -> None:
    # GIVEN a catalog entry whose parameters are named, one of them a constant and one used twice
    slot = current_slot()

    # WHEN the handler runs the slot
    outcome = invoke({"scheduled_time": slot.iso, "job": JOB, "racer": 0, "execution_id": "x"})

    # THEN the engine got the catalog's SQL and each ? bound in order, and the result was committed
    assert outcome["status"] == "succeeded"
    (call,) = [args for name, args in engines[0].calls if name == "start_query"]
    assert call["sql"] == CATALOG_SQL
    start, end = call["parameters"][0], call["parameters"][1]
    assert call["parameters"] == [start, end, "15", start] and start.startswith("'2013-")
    assert [r["slot"] for r in store.list_results(JOB)] == [slot.iso]


@pytest.mark.backends("moto")  # refused before any request
def test_an_event_for_another_job_is_refused_before_any_request(
    catalog_env: Path, invoke: Any, handler_requests: list[str], engines: list[Any]
) -> None:
    # GIVEN an event whose job is not this function's (a misrouted target) / WHEN it arrives
    with pytest.raises(InvalidEventError) as info:
        invoke({"scheduled_time": current_slot().iso, "job": "other-job", "racer": 0})

    # THEN the job field is named and nothing was sent or built
    assert info.value.field == "job" and "flights" in str(info.value)
    assert handler_requests == [] and engines == []


@pytest.mark.backends("moto")  # no DynamoDB request
def test_a_catalog_without_this_functions_job_fails_the_cold_start(
    catalog_env: Path, invoke: Any, monkeypatch: pytest.MonkeyPatch, handler_requests: list[str]
) -> None:
    catalog_env.write_text(json.dumps({"format": 1, "jobs": {"other-job": {"sql": "SELECT 1 AS a"}}}))
    with pytest.raises(CatalogError, match="holds no job") as info:
        invoke(scheduler_event(current_slot()))
    assert info.value.key.startswith("job catalog") and handler_requests == []
