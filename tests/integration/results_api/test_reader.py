"""``results_api.reader.ResultsReader``: what each read returns and what it costs in DynamoDB requests, on both
backends, over a history written by the real lock and results store (conftest ``world``)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import EndpointConnectionError

from athena_refresh import contract
from athena_refresh.catalog import CatalogQuery, CatalogSchedule, catalog_document
from athena_refresh.errors import ConfigurationError
from results_api import models
from results_api import reader as reader_module
from results_api.errors import BackendUnavailableError, BadParameterError, ResultNotFoundError, UnknownJobError
from results_api.freshness import latest_with_freshness
from results_api.reader import ResultsReader, parse_slot
from slotlock import Slot

pytestmark = pytest.mark.backends("moto", "dynamodb-local")

JOB = "flights-dashboard"
PAUSED_JOB = "carrier-on-time"
IDLE_JOB = "daily-ny"
TAMPERED_JOB = "tampered"
OPERATOR = "arn:aws:iam::123456789012:user/operator"
SCRIPT = "<script>alert(1)</script>"
#: An error message names what is wrong; it never echoes a megabyte of the caller's input.
MAX_MESSAGE = 300


def ids(entries: list[dict[str, Any]]) -> list[tuple[str, int, str]]:
    return [(entry["slot"], entry["generation"], entry["status"]) for entry in entries]


def expected_ids(world: Any, status: str | None = None) -> list[tuple[str, int, str]]:
    return [(slot.iso, generation, state) for slot, generation, state in world.history if status in (None, state)]


def all_pages(reader: ResultsReader, job: str, **params: Any) -> list[Any]:
    """Every page of one selection, following ``next_token`` until it is ``None``."""
    pages = []
    token = None
    for _ in range(50):
        view = reader.history(job, next_token=token, **params)
        pages.append(view)
        if view.next_token is None:
            return pages
        token = view.next_token
    raise AssertionError("the pages never ended")


# ---------------------------------------------------------------------------------------------------
# results
# ---------------------------------------------------------------------------------------------------
@pytest.mark.backends("moto")  # plain reads
def test_latest_is_one_get_item_and_is_the_newest_slots_result(
    reader: ResultsReader, world: Any, request_log: Any
) -> None:
    # GIVEN the history: S3 is the newest committed slot (S4 is still running)
    s3 = world.history[1][0]

    # WHEN the latest result is read
    request_log.clear()
    latest = reader.latest(JOB)

    # THEN it took exactly one request, a consistent GetItem of the LATEST item
    assert request_log.operations == ["GetItem"]
    [get] = request_log.requests("GetItem")
    assert get["Key"] == {"job": {"S": JOB}, "slot": {"S": "LATEST"}} and get["ConsistentRead"] is True
    # AND it is the whole result of S3, rows included (inline), typed as the job stored them
    assert (latest.job_name, latest.slot_iso, latest.generation) == (JOB, s3.iso, 1)
    assert latest.fencing_token == world.tokens[(s3, 1)]
    assert latest.query_execution_id == "qe-s3"
    assert latest.committed_at_ms == world.committed_at_ms[(s3, 1)]
    assert [column["name"] for column in latest.columns] == [
        "origin",
        "flights",
        "avg_delay",
        "note",
        "on_time",
        "detail",
    ]
    assert latest.columns[5] == {"name": "detail", "type": "map(varchar,array(integer))"}
    assert latest.rows is not None and latest.rows[0]["origin"] == SCRIPT and latest.rows[1]["avg_delay"] is None
    assert latest.row_count == 3 and not latest.offloaded
    assert latest.statistics["data_scanned_bytes"] == 7_340_032
    assert (latest.window_start, latest.window_end) == ("2013-11-21T00:00:00", "2013-11-22T00:00:00")

    # AND it equals the slot's own result item, read by slot (newest generation) and by generation 1
    assert reader.result(JOB, s3.iso) == latest
    assert reader.result(JOB, s3.iso, 1) == latest


@pytest.mark.backends("moto")  # plain reads
def test_a_slots_result_is_its_newest_generation_unless_one_is_named(
    reader: ResultsReader, world: Any, request_log: Any
) -> None:
    # GIVEN S0: the live run (rows offloaded to S3) and its re-run as generation 2 (rows inline)
    s0 = world.history[-1][0]

    # WHEN S0 is read without a generation
    request_log.clear()
    newest = reader.result(JOB, s0.iso)

    # THEN it is generation 2: one Query of the slot's generations, then one GetItem
    assert request_log.operations == ["Query", "GetItem"]
    assert (newest.generation, newest.fencing_token, newest.rows) == (
        2,
        world.tokens[(s0, 2)],
        [
            {"origin": "EWR", "flights": 321},
            {"origin": "LGA", "flights": 278},
        ],
    )

    # WHEN generation 1 is named
    request_log.clear()
    live = reader.result(JOB, s0.iso, 1)

    # THEN it is the live run: one GetItem, its rows not fetched (offloaded) until asked for
    assert request_log.operations == ["GetItem"]
    assert (live.generation, live.fencing_token, live.offloaded, live.rows) == (1, world.tokens[(s0, 1)], True, None)
    assert live.rows_s3_uri is not None and live.rows_s3_uri.startswith("s3://read-results-overflow/results/")
    assert live.row_count == 120 and live.rows_bytes is not None and live.rows_bytes > 200
    rows = reader.rows(live)
    assert rows == [{"origin": f"AP{index:03d}", "flights": index * 7} for index in range(120)]
    assert request_log.operations == ["GetItem"]  # S3 only

    # AND the slot may be written in any ISO 8601 form of the same minute
    assert reader.result(JOB, "2026-11-22T01:00:00+01:00") == newest
    assert reader.result(JOB, "2026-11-22T00:00:59.999Z", 1) == live


@pytest.mark.backends("moto")  # plain reads
def test_a_slot_without_a_committed_result_is_not_found(reader: ResultsReader, world: Any) -> None:
    s0, s1, s2, s3, s4 = sorted({slot for slot, _, _ in world.history})
    never = Slot(s4.epoch_s + 3600)
    # GIVEN slots that failed, were requested but never ran, were missed, are running, have no such generation,
    # or were never delivered
    for slot, generation in ((s1, None), (s1, 1), (s1, 2), (s2, None), (s4, None), (s3, 2), (s0, 3), (never, None)):
        # WHEN one is read THEN there is no result, and the error names the job, the slot and the generation
        with pytest.raises(ResultNotFoundError) as caught:
            reader.result(JOB, slot.iso, generation)
        assert (caught.value.job, caught.value.slot, caught.value.generation) == (JOB, slot.iso, generation)
        assert caught.value.status == 404 and slot.iso in caught.value.message and JOB in caught.value.message
        if generation is not None:
            assert f"generation {generation}" in caught.value.message
    # AND a job that never committed has no latest result
    for job in (IDLE_JOB, TAMPERED_JOB):
        with pytest.raises(ResultNotFoundError) as caught:
            reader.latest(job)
        assert (caught.value.job, caught.value.slot) == (job, None)
        assert caught.value.message == f"job {job!r} has no committed result yet"


def test_an_unknown_job_is_named_with_the_jobs_there_are(offline_reader: ResultsReader, offline_requests: Any) -> None:
    reader = offline_reader
    for read in (
        lambda: reader.latest("no-such-job"),
        lambda: reader.result("no-such-job", "2026-11-22T00:00:00Z"),
        lambda: reader.history("no-such-job"),
        lambda: reader.next_slot("no-such-job"),
    ):
        with pytest.raises(UnknownJobError) as caught:
            read()
        assert caught.value.job == "no-such-job" and caught.value.status == 404
        assert caught.value.message == f"no job 'no-such-job'; jobs: {PAUSED_JOB}, {IDLE_JOB}, {JOB}, {TAMPERED_JOB}"
    # AND the catalog answered: DynamoDB was not asked
    assert offline_requests.operations == []


BAD_JOBS = ["", "bad#job", "spaced job", "x" * 65, "j\x00", "jöb", "lock#flights-dashboard", "x" * 1_000_000]


@pytest.mark.parametrize("job", BAD_JOBS, ids=lambda job: repr(job[:12]) + f"[{len(job)}]")
def test_an_invalid_job_name_is_a_bad_job_parameter_with_a_bounded_message(
    offline_reader: ResultsReader, offline_requests: Any, job: str
) -> None:
    reader = offline_reader
    for read in (
        lambda: reader.latest(job),
        lambda: reader.result(job, "2026-11-22T00:00:00Z"),
        lambda: reader.history(job),
    ):
        with pytest.raises(BadParameterError) as caught:
            read()
        assert caught.value.parameter == "job" and caught.value.status == 400
        assert "letters, digits" in caught.value.message
        assert len(caught.value.message) < MAX_MESSAGE
    assert offline_requests.operations == []


BAD_SLOTS = [
    "garbage",
    "2026-11-22T00:30:00",  # no time zone
    "2026-11-22T00:30:00Z\x00",  # fromisoformat would stop at the NUL
    "\x00",
    "2026-13-01T00:00:00Z",
    "2200-01-01T00:00:00Z",
    "1999-12-31T23:59:00Z",
    "",
    "9" * 1_000_000,
]


@pytest.mark.parametrize("slot", BAD_SLOTS, ids=lambda slot: repr(slot[:24]) + f"[{len(slot)}]")
def test_a_bad_slot_is_a_bad_slot_parameter_with_a_bounded_message(
    offline_reader: ResultsReader, offline_requests: Any, slot: str
) -> None:
    reader = offline_reader
    with pytest.raises(BadParameterError) as caught:
        reader.result(JOB, slot)
    assert caught.value.parameter == "slot" and caught.value.status == 400
    assert "expected an ISO 8601 time" in caught.value.message and len(caught.value.message) < MAX_MESSAGE
    assert offline_requests.operations == []
    # AND the same text is named after the parameter it came in
    with pytest.raises(BadParameterError) as caught:
        parse_slot(slot, "from")
    assert caught.value.parameter == "from"


@pytest.mark.parametrize("generation", [0, -1, 1_000_001, 10**7])
def test_a_generation_out_of_range_is_a_bad_generation(
    offline_reader: ResultsReader, offline_requests: Any, generation: int
) -> None:
    reader = offline_reader
    with pytest.raises(BadParameterError) as caught:
        reader.result(JOB, "2026-11-22T01:30:00Z", generation)
    assert caught.value.parameter == "generation"
    assert offline_requests.operations == []


def test_a_tampered_latest_item_is_a_backend_failure_not_a_crash(reader: ResultsReader, world: Any, ddb: Any) -> None:
    # GIVEN LATEST edited by hand: its rows are no longer JSON
    key = {"job": {"S": JOB}, "slot": {"S": "LATEST"}}
    ddb.update_item(
        TableName=world.results_table,
        Key=key,
        UpdateExpression="SET rows_json = :bad",
        ExpressionAttributeValues={":bad": {"S": "[{not json"}},
    )
    # WHEN / THEN reading it is a backend failure (503), naming the job
    with pytest.raises(BackendUnavailableError) as caught:
        reader.latest(JOB)
    assert JOB in caught.value.message and caught.value.status == 503

    # GIVEN its slot pointer is a Number instead
    ddb.update_item(
        TableName=world.results_table,
        Key=key,
        UpdateExpression="SET latest_slot = :n, rows_json = :rows",
        ExpressionAttributeValues={":n": {"N": "5"}, ":rows": {"S": "[]"}},
    )
    with pytest.raises(BackendUnavailableError) as caught:
        reader.latest(JOB)
    assert "latest_slot" in caught.value.message


# ---------------------------------------------------------------------------------------------------
# jobs
# ---------------------------------------------------------------------------------------------------
@pytest.mark.backends("moto")  # plain reads
def test_jobs_is_one_batch_get_of_every_lock_item_and_latest_pointer_then_one_of_slot_items(
    reader: ResultsReader, world: Any, request_log: Any, clock: Any
) -> None:
    s0, s3, s4 = world.history[-1][0], world.history[1][0], world.history[0][0]

    # WHEN the jobs are listed
    request_log.clear()
    summaries = reader.jobs()

    # THEN one BatchGetItem read, consistently, each job's live lock item and its LATEST pointer (no rows)
    assert request_log.operations == ["BatchGetItem"] * 2
    batch, slots = request_log.requests("BatchGetItem")
    lock_keys = batch["RequestItems"][world.lock_table]
    pointer_keys = batch["RequestItems"][world.results_table]
    assert sorted(key["pk"]["S"] for key in lock_keys["Keys"]) == sorted(f"lock#{job}" for job in world.catalog)
    assert sorted(key["job"]["S"] for key in pointer_keys["Keys"]) == sorted(world.catalog)
    assert lock_keys["ConsistentRead"] is True and pointer_keys["ConsistentRead"] is True
    assert "rows_json" not in pointer_keys["ExpressionAttributeNames"].values()
    # AND a second one the slot items their freshness decides on: each scheduled job's 4 newest firings (the paused
    # job has no schedule)
    assert (
        set(slots["RequestItems"]) == {world.lock_table} and slots["RequestItems"][world.lock_table]["ConsistentRead"]
    )
    slot_jobs = [key["pk"]["S"].split("#")[1] for key in slots["RequestItems"][world.lock_table]["Keys"]]
    assert sorted(slot_jobs) == sorted([JOB, IDLE_JOB, TAMPERED_JOB] * 4)

    # AND every job of the catalog comes back, by name
    assert [summary.job for summary in summaries] == sorted(world.catalog)
    by_job = {summary.job: summary for summary in summaries}

    # the running job: the unexpired live lease is held by racer-4 on S4; S3 was its last success and is LATEST
    running = by_job[JOB]
    assert (running.lease_state, running.lease_owner_id, running.lease_slot) == ("held", "racer-4", s4.iso)
    assert running.lease_fencing_token == world.held_lease.fencing_token == 4
    assert running.lease_expires_at_ms == world.held_lease.expires_at_ms
    assert (running.paused, running.paused_through_slot, running.problem) == (False, None, None)
    assert (running.last_success_slot, running.last_success_at_ms) == (s3.iso, world.committed_at_ms[(s3, 1)])
    assert (running.latest_slot, running.latest_generation) == (s3.iso, 1)
    assert running.latest_fencing_token == world.tokens[(s3, 1)]
    assert running.latest_committed_at_ms == world.committed_at_ms[(s3, 1)]
    assert running.schedule == CatalogSchedule("cron(0/30 * * * ? *)", "UTC", 3)
    # its freshness is what latest says of it (one function: results_api.freshness), on time
    assert running.freshness == latest_with_freshness(reader, JOB)[1]
    assert running.freshness is not None and (running.freshness["state"], running.freshness["late"]) == (
        "on_time",
        False,
    )

    # the paused job: free, paused for good, its one result the latest; no schedule in its catalog entry
    paused = by_job[PAUSED_JOB]
    assert (paused.lease_state, paused.lease_owner_id, paused.lease_slot, paused.lease_expires_at_ms) == (
        "free",
        None,
        None,
        None,
    )
    assert (paused.paused, paused.paused_through_slot) == (True, "2100-01-01T00:00:00Z")
    assert (paused.last_success_slot, paused.last_success_at_ms) == (s0.iso, world.paused_committed_at_ms)
    assert (paused.latest_slot, paused.latest_generation, paused.latest_fencing_token) == (s0.iso, 1, 1)
    assert paused.schedule is None

    # the job that never ran: free, nothing else
    idle = by_job[IDLE_JOB]
    assert (idle.lease_state, idle.paused, idle.last_success_slot, idle.latest_slot, idle.problem) == (
        "free",
        False,
        None,
        None,
        None,
    )
    assert idle.schedule == CatalogSchedule("cron(0 6 * * ? *)", "America/New_York", 2)
    assert idle.freshness is not None and idle.freshness["slot"] is None and idle.freshness["late"] is True
    assert paused.freshness is not None and paused.freshness["state"] is None  # no schedule: not judged

    # the tampered lock item: reported "unknown" with the reason, not raised
    tampered = by_job[TAMPERED_JOB]
    assert tampered.lease_state == "unknown" and tampered.problem is not None
    assert "fencing_token" in tampered.problem and "String" in tampered.problem
    assert tampered.latest_slot is None

    # AND the API's shape validates against the documented model
    document = json.loads(json.dumps({"jobs": [summary.as_dict() for summary in summaries]}))
    assert models.Jobs.model_validate(document).jobs[0].job == PAUSED_JOB

    # WHEN the clock passes the held lease's expiry (its holder crashed)
    clock.now = world.held_lease.expires_at_ms
    [running] = [summary for summary in reader.jobs() if summary.job == JOB]
    # THEN the lease is free: no owner, no slot, no expiry shown; the counter is still reported
    assert (running.lease_state, running.lease_owner_id, running.lease_slot, running.lease_expires_at_ms) == (
        "free",
        None,
        None,
        None,
    )
    assert running.lease_fencing_token == 4


@pytest.mark.backends("moto")  # plain reads
def test_more_than_fifty_jobs_take_one_batch_per_fifty(
    make_reader: Callable[..., ResultsReader], catalog: dict[str, CatalogQuery], request_log: Any
) -> None:
    # GIVEN a catalog of 123 jobs (BatchGetItem reads at most 100 keys: two per job)
    many = {**catalog, **{f"job-{index:03d}": CatalogQuery("SELECT 1 AS a", ()) for index in range(119)}}
    reader = make_reader(catalog=many)

    # WHEN they are listed
    request_log.clear()
    summaries = reader.jobs()

    # THEN three batches of at most 50 jobs, and every job once, the seeded ones as before; then one of the slot
    # items the freshness of the 3 scheduled jobs reads (4 each)
    assert request_log.operations == ["BatchGetItem"] * 4
    sizes = [len(body["RequestItems"][reader.lock_table]["Keys"]) for body in request_log.requests("BatchGetItem")]
    assert sizes == [50, 50, 23, 12]
    assert [summary.job for summary in summaries] == sorted(many)
    assert {summary.lease_state for summary in summaries} == {"free"}


@pytest.fixture
def unprocessed(ddb: Any) -> Iterator[dict[str, Any]]:
    """Make DynamoDB leave keys unprocessed: the first ``fail`` BatchGetItem answers move every key of the
    results table (``table``, default: the entry with a ``ProjectionExpression``) to ``UnprocessedKeys`` (the answer
    botocore hands back is edited after the call)."""
    state: dict[str, Any] = {"fail": 1, "calls": 0, "table": None}

    def edit(parsed: dict[str, Any], model: Any, **_: Any) -> None:
        state["calls"] += 1
        if state["calls"] > state["fail"]:
            return
        request_items = state["request"]
        for table, keys in request_items.items():
            if table == state["table"] or (state["table"] is None and "ProjectionExpression" in keys):
                parsed.setdefault("UnprocessedKeys", {})[table] = keys
                parsed.get("Responses", {}).pop(table, None)

    def remember(params: dict[str, Any], **_: Any) -> None:
        state["request"] = params["RequestItems"]

    ddb.meta.events.register("provide-client-params.dynamodb.BatchGetItem", remember)
    ddb.meta.events.register("after-call.dynamodb.BatchGetItem", edit)
    yield state
    ddb.meta.events.unregister("after-call.dynamodb.BatchGetItem", edit)
    ddb.meta.events.unregister("provide-client-params.dynamodb.BatchGetItem", remember)


@pytest.mark.backends("moto")  # plain reads
def test_unprocessed_keys_are_read_again(
    reader: ResultsReader, world: Any, request_log: Any, unprocessed: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    sleeps: list[float] = []
    monkeypatch.setattr(reader_module.time, "sleep", sleeps.append)
    # GIVEN DynamoDB leaves the LATEST pointers unprocessed once
    request_log.clear()
    summaries = reader.jobs()
    # THEN a second BatchGetItem asks for exactly those, after a short back-off, and nothing is lost
    first, second, slots = request_log.requests("BatchGetItem")  # then the slot items of the freshness
    assert set(slots["RequestItems"]) == {world.lock_table}
    assert set(second["RequestItems"]) == {world.results_table}
    assert second["RequestItems"][world.results_table]["Keys"] == first["RequestItems"][world.results_table]["Keys"]
    assert sleeps == [0.05]
    assert {summary.job: summary.latest_slot for summary in summaries}[JOB] == world.history[1][0].iso


@pytest.mark.backends("moto")  # plain reads
def test_keys_left_unprocessed_every_time_are_a_backend_failure(
    reader: ResultsReader, world: Any, request_log: Any, unprocessed: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    sleeps: list[float] = []
    monkeypatch.setattr(reader_module.time, "sleep", sleeps.append)
    unprocessed["fail"] = 1_000
    request_log.clear()
    with pytest.raises(BackendUnavailableError, match="unprocessed 5 times"):
        reader.jobs()
    assert request_log.operations == ["BatchGetItem"] * 5
    assert sleeps == [0.05, 0.1, 0.2, 0.4]  # back-off between attempts, none after the last


@pytest.mark.backends("moto")  # plain reads
def test_latest_with_its_freshness_is_one_batch_and_reads_unprocessed_keys_again(
    reader: ResultsReader, world: Any, request_log: Any, unprocessed: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    sleeps: list[float] = []
    monkeypatch.setattr(reader_module.time, "sleep", sleeps.append)
    expected = reader.latest(JOB)
    # GIVEN DynamoDB leaves the LATEST item unprocessed once (the lock and slot items are answered)
    unprocessed["table"] = world.results_table
    request_log.clear()
    # WHEN latest is read with its freshness
    stored, freshness = latest_with_freshness(reader, JOB)
    # THEN one BatchGetItem across both tables, each strongly consistent, then one for the LATEST item alone, after a
    # short back-off; the result is the one GetItem reads
    first, second = request_log.requests("BatchGetItem")
    assert set(first["RequestItems"]) == {world.results_table, world.lock_table}
    assert all(entry["ConsistentRead"] is True for entry in first["RequestItems"].values())
    assert second["RequestItems"] == {world.results_table: first["RequestItems"][world.results_table]}
    assert sleeps == [0.05]
    assert stored == expected and freshness["slot"] == expected.slot_iso and freshness["state"] is not None
    # AND left unprocessed every time, it is a backend failure after the bounded attempts
    unprocessed.update(fail=1_000, calls=0)
    sleeps.clear()
    with pytest.raises(BackendUnavailableError, match="unprocessed 5 times"):
        latest_with_freshness(reader, JOB)
    assert sleeps == [0.05, 0.1, 0.2, 0.4]


# ---------------------------------------------------------------------------------------------------
# history
# ---------------------------------------------------------------------------------------------------
@pytest.mark.backends("moto")  # plain reads
def test_history_is_one_query_on_the_index_newest_first_with_what_each_run_recorded(
    reader: ResultsReader, world: Any, request_log: Any
) -> None:
    s0, s1, s2, s3, s4 = sorted({slot for slot, _, _ in world.history})

    # WHEN the history is read in one page
    request_log.clear()
    view = reader.history(JOB)

    # THEN it is one Query on the history index, newest first, never a Scan
    assert request_log.operations == ["Query"]
    [query] = request_log.requests("Query")
    assert (query["IndexName"], query["ScanIndexForward"], query["Limit"]) == ("history", False, 50)
    assert "ExclusiveStartKey" not in query and "FilterExpression" not in query
    assert ids(view.entries) == expected_ids(world)
    assert (view.next_token, view.limit, view.filters) == (None, 50, {"from": None, "to": None, "status": None})

    # AND each entry carries what its writer recorded
    entries = {(entry["slot"], entry["generation"]): entry for entry in view.entries}
    done = entries[(s3.iso, 1)]
    assert (done["fencing_token"], done["owner_id"], done["query_execution_id"]) == (3, "racer-3", "qe-s3")
    assert (done["data_scanned_bytes"], done["row_count"], done["run_kind"]) == (7_340_032, 3, None)
    assert done["duration_ms"] == done["finished_at_ms"] - done["started_at_ms"] == 4_000
    # the cost estimate its commit recorded (labelled an estimate); results committed without one show none
    assert done["estimated_cost_usd"] == world.latest_cost["estimated_cost_usd"] > 0
    assert done["cost"] == world.latest_cost and done["cost"]["estimate"] is True
    assert entries[(s0.iso, 2)]["estimated_cost_usd"] is None and entries[(s0.iso, 2)]["cost"] is None
    running = entries[(s4.iso, 1)]
    assert (running["owner_id"], running["fencing_token"], running["query_execution_id"]) == ("racer-4", 4, "qe-s4")
    assert (running["finished_at_ms"], running["duration_ms"], running["row_count"]) == (None, None, None)
    missed = entries[(s2.iso, 1)]
    assert (missed["reason"], missed["fencing_token"]) == ("superseded", None)
    assert missed["error"] is not None and missed["error"]["holder_slot"] == s3.iso
    failed = entries[(s1.iso, 1)]
    assert (failed["error"], failed["row_count"], failed["query_execution_id"]) == ({"type": "QueryFailed"}, None, None)
    requested = entries[(s1.iso, 2)]
    assert (requested["run_kind"], requested["run_id"], requested["requested_by"]) == ("rerun", "op-2", OPERATOR)
    assert (requested["request_reason"], requested["owner_id"], requested["started_at_ms"]) == ("retry", None, None)
    assert requested["requested_at_ms"] is not None
    rerun = entries[(s0.iso, 2)]
    assert (rerun["owner_id"], rerun["run_id"], rerun["fencing_token"], rerun["row_count"]) == (
        "manual-1",
        "op-1",
        1,
        2,
    )
    assert rerun["query_execution_id"] == f"qe-{JOB}-{s0.epoch_s}-g2"
    assert all(entry["corrupt"] is None for entry in view.entries)
    # AND every entry is a documented SlotEntry
    for entry in view.entries:
        models.SlotEntry.model_validate(json.loads(json.dumps(entry)))


def test_pages_follow_next_token_to_the_end_each_record_once(
    reader: ResultsReader, world: Any, request_log: Any
) -> None:
    for limit in (1, 2, 3):
        check_pages(reader, world, request_log, limit)


def check_pages(reader: ResultsReader, world: Any, request_log: Any, limit: int) -> None:
    # WHEN the history is read ``limit`` items per page, following next_token until it is None
    request_log.clear()
    pages = all_pages(reader, JOB, limit=limit)

    # THEN every page was one Query (never a Scan), continued from the previous page's key
    assert request_log.operations == ["Query"] * len(pages)
    queries = request_log.requests("Query")
    assert all(query["Limit"] == limit for query in queries)
    assert "ExclusiveStartKey" not in queries[0] and all("ExclusiveStartKey" in query for query in queries[1:])
    # AND no page is longer than the limit; together they hold every record exactly once
    assert all(len(page.entries) <= limit for page in pages)
    records = [entry for page in pages for entry in page.entries]
    assert sorted(ids(records), reverse=True) == expected_ids(world)
    assert len(records) == len(set(ids(records))) == 7
    # AND newest first: slots never go up from page to page, and each page is in (slot, generation) order.
    # (The generations of one slot share the index's sort key, whose order DynamoDB leaves undefined: where
    # they straddle a page break their order across it is DynamoDB's; slotlock.history documents this.)
    slots = [entry["slot"] for entry in records]
    assert slots == sorted(slots, reverse=True)
    for page in pages:
        keys = [(entry["slot"], entry["generation"]) for entry in page.entries]
        assert keys == sorted(keys, reverse=True)
    # (7 records: ceil(7 / limit) pages, plus at most one empty page when the last one was exactly full)
    assert -(-7 // limit) <= len(pages) <= -(-7 // limit) + 1


@pytest.mark.backends("moto")  # plain reads
def test_from_and_to_bound_the_slots(reader: ResultsReader, world: Any) -> None:
    s0, s1, s2, s3, _ = sorted({slot for slot, _, _ in world.history})
    expected = expected_ids(world)
    assert ids(reader.history(JOB, since=s1.iso).entries) == expected[:5]
    assert ids(reader.history(JOB, until=s1.iso).entries) == expected[3:]
    assert ids(reader.history(JOB, since=s1.iso, until=s2.iso).entries) == expected[2:5]
    assert ids(reader.history(JOB, since=s3.iso, until=s3.iso).entries) == [expected[1]]
    assert reader.history(JOB, since="2026-11-22T02:01:00Z").entries == []
    assert reader.history(JOB, until="2026-11-21T23:59:00Z").entries == []
    # any ISO 8601 form, echoed canonical in the filters
    view = reader.history(JOB, since="2026-11-22T01:30:00+01:00", until="2026-11-22T01:00:30.5Z")
    assert ids(view.entries) == expected[2:5]
    assert view.filters == {"from": s1.iso, "to": s2.iso, "status": None}
    # with the status filter too
    assert ids(reader.history(JOB, since=s1.iso, status="REQUESTED").entries) == [(s1.iso, 2, "REQUESTED")]
    assert ids(reader.history(JOB, until=s0.iso, status="SUCCEEDED").entries) == expected[5:]
    # and another job's history is its own
    assert ids(reader.history(PAUSED_JOB).entries) == [(s0.iso, 1, "SUCCEEDED")]
    assert reader.history(IDLE_JOB).entries == []


def test_a_status_filter_pages_through_exactly_the_records_of_that_status(
    reader: ResultsReader, world: Any, request_log: Any
) -> None:
    for status in ("REQUESTED", "RUNNING", "SUCCEEDED", "FAILED", "MISSED"):
        check_status_pages(reader, world, request_log, status)


def check_status_pages(reader: ResultsReader, world: Any, request_log: Any, status: str) -> None:
    # WHEN one status is read two evaluated items per page
    request_log.clear()
    pages = all_pages(reader, JOB, status=status, limit=2)

    # THEN each page was one Query with the filter; pages may be short, even empty (the filter runs after Limit)
    assert request_log.operations == ["Query"] * len(pages)
    assert all(
        query["ExpressionAttributeValues"][":status"] == {"S": status} for query in request_log.requests("Query")
    )
    assert all(len(page.entries) <= 2 for page in pages)
    # AND together they hold exactly the records of that status, each once, newest slot first (the generations
    # of one slot that straddle a page break come in DynamoDB's order, see the test above)
    records = [entry for page in pages for entry in page.entries]
    assert sorted(ids(records), reverse=True) == expected_ids(world, status)
    assert len(records) == len(set(ids(records)))
    slots = [entry["slot"] for entry in records]
    assert slots == sorted(slots, reverse=True)
    assert all(page.filters["status"] == status for page in pages)


@pytest.mark.parametrize(
    ("params", "parameter"),
    [
        ({"since": "garbage"}, "from"),
        ({"until": "2026-11-22T00:30:00"}, "to"),
        ({"since": "2026-11-22T00:30:00Z\x00"}, "from"),
        ({"until": "x" * 1_000_000}, "to"),
        ({"since": "2026-11-22T01:00:00Z", "until": "2026-11-22T00:00:00Z"}, "from"),
        ({"status": "DONE"}, "status"),
        ({"status": "succeeded"}, "status"),
        ({"status": ""}, "status"),
        ({"status": "S" * 1_000_000}, "status"),
        ({"limit": 0}, "limit"),
        ({"limit": 1001}, "limit"),
        ({"limit": -1}, "limit"),
        ({"limit": True}, "limit"),
        ({"limit": "10"}, "limit"),
        ({"limit": 2.5}, "limit"),
        ({"next_token": ""}, "next_token"),
    ],
    ids=lambda value: repr(value)[:40] if isinstance(value, dict) else str(value),
)
def test_a_bad_history_parameter_is_named_before_any_request(
    offline_reader: ResultsReader, offline_requests: Any, params: dict[str, Any], parameter: str
) -> None:
    reader = offline_reader
    with pytest.raises(BadParameterError) as caught:
        reader.history(JOB, **params)
    assert caught.value.parameter == parameter and len(caught.value.message) < MAX_MESSAGE
    assert offline_requests.operations == []


# ---------------------------------------------------------------------------------------------------
# backend failures, schedules, configuration
# ---------------------------------------------------------------------------------------------------
def test_dynamodb_failures_are_backend_unavailable(reader: ResultsReader, ddb: Any) -> None:
    # GIVEN both tables deleted under the reader
    ddb.delete_table(TableName=reader.results_table)
    ddb.delete_table(TableName=reader.lock_table)
    # WHEN / THEN every read is a 503 naming what it could not read, never another exception
    reads: list[tuple[Callable[[], Any], str]] = [
        (lambda: reader.latest(JOB), "latest result"),
        (lambda: reader.result(JOB, "2026-11-22T00:00:00Z"), "result"),
        (lambda: reader.result(JOB, "2026-11-22T00:00:00Z", 1), "result"),
        (lambda: reader.jobs(), "lock and LATEST items"),
        (lambda: reader.history(JOB), "history"),
    ]
    for read, what in reads:
        with pytest.raises(BackendUnavailableError) as caught:
            read()
        assert what in caught.value.message and caught.value.status == 503


@pytest.mark.backends("moto")  # no DynamoDB reached
def test_a_connection_failure_is_backend_unavailable(reader: ResultsReader, ddb: Any) -> None:
    # GIVEN every DynamoDB call fails to connect (after botocore's retries)
    def refuse(**_: Any) -> None:
        raise EndpointConnectionError(endpoint_url="https://dynamodb.us-east-1.amazonaws.com")

    ddb.meta.events.register("before-call.dynamodb", refuse)
    try:
        for read in (lambda: reader.latest(JOB), reader.jobs, lambda: reader.history(JOB)):
            with pytest.raises(BackendUnavailableError, match="Could not connect"):
                read()
    finally:
        ddb.meta.events.unregister("before-call.dynamodb", refuse)


def test_the_next_slot_follows_the_jobs_schedule(
    offline_reader: ResultsReader, clock: Any, catalog: dict[str, CatalogQuery], offline_requests: Any
) -> None:
    s4 = Slot.parse("2026-11-22T02:00:00Z")
    clock.now = s4.epoch_ms + 7_000
    reader = offline_reader
    reader.catalog[TAMPERED_JOB] = CatalogQuery("SELECT 3 AS c", (), schedule=CatalogSchedule("cron(bad)"))
    # half-hourly: the next half hour after the clock (S4 + 7 s)
    assert reader.next_slot(JOB) == Slot(s4.epoch_s + 1800).datetime
    assert reader.next_slot(JOB, s4.epoch_ms) == Slot(s4.epoch_s + 1800).datetime  # strictly after
    # daily at 06:00 New York time (EST in November: 11:00Z)
    assert reader.next_slot(IDLE_JOB) == Slot.parse("2026-11-22T11:00:00Z").datetime
    # no schedule in the catalog, or one that cannot be evaluated: unknown
    assert reader.next_slot(PAUSED_JOB) is None
    assert reader.next_slot(TAMPERED_JOB) is None
    # AND the schedule is the catalog's: DynamoDB is not asked
    assert offline_requests.operations == []


def test_from_env_reads_the_tables_and_the_catalog(tmp_path: Path, catalog: dict[str, CatalogQuery]) -> None:
    path = tmp_path / "job_catalog.json"
    path.write_text(json.dumps(catalog_document(catalog)), encoding="utf-8")
    env = {
        contract.ENV_LOCK_TABLE_NAME: "locks",
        contract.ENV_RESULTS_TABLE_NAME: " results ",
        contract.ENV_JOB_CATALOG_PATH: str(path),
    }
    reader = ResultsReader.from_env(env)
    assert (reader.lock_table, reader.results_table) == ("locks", "results")
    assert reader.catalog == catalog and reader.job_names() == sorted(catalog)
    for missing in (contract.ENV_LOCK_TABLE_NAME, contract.ENV_RESULTS_TABLE_NAME):
        with pytest.raises(ConfigurationError, match=missing):
            ResultsReader.from_env({**env, missing: "  "})
    with pytest.raises(ConfigurationError, match="not found"):
        ResultsReader.from_env({**env, contract.ENV_JOB_CATALOG_PATH: str(tmp_path / "absent.json")})
